-- checkpoint: append a checkpoint entry carrying the account's balances and
-- running totals, and trim the journal behind it. Runs after lib.lua.
--
-- KEYS[1] account hash  <prefix>:wallet:v2:{<group>}:acct:<account>
-- KEYS[2] journal       <prefix>:wallet:v2:{<group>}:journal:<account>
-- ARGV[1] the journal's last entry ID that the caller verified the
--         account against; a checkpoint is only written over a journal
--         that was proved to match, or it would launder drift
--
-- Reply: {entry_id, trimmed}, {"not_found", 0}, or {"moved", 0} when the
-- account's last entry is no longer ARGV[1] (nothing written).

local a = account(KEYS[1])
if not a then return {'not_found', 0} end
local last = redis.call('HGET', KEYS[1], 'last')
local tail = redis.call('XREVRANGE', KEYS[2], '+', '-', 'COUNT', '1')
if last ~= ARGV[1] or not tail[1] or tail[1][1] ~= last then return {'moved', 0} end
-- The totals are copied as stored: they pass 2^53, where a Lua number
-- would round them.
local t = redis.call('HMGET', KEYS[1], 'cr', 'db', 'tin', 'tout')
local e = redis.call('XADD', KEYS[2], '*', 'tx', '', 'kind', 'checkpoint', 'delta', '0', 'hdelta', '0',
                     'posted', str(a.posted), 'held', str(a.held), 'cr', t[1] or '0', 'db', t[2] or '0',
                     'tin', t[3] or '0', 'tout', t[4] or '0')
local trimmed = redis.call('XTRIM', KEYS[2], 'MINID', e)
redis.call('HSET', KEYS[1], 'ck', e, 'last', e)
return {e, trimmed}
