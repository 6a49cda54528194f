-- resolve: capture or void an open hold, at most once. Capture posts all
-- or part of the held amount as a debit and releases the rest; void
-- releases it all. Runs after lib.lua.
--
-- KEYS[1] account hash  <prefix>:wallet:v2:{<group>}:acct:<account>
-- KEYS[2] journal       <prefix>:wallet:v2:{<group>}:journal:<account>
-- KEYS[3] holds hash    <prefix>:wallet:v2:{<group>}:holds:<account>
-- KEYS[4] hold index    <prefix>:wallet:v2:{<group>}:hidx:<account>
-- ARGV[1] hold ID
-- ARGV[2] "capture" or "void"
-- ARGV[3] capture amount, decimal 1..hold amount ("0" for void)
-- ARGV[4] call nonce
-- ARGV[5] idempotency window in milliseconds
-- Optional fence: KEYS[5] fence key, ARGV[6] fencing token (see post.lua).
--
-- Reply: {status, replayed, field, time_ms, entry_id, currency, overdraft,
-- posted, held, closed}, all strings. status "ok"; "hold_not_found",
-- "hold_expired", "closed" (capture on a closed account), or "conflict"
-- with field "resolution" (captured vs voided) or "amount"; "stale_fence".
-- Error reply "ERR wallet: invalid: ..." (capture above the held amount,
-- balance bounds): nothing was written.

local id, op, amount_s, nonce, window = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]
if op ~= 'capture' and op ~= 'void' then return invalid('operation') end
local n = 0
if op == 'capture' then
  n = amount(amount_s)
  if not n then return invalid('amount ' .. tostring(amount_s)) end
end

local a = account(KEYS[1])
local h = hold_get(KEYS[3], id)
local now = now_ms()
if not a or not h or h.s == 'refused' then return reply('hold_not_found', false) end
if h.s == 'open' and tonumber(h.x) <= now then h.s = 'expired' end
if h.s == 'expired' then return reply('hold_expired', false) end
local done = {captured = 'capture', voided = 'void'}
if h.s ~= 'open' then
  if done[h.s] ~= op then return reply('conflict', false, 'resolution') end
  if op == 'capture' and h.c ~= amount_s then return reply('conflict', false, 'amount') end
  return reply('ok', h.rn ~= nonce, '', h.rt, h.re, balance_reply(a, h.rp, h.rh))
end

local hn = tonumber(h.n)
if op == 'capture' then
  if n > hn then return invalid('capture amount ' .. amount_s .. ' exceeds the held ' .. h.n) end
  if a.closed then return reply('closed', false) end
  if a.db + n > TOTAL_MAX then return invalid('debit total would exceed 9e18') end
end

if not fence_ok(5, 6) then return reply('stale_fence', false) end
-- A sweep stopped at its limit with more due: the balances in the reply
-- would count an expired hold, so "again" (see post.lua) before the
-- decision.
if sweep(KEYS[1], KEYS[2], KEYS[3], KEYS[4], a, now, window, SWEEP_LIMIT) == SWEEP_LIMIT and
   due_left(KEYS[4], now) then
  return reply('again', false)
end
-- After the sweep, which stores the count when it releases a hold.
local open = open_holds(KEYS[1], KEYS[3])
local held = redis.call('HINCRBY', KEYS[1], 'held', '-' .. h.n)
local posted = a.posted
local e
if op == 'capture' then
  posted = redis.call('HINCRBY', KEYS[1], 'posted', '-' .. amount_s)
  redis.call('HINCRBY', KEYS[1], 'db', amount_s)
  e = journal(KEYS[1], KEYS[2], id, 'capture', '-' .. amount_s, '-' .. h.n, posted, held, '', h.m)
  h.s, h.c = 'captured', amount_s
else
  e = journal(KEYS[1], KEYS[2], id, 'void', '0', '-' .. h.n, posted, held, '', h.m)
  h.s = 'voided'
end
h.rn, h.rt, h.re, h.rp, h.rh = nonce, str(now), e, str(posted), str(held)
hold_put(KEYS[3], KEYS[4], id, h, now + tonumber(window))
set_open_holds(KEYS[1], KEYS[3], KEYS[4], math.max(open - 1, 0), window)
return reply('ok', false, '', h.rt, e, balance_reply(a, posted, held))
