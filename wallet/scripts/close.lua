-- close: close an account to new postings. Balances stay readable; the
-- account cannot be reopened. Runs after lib.lua.
--
-- KEYS[1] account hash  <prefix>:wallet:v2:{<group>}:acct:<account>
-- KEYS[2] journal       <prefix>:wallet:v2:{<group>}:journal:<account>
--
-- Reply: "ok" (closed now), "closed" (already closed) or "not_found".

local a = account(KEYS[1])
if not a then return 'not_found' end
if a.closed then return 'closed' end
redis.call('HSET', KEYS[1], 'closed', '1')
journal(KEYS[1], KEYS[2], '', 'close', '0', '0', a.posted, a.held, '', '')
return 'ok'
