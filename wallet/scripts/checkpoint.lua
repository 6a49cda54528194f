-- checkpoint: append a checkpoint entry carrying the account's balances and
-- trim the journal behind it. Runs after lib.lua.
--
-- KEYS[1] account hash  <prefix>:wallet:v1:{<group>}:acct:<account>
-- KEYS[2] journal       <prefix>:wallet:v1:{<group>}:journal:<account>
--
-- Reply: {entry_id, trimmed} or "not_found" as a status reply.

local a = account(KEYS[1])
if not a then return {'not_found', 0} end
local e = journal(KEYS[1], KEYS[2], '', 'checkpoint', '0', '0', a.posted, a.held, '', '')
local trimmed = redis.call('XTRIM', KEYS[2], 'MINID', e)
redis.call('HSET', KEYS[1], 'ck', e)
return {e, trimmed}
