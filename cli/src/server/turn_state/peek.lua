-- The state a turn would carry, changing nothing (`/v1/offer`).

local in_loss = marker()
local s = num(seq)
local seen, old, ids, ls, fs, n = load()
if (not seen or old > 0) and redis.call('SISMEMBER', KEYS[2], turn) == 1 then
  return {'expired', '*', epoch, s}
end
local at
for i = 1, (n or 0) do
  if ids[i] == turn then
    at = i
    break
  end
end
if not at then
  if in_loss then return {'expired', '*', epoch, s} end
  return {'new', '', epoch, s}
end
if in_loss and fs[at] < lost_at then return {'expired', '*', epoch, s} end
if now - seen > ttl then
  if ls[at] ~= '' then return {'expired', '*', epoch, s} end
  return {'new', '', epoch, s}
end
return {'carried', ls[at], epoch, s}
