-- Shared by exchange.lua, peek.lua, marker.lua, hook.lua, budget_only.lua and approvals.lua
-- (prepended to each, after a first line `local writes = ...` saying whether this run may
-- write the marker; session.lua comes after it for exchange.lua and peek.lua). The keys and
-- rules are the in-memory store's (turns/src/store.rs); docs/deploy.md gives the reasons.
--
-- KEYS[1] the session (session.lua; hook.lua has its own): one string, "<seen>|<old>|<n>" then, for each of its n recent turns,
--         oldest first, "\n<id>\1<latches>\2<first>". `seen` is when the session was last
--         written (ms, the store's own clock, so replicas' clocks never matter), `old` how
--         many ids KEYS[2] holds (so a session with none never asks), `first` when the turn
--         was first written (ms). In ids, `%`, "\n", "\1" and "\2" are written %XX (by the
--         replica, in ARGV[1] already).
-- KEYS[2] the set of this session's forgotten latched turns (their ids, written as above)
-- KEYS[3] the marker of the session's cluster slot, a hash: `epoch`, `created` (ms), `seq`
--         (a counter that only grows, by one with every latch written in the slot),
--         `lost_until` and `lost_at` (ms: until when, and since when, the slot is known to
--         have lost state). Every slot has its own, in that slot (its key's hash tag is
--         chosen to land there), so a script touches one slot, and a shard that lost its
--         data is detected on its own.
-- ARGV[1] turn, ARGV[2] ttl ms, ARGV[3] keep-expired ms, ARGV[4] the epoch this replica saw
--         in this slot ("" if none yet), ARGV[5] the epoch to write when the marker is
--         missing, ARGV[6] the highest `seq` this replica saw in this slot, ARGV[7] "new"
--         when the operator declared the store new (`--state-new`), else ""
--
-- Latches are "" (none), "*" (every latch) or sorted names joined by ",".
-- Replies are {origin, carried latches, epoch, seq}; origin "new", "carried" or "expired".
--
-- Every Lua operation counts here (a string made, a closure, a redis.call): the common path
-- makes no closure, formats no number but `now`, and re-serialises nothing it did not change.

local turn, ttl, keep = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local known, known_seq = ARGV[4], tonumber(ARGV[6])
local find, sub = string.find, string.sub
local clock = redis.call('TIME')
local now = clock[1] * 1000 + math.floor(clock[2] / 1000)
local nows = tostring(now)

-- Whether the slot may have lost latched turns (in_loss, since lost_at).
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
local m = redis.call('HMGET', KEYS[3], 'epoch', 'created', 'seq', 'lost_until', 'lost_at')
local epoch, created = m[1], m[2]
local seq, lost_until, lost_at = tonumber(m[3] or 0), tonumber(m[4] or 0), tonumber(m[5] or 0)
local marker_changed, until_ = false, 0
if not epoch then
  epoch, created, seq, lost_until, lost_at = ARGV[5], now, 0, 0, 0
  marker_changed = true
  if known ~= '' or known_seq > 0 or ARGV[7] ~= 'new' then until_ = now + ttl + keep end
elseif known ~= '' and known ~= epoch then
  until_ = tonumber(created) + ttl + keep
end
if seq < known_seq then
  until_ = math.max(until_, now + ttl + keep)
  seq = known_seq
  marker_changed = true
end
if until_ > lost_until then
  lost_until, lost_at = until_, now
  marker_changed = true
end
if marker_changed and writes then
  redis.call('HSET', KEYS[3], 'epoch', epoch, 'created', created, 'seq', seq,
    'lost_until', lost_until, 'lost_at', lost_at)
end
local in_loss = now < lost_until
