-- Shared by exchange.lua and peek.lua (prepended to each). The keys and rules are the
-- in-memory store's (turns/src/store.rs); docs/deploy.md gives the reasons.
--
-- KEYS[1] the session hash: `seen` (ms, the store's own clock, so replicas' clocks never
--         matter), `order` (JSON array of the recent turn ids, oldest first), `t:<turn>`
--         (that turn's latches) and `f:<turn>` (when the turn was first written, ms)
-- KEYS[2] the set of this session's forgotten latched turns (their ids)
-- KEYS[3] the store's marker hash: `epoch`, `created` (ms), `seq` (a counter that only
--         grows, by one with every latch written), `lost_until` and `lost_at` (ms: until
--         when, and since when, the store is known to have lost state)
-- ARGV[1] turn, ARGV[2] ttl ms, ARGV[3] keep-expired ms, ARGV[4] the epoch this replica saw
--         ("" if none yet), ARGV[5] the epoch to write when the marker is missing,
--         ARGV[6] the highest `seq` this replica saw, ARGV[7] "new" when the operator
--         declared the store new (`--state-new`), else ""
--
-- Latches are "" (none), "*" (every latch) or sorted names joined by ",".
-- Replies are {origin, carried latches, epoch, seq}; origin "new", "carried" or "expired".

local turn, ttl, keep = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local known, proposed = ARGV[4], ARGV[5]
local known_seq, declared_new = tonumber(ARGV[6]), ARGV[7] == 'new'
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

-- Whether the store may have lost latched turns: {in_loss, epoch, lost_at, seq}.
--
-- A loss is seen four ways: the marker is missing (a flush, or a restart without
-- persistence) and either this replica saw an epoch before or the operator did not declare
-- the store new; another replica has written a new epoch since this one saw its own; or the
-- marker's `seq` is below the highest this replica saw (a restart from an older snapshot, a
-- failover to a replica that lagged). The first replica to see it writes `lost_until` and
-- `lost_at` into the marker, so every replica sees it, one started after the loss included.
-- Until `lost_until` (the horizon within which the store would still have recognised a
-- latched turn: TTL + keep-expired), a turn the store does not hold, or first wrote before
-- `lost_at`, is judged as a forgotten latched turn.
local function marker(write)
  local m = redis.call('HMGET', KEYS[3], 'epoch', 'created', 'seq', 'lost_until', 'lost_at')
  local epoch = m[1]
  local created = tonumber(m[2] or now)
  local seq = tonumber(m[3] or '0')
  local lost_until, lost_at = tonumber(m[4] or '0'), tonumber(m[5] or '0')
  local until_ = 0
  if not epoch then
    epoch, created, seq = proposed, now, 0
    if known ~= '' or known_seq > 0 or not declared_new then until_ = now + ttl + keep end
    if write then redis.call('HSET', KEYS[3], 'epoch', epoch, 'created', now, 'seq', 0) end
  elseif known ~= '' and known ~= epoch then
    until_ = created + ttl + keep
  end
  if seq < known_seq then
    until_ = math.max(until_, now + ttl + keep)
    seq = known_seq
    if write then redis.call('HSET', KEYS[3], 'seq', seq) end
  end
  if until_ > lost_until then
    lost_until, lost_at = until_, now
    if write then redis.call('HSET', KEYS[3], 'lost_until', lost_until, 'lost_at', lost_at) end
  end
  return now < lost_until, epoch, lost_at, seq
end
