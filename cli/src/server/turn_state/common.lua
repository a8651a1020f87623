-- Shared by exchange.lua, peek.lua and marker.lua (prepended to each). The keys and rules are
-- the in-memory store's (turns/src/store.rs); docs/deploy.md gives the reasons.
--
-- KEYS[1] the session: one string, "<seen>|<old>|" then, for each recent turn, oldest
--         first, "<#id>:<id><latches>|<first>|". `seen` is when the session was last
--         written (ms, the store's own clock, so replicas' clocks never matter), `old` how
--         many ids KEYS[2] holds (so a session with none never asks), `first` when the turn
--         was first written (ms). Turn ids are length-prefixed, so any byte may occur in one.
-- KEYS[2] the set of this session's forgotten latched turns (their ids)
-- KEYS[3] the marker of the session's cluster slot, one string
--         "<epoch>|<created>|<seq>|<lost_until>|<lost_at>": the epoch, when it was created
--         (ms), a counter that only grows (by one with every latch written in this slot),
--         and until when and since when (ms) the slot is known to have lost state. Every
--         slot has its own, in that slot (the key's hash tag is chosen to land there), so a
--         script touches one slot and a shard that lost its data is detected on its own.
-- ARGV[1] turn, ARGV[2] ttl ms, ARGV[3] keep-expired ms, ARGV[4] the epoch this replica saw
--         in this slot ("" if none yet), ARGV[5] the epoch to write when the marker is
--         missing, ARGV[6] the highest `seq` this replica saw in this slot, ARGV[7] "new"
--         when the operator declared the store new (`--state-new`), else ""
--
-- Latches are "" (none), "*" (every latch) or sorted names joined by ",".
-- Replies are {origin, carried latches, epoch, seq}; origin "new", "carried" or "expired".

local turn, ttl, keep = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local known, proposed = ARGV[4], ARGV[5]
local known_seq, declared_new = tonumber(ARGV[6]), ARGV[7] == 'new'
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
local find, sub, format = string.find, string.sub, string.format

local function num(x)
  return format('%.0f', x)
end

local function union(a, b)
  if a == '*' or b == '*' then return '*' end
  if a == '' then return b end
  if b == '' or a == b then return a end
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

-- The session KEYS[1]: seen, old, and the recent turns' ids, latches and first writes as
-- three arrays, oldest first, with their count. Nil for a missing key; an error (the batch is
-- then judged fail-closed) for a value this version cannot read.
local function load()
  local raw = redis.call('GET', KEYS[1])
  if not raw then return nil end
  local _, e, seen, old = find(raw, '^(%d+)|(%d+)|')
  if not e then error('toolgate: unreadable session value') end
  local ids, ls, fs, n, pos, size = {}, {}, {}, 0, e + 1, #raw
  while pos <= size do
    local _, e1, len = find(raw, '^(%d+):', pos)
    if not e1 then error('toolgate: unreadable session value') end
    local stop = e1 + tonumber(len)
    local _, e2, l, f = find(raw, '^([^|]*)|(%d+)|', stop + 1)
    if not e2 then error('toolgate: unreadable session value') end
    n = n + 1
    ids[n], ls[n], fs[n] = sub(raw, e1 + 1, stop), l, tonumber(f)
    pos = e2 + 1
  end
  return tonumber(seen), tonumber(old), ids, ls, fs, n
end

-- The marker's fields, and whether they changed and must be written back.
local epoch, created, seq, lost_until, lost_at
local marker_changed = false

local function save_marker()
  redis.call('SET', KEYS[3],
    epoch .. '|' .. num(created) .. '|' .. num(seq) .. '|' .. num(lost_until) .. '|' .. num(lost_at))
end

-- Whether the slot may have lost latched turns: {in_loss, epoch, lost_at, seq}; nothing is
-- written here (see save_marker).
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
local function marker()
  local raw = redis.call('GET', KEYS[3])
  if raw then
    local _, _, e, c, s, u, a = find(raw, '^(.-)|(%d+)|(%d+)|(%d+)|(%d+)$')
    if e then
      epoch, created, seq = e, tonumber(c), tonumber(s)
      lost_until, lost_at = tonumber(u), tonumber(a)
    end
  end
  local until_ = 0
  if not epoch then
    epoch, created, seq, lost_until, lost_at = proposed, now, 0, 0, 0
    marker_changed = true
    if known ~= '' or known_seq > 0 or not declared_new then until_ = now + ttl + keep end
  elseif known ~= '' and known ~= epoch then
    until_ = created + ttl + keep
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
  return now < lost_until, epoch, lost_at, seq
end
