-- One batch of one turn in one round trip: the state the store holds for the turn, with the
-- latches the batch sets by itself unioned in. Nothing here removes a latch: a turn's value
-- only grows by union, and a turn leaves the session only into KEYS[2] when it had any, so
-- two replicas racing on one turn end with the union of both.
-- ARGV[8] own latches, ARGV[9] recent turns kept, ARGV[10] most forgotten latched turns.
-- Reply {"too_many"} when a new turn would push out one latched turn too many.
-- budget.lua comes before this part: its counts are added here only when the turn carried no
-- latch the batch did not set by itself (the replica judged the batch with only its own
-- latches, so with more it may allow other calls); else the reply says "deferred" and the
-- replica, once it has judged the batch with the turn's latches, adds them with
-- budget_only.lua. Reply {origin, carried, epoch, seq, budget status, counts...}: the status
-- "" (no count), "ok" (added; the counts after the batch) or "deferred" (the counts now).

local own = ARGV[8]
if not raw then
  -- A new session (or one gone past its life): its forgotten set, if one outlived it.
  seen, old, n, body = now, redis.call('SCARD', KEYS[2]), 0, ''
end
if now - seen > ttl then
  -- Idle past the TTL: exact state goes; latched turns are remembered as forgotten ones.
  for id, l in string.gmatch(body, '\n([^\1]*)\1([^\2]*)\2') do
    if l ~= '' then old = old + redis.call('SADD', KEYS[2], id) end
  end
  n, body, held = 0, '', nil
end

local origin, carried, base
local wrote_latch = false
if held and in_loss
    and tonumber(sub(body, le + 1, (find(body, '\n', le + 1, true) or 0) - 1)) < lost_at then
  -- Written before the loss was seen: it may have lost latches since, or have been written
  -- by a replica that did not know. Every latch, and trusted from now on.
  origin, carried = 'expired', '*'
  local next_ = find(body, '\n', le + 1, true)
  body = sub(body, 1, at) .. '*\2' .. nows .. (next_ and sub(body, next_) or '')
  wrote_latch = true
elseif held then
  origin, carried, base = 'carried', held, held
else
  if old > 0 and redis.call('SREM', KEYS[2], key) == 1 then
    origin, carried = 'expired', '*'
    old = old - 1
  elseif in_loss then
    origin, carried = 'expired', '*'
  else
    origin, carried = 'new', ''
  end
  base = carried
  if n >= tonumber(ARGV[9]) then
    -- The oldest turn goes; into KEYS[2] if it had a latch.
    local ie = find(body, '\1', 2, true)
    local latched = sub(body, ie + 1, ie + 1) ~= '\2'
    if latched then
      if origin == 'new' and old >= tonumber(ARGV[10]) then return {'too_many'} end
      old = old + redis.call('SADD', KEYS[2], sub(body, 2, ie - 1))
    end
    local next_ = find(body, '\n', ie, true)
    body = next_ and sub(body, next_) or ''
    n = n - 1
  end
end

local union
if base then
  -- base ∪ own, without a closure or a table in the common cases.
  local value = base
  if own == '' or own == base then
    value = base
  elseif base == '' then
    value = own
  elseif base == '*' or own == '*' then
    value = '*'
  else
    local seen_, out = {}, {}
    for name in string.gmatch(base .. ',' .. own, '[^,]+') do
      if not seen_[name] then
        seen_[name] = true
        out[#out + 1] = name
      end
    end
    table.sort(out)
    value = table.concat(out, ',')
  end
  union = value
  if held and not wrote_latch then
    if value ~= held then
      body = sub(body, 1, at) .. value .. sub(body, le)
      wrote_latch = true
    end
  else
    body = body .. '\n' .. key .. '\1' .. value .. '\2' .. nows
    n = n + 1
    wrote_latch = value ~= ''
  end
end
if wrote_latch then seq = redis.call('HINCRBY', KEYS[3], 'seq', 1) end

-- A session that holds no latch goes after the TTL; one that does, after TTL + keep.
local life = ttl
if old > 0 or find(body, '\1[^\2]') then life = ttl + keep end
redis.call('SET', KEYS[1], nows .. '|' .. old .. '|' .. n .. body, 'PX', life)
if old > 0 then redis.call('PEXPIRE', KEYS[2], life) end
local bstatus = ''
if bn > 0 then
  if carried == '' or union == own then
    budget_commit()
    bstatus = 'ok'
  else
    bstatus = 'deferred'
  end
end
local reply = {origin, carried, epoch, tostring(seq), bstatus}
for i = 1, bn do reply[#reply + 1] = bfmt(bused[i]) end
return reply
