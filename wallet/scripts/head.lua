-- head: read an account's stored balances and running totals together with
-- the ID of its journal's newest entry, in one atomic step, for Verify.
-- Writes nothing. Runs after lib.lua.
--
-- KEYS[1] account hash  <prefix>:wallet:v2:{<group>}:acct:<account>
-- KEYS[2] journal       <prefix>:wallet:v2:{<group>}:journal:<account>
--
-- Reply: {"not_found"}, or {"ok", posted, held, cr, db, tin, tout, ck,
-- last, tail}: last is the account's record of its newest entry, tail the
-- journal's; they differ when either was rolled back or appended to
-- behind the scripts' back.

local v = redis.call('HMGET', KEYS[1], 'cur', 'posted', 'held', 'cr', 'db', 'tin', 'tout', 'ck', 'last')
if not v[1] then return {'not_found'} end
local tail = redis.call('XREVRANGE', KEYS[2], '+', '-', 'COUNT', '1')
local t = ''
if tail[1] then t = tail[1][1] end
return {'ok', v[2] or '', v[3] or '', v[4] or '', v[5] or '', v[6] or '', v[7] or '', v[8] or '', v[9] or '', t}
