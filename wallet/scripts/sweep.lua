-- sweep: release an account's expired holds and forget decided holds past
-- the window, then report the balance. Used by Balance and by the hold
-- reclaimer. Runs after lib.lua.
--
-- KEYS[1] account hash  <prefix>:wallet:v2:{<group>}:acct:<account>
-- KEYS[2] journal       <prefix>:wallet:v2:{<group>}:journal:<account>
-- KEYS[3] holds hash    <prefix>:wallet:v2:{<group>}:holds:<account>
-- KEYS[4] hold index    <prefix>:wallet:v2:{<group>}:hidx:<account>
-- ARGV[1] idempotency window in milliseconds
-- ARGV[2] the most index entries to handle
--
-- Reply: {status, currency, overdraft, posted, held, closed, handled,
-- next_ms}: status "ok" or "not_found"; next_ms is how long until the next
-- index entry is due (-1: none); then "xt" when the account has begun a
-- transfer across groups that may still be in flight (see post.lua).

local a = account(KEYS[1])
if not a then return {'not_found'} end
local now = now_ms()
local handled = sweep(KEYS[1], KEYS[2], KEYS[3], KEYS[4], a, now, ARGV[1], tonumber(ARGV[2]))
local nxt = redis.call('ZRANGE', KEYS[4], '0', '0', 'WITHSCORES')
local next_ms = '-1'
if nxt[2] then next_ms = str(math.max(0, tonumber(nxt[2]) - now)) end
local r = {'ok'}
for _, x in ipairs(balance_reply(a, a.posted, a.held)) do r[#r + 1] = x end
r[6] = a.closed and '1' or '0'
r[7] = str(handled)
r[8] = next_ms
-- The account has begun a transfer across groups that may still be in
-- flight (see post.lua).
if redis.call('HGET', KEYS[1], 'xt') then r[9] = 'xt' end
return r
