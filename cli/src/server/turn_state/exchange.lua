-- One batch of one turn in one round trip: the state the store holds for the turn, with the
-- latches the batch sets by itself unioned in. Nothing here removes a latch: a turn's value
-- only grows by union, and a turn leaves the session only into KEYS[2] when it had any, so
-- two replicas racing on one turn end with the union of both.
-- ARGV[8] own latches, ARGV[9] recent turns kept, ARGV[10] most forgotten latched turns.
-- Reply {"too_many"} when a new turn would push out one latched turn too many.
--
-- Cost: TIME, two GETs and one SET in the common case; the marker is written only when it
-- changes (a latch written, a loss seen), KEYS[2] touched only when it holds ids or gets one.

local own = ARGV[8]
local recent_max, old_max = tonumber(ARGV[9]), tonumber(ARGV[10])
local in_loss, _, lost_at = marker()
local wrote_latch = false

local seen, old, ids, ls, fs, n = load()
if not seen then
  -- A new session (or one gone idle past its life): its forgotten set, if one outlived it.
  seen, old, ids, ls, fs, n = now, redis.call('SCARD', KEYS[2]), {}, {}, {}, 0
end
if now - seen > ttl then
  -- Idle past the TTL: exact state goes; latched turns are remembered as forgotten ones.
  for i = 1, n do
    if ls[i] ~= '' then old = old + redis.call('SADD', KEYS[2], ids[i]) end
  end
  ids, ls, fs, n = {}, {}, {}, 0
end

local at
for i = 1, n do
  if ids[i] == turn then
    at = i
    break
  end
end

local origin, carried
if at and in_loss and fs[at] < lost_at then
  -- Written before the loss was seen: it may have lost latches since, or have been written
  -- by a replica that did not know. Every latch, and trusted from now on.
  origin, carried = 'expired', '*'
  ls[at], fs[at] = '*', now
  wrote_latch = true
elseif at then
  local held = ls[at]
  origin, carried = 'carried', held
  local after = union(held, own)
  if after ~= held then
    ls[at] = after
    wrote_latch = true
  end
else
  if old > 0 and redis.call('SREM', KEYS[2], turn) == 1 then
    origin, carried = 'expired', '*'
    old = old - 1
  elseif in_loss then
    origin, carried = 'expired', '*'
  else
    origin, carried = 'new', ''
  end
  if n >= recent_max then
    local latched = ls[1] ~= ''
    if latched and origin == 'new' and old >= old_max then
      if marker_changed then save_marker() end
      return {'too_many'}
    end
    if latched then old = old + redis.call('SADD', KEYS[2], ids[1]) end
    table.remove(ids, 1)
    table.remove(ls, 1)
    table.remove(fs, 1)
    n = n - 1
  end
  n = n + 1
  local value = union(carried, own)
  ids[n], ls[n], fs[n] = turn, value, now
  wrote_latch = value ~= ''
end
if wrote_latch then
  seq = seq + 1
  marker_changed = true
end
if marker_changed then save_marker() end

-- A session that holds no latch goes after the TTL; one that does, after TTL + keep.
local holds = old > 0
local parts = {num(now), '|', num(old), '|'}
for i = 1, n do
  local l = ls[i]
  if l ~= '' then holds = true end
  parts[#parts + 1] = #ids[i] .. ':' .. ids[i] .. l .. '|' .. num(fs[i]) .. '|'
end
local life = ttl
if holds then life = ttl + keep end
redis.call('SET', KEYS[1], table.concat(parts), 'PX', life)
if old > 0 then redis.call('PEXPIRE', KEYS[2], life) end
return {origin, carried, epoch, num(seq)}
