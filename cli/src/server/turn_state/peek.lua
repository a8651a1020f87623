-- The state a turn would carry, changing nothing (`/v1/offer`).

local in_loss, epoch, lost_at, seq = marker(false)
seq = tostring(seq)
if redis.call('SISMEMBER', KEYS[2], turn) == 1 then return {'expired', '*', epoch, seq} end
local held = redis.call('HGET', KEYS[1], 't:' .. turn)
if not held then
  if in_loss then return {'expired', '*', epoch, seq} end
  return {'new', '', epoch, seq}
end
local first = tonumber(redis.call('HGET', KEYS[1], 'f:' .. turn) or '0')
if in_loss and first < lost_at then return {'expired', '*', epoch, seq} end
local seen = tonumber(redis.call('HGET', KEYS[1], 'seen') or now)
if now - seen > ttl then
  if held ~= '' then return {'expired', '*', epoch, seq} end
  return {'new', '', epoch, seq}
end
return {'carried', held, epoch, seq}
