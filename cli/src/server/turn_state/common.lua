-- Shared by exchange.lua and peek.lua (prepended to each). The keys and rules are the
-- in-memory store's (engine/src/sessions.rs); docs/deploy.md gives the reasons.
--
-- KEYS[1] the session hash: `seen` (ms, the store's own clock, so replicas' clocks never
--         matter), `order` (JSON array of the recent turn ids, oldest first) and
--         `t:<turn>` (that turn's latches)
-- KEYS[2] the set of this session's forgotten latched turns (their ids)
-- KEYS[3] the store's marker hash: `epoch`, `created` (ms), `lost_until` (ms)
-- ARGV[1] turn, ARGV[2] ttl ms, ARGV[3] keep-expired ms, ARGV[4] the epoch this replica saw
--         ("" if none yet), ARGV[5] the epoch to write when the marker is missing
--
-- Latches are "" (none), "*" (every latch) or sorted names joined by ",".
-- Replies are {origin, carried latches, epoch}; origin "new", "carried" or "expired".

local turn, ttl, keep = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local known, proposed = ARGV[4], ARGV[5]
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)

local function union(a, b)
  if a == '*' or b == '*' then return '*' end
  if a == '' then return b end
  if b == '' then return a end
  local seen, out = {}, {}
  for n in string.gmatch(a .. ',' .. b, '[^,]+') do
    if not seen[n] then
      seen[n] = true
      out[#out + 1] = n
    end
  end
  table.sort(out)
  return table.concat(out, ',')
end

-- Whether the store may have lost latched turns, and its epoch. The marker vanishes with
-- the data (a restart without persistence), and a replica that saw an epoch before notices:
-- either the marker is gone, or another replica has written a new epoch since. Every turn
-- the store does not hold is then judged as a forgotten latched turn, until the horizon
-- within which the store would still have recognised one (TTL + keep-expired) has passed.
local function marker(write)
  local epoch = redis.call('HGET', KEYS[3], 'epoch')
  local lost_until = tonumber(redis.call('HGET', KEYS[3], 'lost_until') or '0')
  if not epoch then
    epoch = proposed
    if known ~= '' then lost_until = now + ttl + keep end
    if write then
      redis.call('HSET', KEYS[3], 'epoch', epoch, 'created', now, 'lost_until', lost_until)
    end
  elseif known ~= '' and known ~= epoch then
    local since = tonumber(redis.call('HGET', KEYS[3], 'created') or now) + ttl + keep
    if since > lost_until then
      lost_until = since
      if write then redis.call('HSET', KEYS[3], 'lost_until', lost_until) end
    end
  end
  return now < lost_until, epoch
end
