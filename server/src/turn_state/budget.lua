-- Budget counts over batches (redis_store/budgets.rs says why this is safe between replicas).
-- Prepended after session.lua to exchange.lua, and alone after common.lua to budget_only.lua
-- (a batch with no session, one whose counts wait for a judgement with the turn's latches, or,
-- in a cluster, the counts in one slot other than the session's: a principal's, a tenant's).
-- Every count of one call is in the slot of KEYS[3], the marker that judges it.
-- The first line before it, `local B = N`, says where its arguments start.
--
-- ARGV[B] how many counts (0: nothing below reads or writes), ARGV[B + 1] the most entries
-- a window keeps; then five arguments per count i, whose key is KEYS[3 + i]: the window (ms,
-- 0 for none), the limit, the count the batch was judged with, what its allowed calls
-- consumed, and "1" when a call was denied by this budget.
--
-- A count's value: "<first>|<base>|" then "<t>:<amount>," per windowed entry, oldest first.
-- `first` is when it was first written after the store was known whole (ms), `base` what
-- unwindowed consumption it holds; each entry counts until `t` is a window old. Amounts are
-- written with 17 digits, so they read back as the replica's f64.
--
-- A count the store may have lost (the marker saw a loss, and the count is missing or older
-- than it) is taken as spent in full, stamped now, and trusted from then on: as a lost turn is
-- judged latched, a lost count denies, until its window (at least the loss's horizon) has
-- passed.
--
-- The batch was judged with counts read before this script (a replica's last answer); it
-- stands if, for every count, what the store holds now would have judged it the same or
-- more strictly: the same count; or one at least as high under which the allowed calls still
-- fit; or a lower one when no call was denied by the budget. Otherwise the reply is
-- {"budget", "", epoch, seq, "conflict", counts...}, nothing is written, and the replica
-- judges again with those counts.

local bn = tonumber(ARGV[B] or '0')
local bcap = tonumber(ARGV[B + 1] or '0')
-- A batch with no count (most batches) makes none of the tables and functions below: in
-- Redis's Lua each costs a fraction of a microsecond per script run.
local bused, bstate, bconflict, bfmt, budget_commit
if bn > 0 then
  bused, bstate, bconflict = {}, {}, false
  bfmt = function(x) return string.format('%.17g', x) end
  for i = 1, bn do
    local o = B + 2 + (i - 1) * 5
    local window, limit = tonumber(ARGV[o]), tonumber(ARGV[o + 1])
    local assumed, spend, denied = tonumber(ARGV[o + 2]), tonumber(ARGV[o + 3]), ARGV[o + 4] == '1'
    local raw = redis.call('GET', KEYS[3 + i])
    local c = {window = window, spend = spend, first = nil, base = 0, ts = {}, as = {},
      exists = raw ~= false and raw ~= nil, dirty = false, filled = false}
    if c.exists then
      local _, he, f, b = find(raw, '^(%d+)|([^|]*)|')
      if not he then return redis.error_reply('toolgate: unreadable budget count') end
      c.first, c.base = tonumber(f), tonumber(b) or 0
      for t, a in string.gmatch(sub(raw, he + 1), '(%d+):([^,]*),') do
        c.ts[#c.ts + 1], c.as[#c.as + 1] = tonumber(t), tonumber(a) or 0
      end
    end
    if (not c.first or c.first < lost_at) and now < math.max(lost_until, lost_at + window) then
      c.first, c.base, c.ts, c.as, c.dirty, c.filled = now, 0, {}, {}, true, true
      if window > 0 then c.ts[1], c.as[1] = now, limit else c.base = limit end
    end
    if window > 0 then
      local k = 1
      while k <= #c.ts and now - c.ts[k] >= window do k = k + 1 end
      if k > 1 then
        local ts, as = {}, {}
        for j = k, #c.ts do ts[#ts + 1], as[#as + 1] = c.ts[j], c.as[j] end
        c.ts, c.as, c.dirty = ts, as, true
      end
    end
    local used = c.base
    for j = 1, #c.as do used = used + c.as[j] end
    c.used = used
    bused[i] = used
    bstate[i] = c
    if not (used == assumed or (used + spend <= limit and (used >= assumed or not denied))) then
      bconflict = true
    end
  end
  if bconflict then
    local reply = {'budget', '', epoch, tostring(seq), 'conflict'}
    for i = 1, bn do reply[#reply + 1] = bfmt(bused[i]) end
    return reply
  end

  -- Adds the batch's consumption to every count and keeps each for its life: a window and a
  -- minute past its last entry, an unwindowed count TTL + keep-expired after its last use (as
  -- long as the turn state that names its session or turn).
  budget_commit = function()
    local added = false
    for i = 1, bn do
      local c = bstate[i]
      if c.spend > 0 then
        if c.window > 0 then
          c.ts[#c.ts + 1], c.as[#c.as + 1] = now, c.spend
          while #c.ts > bcap do
            -- The oldest two merged under the later time: counted at least as long.
            c.as[2] = c.as[2] + c.as[1]
            table.remove(c.ts, 1)
            table.remove(c.as, 1)
          end
        else
          c.base = c.base + c.spend
        end
        c.dirty, added = true, true
      end
      if c.filled then added = true end
      local life = ttl + keep
      if c.window > 0 then life = c.window + 60000 end
      if c.dirty then
        local parts = {tostring(c.first or now), '|', bfmt(c.base), '|'}
        for j = 1, #c.ts do
          parts[#parts + 1] = tostring(c.ts[j]) .. ':' .. bfmt(c.as[j]) .. ','
        end
        redis.call('SET', KEYS[3 + i], table.concat(parts), 'PX', life)
      elseif c.exists then
        redis.call('PEXPIRE', KEYS[3 + i], life)
      end
      bused[i] = c.used + c.spend
    end
    -- A count written moves the marker's counter, as a latch does: a restore to an older
    -- snapshot, or a failover to a replica that lagged, is then seen.
    if added then seq = redis.call('HINCRBY', KEYS[3], 'seq', 1) end
  end
end
