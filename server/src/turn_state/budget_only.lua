-- A batch's budget counts alone (after common.lua and budget.lua): a batch with no session,
-- one whose counts exchange.lua deferred, or, in a cluster, those in one slot other than the
-- session's (redis_store/budgets.rs, "Counts in other slots"). KEYS[1] and KEYS[2] are the
-- marker's key again (unused); the counts are KEYS[4] on. Reply {"ok", "", epoch, seq, "ok",
-- counts after...}.

if budget_commit then budget_commit() end
local reply = {'ok', '', epoch, tostring(seq), 'ok'}
for i = 1, bn do reply[#reply + 1] = bfmt(bused[i]) end
return reply
