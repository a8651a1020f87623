-- The state a turn would carry, changing nothing (`/v1/offer`).

local in_loss, epoch = marker(false)
if redis.call('SISMEMBER', KEYS[2], turn) == 1 then return {'expired', '*', epoch} end
local held = redis.call('HGET', KEYS[1], 't:' .. turn)
if not held then
  if in_loss then return {'expired', '*', epoch} end
  return {'new', '', epoch}
end
local seen = tonumber(redis.call('HGET', KEYS[1], 'seen') or now)
if now - seen > ttl then
  if held ~= '' then return {'expired', '*', epoch} end
  return {'new', '', epoch}
end
return {'carried', held, epoch}
