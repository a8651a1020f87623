-- Prepended, after common.lua, to exchange.lua and peek.lua: reads the session KEYS[1]
-- (common.lua says its form).
-- The session, and where `turn` is in it: `held` its latches, `at` the end of its
-- "\n<id>\1" and `le` the position of its "\2" (nil when the session does not hold it).
local key = turn -- escaped by the replica (ARGV[1], common.lua)
local raw = redis.call('GET', KEYS[1])
local seen, old, n, body, held, at, le
if raw then
  local _, he, a, b, c = find(raw, '^(%d+)|(%d+)|(%d+)')
  if not he then return redis.error_reply('toolgate: unreadable session value') end
  seen, old, n, body = tonumber(a), tonumber(b), tonumber(c), sub(raw, he + 1)
  local _, e = find(body, '\n' .. key .. '\1', 1, true)
  if e then
    at, le = e, find(body, '\2', e + 1, true)
    held = sub(body, e + 1, le - 1)
  end
end
