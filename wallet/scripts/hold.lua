-- hold: reserve an amount of an account's available balance until it is
-- captured, voided or expires, idempotent by hold ID. Runs after lib.lua.
--
-- KEYS[1] account hash  <prefix>:wallet:v2:{<group>}:acct:<account>
-- KEYS[2] journal       <prefix>:wallet:v2:{<group>}:journal:<account>
-- KEYS[3] holds hash    <prefix>:wallet:v2:{<group>}:holds:<account>
-- KEYS[4] hold index    <prefix>:wallet:v2:{<group>}:hidx:<account>
-- ARGV[1] hold ID
-- ARGV[2] amount, decimal 1..9007199254740991
-- ARGV[3] TTL in milliseconds (expiry on the server's clock)
-- ARGV[4] memo, "" for none
-- ARGV[5] call nonce
-- ARGV[6] idempotency window in milliseconds
-- Optional fence: KEYS[5] fence key, ARGV[7] fencing token (see post.lua).
--
-- Reply: {status, replayed, field, time_ms, entry_id, currency, overdraft,
-- posted, held, closed, expires_ms, now_ms}, all strings. status "ok"; a
-- refusal remembered under the hold ID: "not_found", "closed",
-- "insufficient" ("not_found" too: a hold ID refused before its account
-- was opened stays refused); "conflict" with field (amount, ttl, memo);
-- "stale_fence"; "again" (see post.lua).

local id, amount_s, ttl, memo, nonce, window = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6]
local n = amount(amount_s)
if not n then return invalid('amount ' .. tostring(amount_s)) end

local a = account(KEYS[1])
local h = hold_get(KEYS[3], id)
local now = now_ms()
local function answer(h, replayed)
  local r = reply(h.s == 'refused' and h.r or 'ok', replayed, '', h.t, h.e, balance_reply(a, h.p or '0', h.h or '0'))
  r[#r + 1] = h.x or ''
  r[#r + 1] = str(now)
  return r
end
if h then
  if h.n ~= amount_s then return reply('conflict', false, 'amount') end
  if h.ttl ~= ttl then return reply('conflict', false, 'ttl') end
  if h.m ~= memo then return reply('conflict', false, 'memo') end
  return answer(h, h.nonce ~= nonce)
end

local over = held_over(a, KEYS[3], KEYS[4], n, now)
if over == nil then return reply('again', false) end
if over then return invalid('held total would exceed 9007199254740991') end
if not fence_ok(5, 7) then return reply('stale_fence', false) end
local swept = sweep(KEYS[1], KEYS[2], KEYS[3], KEYS[4], a, now, window, SWEEP_LIMIT)
-- After the sweep, which stores the count when it releases a hold.
local open = 0
if a then open = open_holds(KEYS[1], KEYS[3]) end
local status = status_of(a, '', n)
if status == 'insufficient' and due_left(KEYS[4], now) then return reply('again', false) end
h = {n = amount_s, ttl = ttl, m = memo, nonce = nonce, t = str(now)}
if status ~= 'ok' then
  h.s, h.r = 'refused', status
  hold_put(KEYS[3], KEYS[4], id, h, now + tonumber(window))
  if not a then
    -- No sweep forgets the refusals of an account that does not exist:
    -- the keys expire a window after the last one.
    redis.call('PEXPIRE', KEYS[3], window)
    redis.call('PEXPIRE', KEYS[4], window)
  else
    set_open_holds(KEYS[1], KEYS[3], KEYS[4], open, window)
  end
  return answer(h, false)
end
-- A sweep stopped at its limit with more due: the balances in the reply
-- would count an expired hold (see resolve.lua).
if swept == SWEEP_LIMIT and due_left(KEYS[4], now) then return reply('again', false) end
local held = redis.call('HINCRBY', KEYS[1], 'held', amount_s)
local e = journal(KEYS[1], KEYS[2], id, 'hold', '0', amount_s, a.posted, held, '', memo)
h.s, h.x, h.e, h.p, h.h = 'open', str(now + tonumber(ttl)), e, str(a.posted), str(held)
hold_put(KEYS[3], KEYS[4], id, h, now + tonumber(ttl))
set_open_holds(KEYS[1], KEYS[3], KEYS[4], open + 1, window)
return answer(h, false)
