-- A session's approvals under `--state redis://...` (after common.lua, which has read the
-- marker of the session's slot, and written it unless the mode is "list"): the asks waiting
-- for a person and the approvals people gave, each usable once (redis_store/approvals.rs).
--
-- KEYS[1] the session's book, a hash (its key `PREFIX:a:{SESSION}`, the session's hash tag):
--         `p:<digest>` a waiting ask, "<asked>|<expires>|<bytes>" (ms on the store's clock;
--         the bytes of its arguments as JSON); `g:<digest>` an approval, "<at>|<expires>"
--         (when the person approved it, and until when it may be used)
-- KEYS[2] the waiting asks' texts, a hash `<digest>` -> the ask as JSON (`PREFIX:a:{SESSION}:asks`)
-- KEYS[3] the marker of the session's slot (common.lua)
-- ARGV[1..7] as in common.lua (ARGV[1], the turn, is unused)
-- ARGV[8] the mode:
--   "take": ARGV[9..] digests. Each approval of one is removed, and returned if it may be
--     used: unexpired, and not given before the last loss the slot showed (common.lua's
--     `lost_at`: a store that went back in time may hold again an approval that was used). Taking one adds
--     one to the marker's `seq`, so a restore to a snapshot from before the take is seen by
--     every replica that saw the counter after it. Reply {"", "", epoch, seq, then digest,
--     at, expires for each taken}.
--   "finish": ARGV[9] the most waiting asks, ARGV[10] the most bytes of their arguments,
--     ARGV[11] k, then k approvals given back (digest, at, expires), then the asks to record
--     (digest, window ms, bytes, JSON). An approval given back keeps its times, so it is
--     refused after a loss as it would have been; an ask already waiting keeps its first
--     time; an ask over the bytes is not recorded, and past the most asks the oldest goes.
--     Reply {"", "", epoch, seq}.
--   "answer": ARGV[9] the digest, ARGV[10] "approve" or "reject". The waiting ask is removed;
--     approved, its approval may be used until its window from now. Reply {"ok", "", epoch,
--     seq, JSON, asked, window} or {"not_pending", "", epoch, seq}.
--   "list": Reply {"ok", "", epoch, seq, then asked, ms left, JSON for each waiting ask,
--     oldest first}. Writes nothing.
--
-- An ask or an approval written before `lost_at` is not trusted: it may be one the store lost
-- and got back (a restore), so it is as good as gone.

local mode = ARGV[8]
local s = tostring(seq)

local function fields(v)
  local a, b, c = string.match(v, '^(%d+)|(%d+)|?(%d*)$')
  return tonumber(a), tonumber(b), tonumber(c ~= '' and c or 0)
end

-- Whether an entry written at `at` may be trusted: not when written before the last loss the
-- slot showed, even once that loss's horizon for turns has passed (an approval lives up to
-- 24 hours, which may be longer than TTL + keep-expired).
local function trusted(at)
  return at >= lost_at
end

-- Keeps a key alive at least until `expires`.
local function last(key, expires)
  local left = expires - now
  if left > 0 and redis.call('PTTL', key) < left then redis.call('PEXPIRE', key, left) end
end

if mode == 'take' then
  local out = {'', '', epoch, s}
  for i = 9, #ARGV do
    local d = ARGV[i]
    local g = redis.call('HGET', KEYS[1], 'g:' .. d)
    if g then
      redis.call('HDEL', KEYS[1], 'g:' .. d)
      local at, expires = fields(g)
      if expires > now and trusted(at) then
        out[#out + 1] = d
        out[#out + 1] = tostring(at)
        out[#out + 1] = tostring(expires)
      end
    end
  end
  if #out > 4 then out[4] = tostring(redis.call('HINCRBY', KEYS[3], 'seq', 1)) end
  return out
end

if mode == 'list' then
  local all = redis.call('HGETALL', KEYS[1])
  local asks = {}
  for i = 1, #all, 2 do
    if sub(all[i], 1, 2) == 'p:' then
      local asked, expires = fields(all[i + 1])
      if expires > now and trusted(asked) then
        asks[#asks + 1] = {asked, expires, sub(all[i], 3)}
      end
    end
  end
  table.sort(asks, function(x, y)
    if x[1] ~= y[1] then return x[1] < y[1] end
    return x[3] < y[3]
  end)
  local out = {'ok', '', epoch, s}
  for _, a in ipairs(asks) do
    local text = redis.call('HGET', KEYS[2], a[3])
    if text then
      out[#out + 1] = tostring(a[1])
      out[#out + 1] = tostring(a[2] - now)
      out[#out + 1] = text
    end
  end
  return out
end

if mode == 'answer' then
  local d = ARGV[9]
  local p = redis.call('HGET', KEYS[1], 'p:' .. d)
  local text = redis.call('HGET', KEYS[2], d)
  redis.call('HDEL', KEYS[1], 'p:' .. d)
  redis.call('HDEL', KEYS[2], d)
  if not p or not text then return {'not_pending', '', epoch, s} end
  local asked, expires = fields(p)
  if expires <= now or not trusted(asked) then return {'not_pending', '', epoch, s} end
  local window = expires - asked
  if ARGV[10] == 'approve' then
    redis.call('HSET', KEYS[1], 'g:' .. d, nows .. '|' .. tostring(now + window))
    last(KEYS[1], now + window)
  end
  return {'ok', '', epoch, s, text, tostring(asked), tostring(window)}
end

-- "finish": approvals given back, then asks recorded.
local max_pending, max_bytes, k = tonumber(ARGV[9]), tonumber(ARGV[10]), tonumber(ARGV[11])
local i = 12
for _ = 1, k do
  local d, at, expires = ARGV[i], tonumber(ARGV[i + 1]), tonumber(ARGV[i + 2])
  local cur = redis.call('HGET', KEYS[1], 'g:' .. d)
  local later = not cur or select(2, fields(cur)) < expires
  if expires > now and trusted(at) and later then
    redis.call('HSET', KEYS[1], 'g:' .. d, ARGV[i + 1] .. '|' .. ARGV[i + 2])
    last(KEYS[1], expires)
  end
  i = i + 3
end
if i > #ARGV then return {'', '', epoch, s} end

-- What waits now: expired or untrusted entries go.
local all = redis.call('HGETALL', KEYS[1])
local waiting, count, bytes = {}, 0, 0
for j = 1, #all, 2 do
  local f, v = all[j], all[j + 1]
  local kind, d = sub(f, 1, 2), sub(f, 3)
  local at, expires, b = fields(v)
  if expires <= now or not trusted(at) then
    redis.call('HDEL', KEYS[1], f)
    if kind == 'p:' then redis.call('HDEL', KEYS[2], d) end
  elseif kind == 'p:' then
    waiting[d] = {at, b}
    count, bytes = count + 1, bytes + b
  end
end
while i + 3 <= #ARGV do
  local d, window, b, text = ARGV[i], tonumber(ARGV[i + 1]), tonumber(ARGV[i + 2]), ARGV[i + 3]
  i = i + 4
  if not waiting[d] and bytes + b <= max_bytes then
    if count >= max_pending then
      local oldest, first
      for w, e in pairs(waiting) do
        if not first or e[1] < first or (e[1] == first and w < oldest) then oldest, first = w, e[1] end
      end
      if oldest then
        bytes, count = bytes - waiting[oldest][2], count - 1
        waiting[oldest] = nil
        redis.call('HDEL', KEYS[1], 'p:' .. oldest)
        redis.call('HDEL', KEYS[2], oldest)
      end
    end
    waiting[d] = {now, b}
    count, bytes = count + 1, bytes + b
    redis.call('HSET', KEYS[1], 'p:' .. d, nows .. '|' .. tostring(now + window) .. '|' .. tostring(b))
    redis.call('HSET', KEYS[2], d, text)
    last(KEYS[1], now + window)
    last(KEYS[2], now + window)
  end
end
return {'', '', epoch, s}
