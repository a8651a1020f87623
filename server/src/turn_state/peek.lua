-- The state a turn would carry, changing nothing (`/v1/offer`).

local s = tostring(seq)
if (not raw or old > 0) and redis.call('SISMEMBER', KEYS[2], key) == 1 then
  return {'expired', '*', epoch, s}
end
if not held then
  if in_loss then return {'expired', '*', epoch, s} end
  return {'new', '', epoch, s}
end
if in_loss
    and tonumber(sub(body, le + 1, (find(body, '\n', le + 1, true) or 0) - 1)) < lost_at then
  return {'expired', '*', epoch, s}
end
if now - seen > ttl then
  if held ~= '' then return {'expired', '*', epoch, s} end
  return {'new', '', epoch, s}
end
return {'carried', held, epoch, s}
