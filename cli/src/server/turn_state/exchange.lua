-- One batch of one turn in one round trip: the state the store holds for the turn, with the
-- latches the batch sets by itself unioned in. Nothing here removes a latch: a turn's value
-- only grows by union, and a turn leaves the hash only into KEYS[2] when it had any, so two
-- replicas racing on one turn end with the union of both.
-- ARGV[8] own latches, ARGV[9] recent turns kept, ARGV[10] most forgotten latched turns.
-- Reply {"too_many"} when a new turn would push out one latched turn too many.

local own = ARGV[8]
local recent_max, old_max = tonumber(ARGV[9]), tonumber(ARGV[10])
local in_loss, epoch, lost_at, seq = marker(true)
local wrote_latch = false

local order = {}
local raw = redis.call('HGET', KEYS[1], 'order')
if raw then order = cjson.decode(raw) end
local seen = tonumber(redis.call('HGET', KEYS[1], 'seen') or now)
if now - seen > ttl then
  -- Idle past the TTL: exact state goes; latched turns are remembered as forgotten ones.
  for _, id in ipairs(order) do
    local l = redis.call('HGET', KEYS[1], 't:' .. id)
    if l and l ~= '' then redis.call('SADD', KEYS[2], id) end
    redis.call('HDEL', KEYS[1], 't:' .. id, 'f:' .. id)
  end
  order = {}
  redis.call('HDEL', KEYS[1], 'order')
end

local origin, carried
local held = redis.call('HGET', KEYS[1], 't:' .. turn)
local first = tonumber(redis.call('HGET', KEYS[1], 'f:' .. turn) or '0')
if held and in_loss and first < lost_at then
  -- Written before the loss was seen: it may have lost latches since, or have been written
  -- by a replica that did not know. Every latch, and trusted from now on.
  origin, carried = 'expired', '*'
  redis.call('HSET', KEYS[1], 't:' .. turn, '*', 'f:' .. turn, now)
  wrote_latch = true
elseif held then
  origin, carried = 'carried', held
  local after = union(held, own)
  if after ~= held then
    redis.call('HSET', KEYS[1], 't:' .. turn, after)
    wrote_latch = true
  end
else
  if redis.call('SISMEMBER', KEYS[2], turn) == 1 then
    origin, carried = 'expired', '*'
    redis.call('SREM', KEYS[2], turn)
  elseif in_loss then
    origin, carried = 'expired', '*'
  else
    origin, carried = 'new', ''
  end
  if #order >= recent_max then
    local out = order[1]
    local l = redis.call('HGET', KEYS[1], 't:' .. out)
    local latched = l and l ~= ''
    if latched and origin == 'new' and redis.call('SCARD', KEYS[2]) >= old_max then
      return {'too_many'}
    end
    table.remove(order, 1)
    if latched then redis.call('SADD', KEYS[2], out) end
    redis.call('HDEL', KEYS[1], 't:' .. out, 'f:' .. out)
  end
  order[#order + 1] = turn
  local value = union(carried, own)
  redis.call('HSET', KEYS[1], 't:' .. turn, value, 'f:' .. turn, now, 'order', cjson.encode(order))
  wrote_latch = value ~= ''
end
if wrote_latch then seq = redis.call('HINCRBY', KEYS[3], 'seq', 1) end
redis.call('HSET', KEYS[1], 'seen', now)

-- A session that holds no latch goes after the TTL; one that does, after TTL + keep.
local holds = redis.call('SCARD', KEYS[2]) > 0
if not holds then
  for _, id in ipairs(order) do
    local l = redis.call('HGET', KEYS[1], 't:' .. id)
    if l and l ~= '' then
      holds = true
      break
    end
  end
end
local life = ttl
if holds then life = ttl + keep end
redis.call('PEXPIRE', KEYS[1], life)
if redis.call('EXISTS', KEYS[2]) == 1 then redis.call('PEXPIRE', KEYS[2], life) end
return {origin, carried, epoch, tostring(seq)}
