-- A `/v1/hooks` session's turn state (toolgate_turns::SessionTurns, serialized by
-- toolgate_turns::codec) under `--state redis://...`. The turn model is not written again
-- here: the server reads the state, judges the event with the model in Rust, and writes the
-- result back only if no other replica wrote the session in between (compare-and-set on a
-- version). This script adds only what the store must judge: whether it may have lost the
-- session (common.lua's marker), the version check, expiry, and the latch counter.
--
-- KEYS[1] the hook session hash: `s` (the serialized state), `v` (its version, counting
--         writes), `f` (when it was first written after the store was known whole, ms)
-- KEYS[2] unused (KEYS[1] again; common.lua's layout)
-- KEYS[3] the marker of the session's slot (common.lua)
-- ARGV[1..7] as in common.lua (ARGV[1], the turn, is unused)
-- ARGV[8] "read" or "write"; for a write: ARGV[9] the version read, ARGV[10] the new state,
--         ARGV[11] "latched" when the new state holds a latch, ARGV[12] the status the
--         new state was judged from ("ok" or "lost")
-- Reply {status, state, epoch, seq, version, written}: status "ok" or "lost" (the store may
-- have lost this session's latches: judge it as unreadable state), of the state and version
-- the store holds; written "1" when the write happened, else "0" (a read; or another write
-- came first, or a loss was seen since the read: judge again on what is returned).

local mode = ARGV[8]
-- common.lua has read the marker (and written it, for a write: `writes` is mode == 'write').
local cur = redis.call('HMGET', KEYS[1], 's', 'v', 'f')
local state, version, first = cur[1] or '', cur[2] or '0', tonumber(cur[3] or '0')
local status = 'ok'
if in_loss and (state == '' or first < lost_at) then status = 'lost' end
local unwritten = {status, state, epoch, tostring(seq), version, '0'}
if mode == 'read' or version ~= ARGV[9] then return unwritten end
-- The loss was seen between the read and this write: judge again from the lost state.
if status == 'lost' and ARGV[12] ~= 'lost' then return unwritten end

local next_version = tostring(tonumber(version) + 1)
if status == 'lost' or state == '' then first = now end
redis.call('HSET', KEYS[1], 's', ARGV[10], 'v', next_version, 'f', first)
local life = ttl
if ARGV[11] == 'latched' then
  seq = redis.call('HINCRBY', KEYS[3], 'seq', 1)
  life = ttl + keep
end
redis.call('PEXPIRE', KEYS[1], life)
return {'ok', '', epoch, tostring(seq), next_version, '1'}
