-- post: apply a credit or a debit to one account, idempotent by transaction
-- ID. Runs after lib.lua (prepended by the Go side).
--
-- KEYS[1] account hash  <prefix>:wallet:v2:{<group>}:acct:<account>
-- KEYS[2] journal       <prefix>:wallet:v2:{<group>}:journal:<account>
-- KEYS[3] tx marker     <prefix>:wallet:v2:{<group>}:tx:<tx id>
-- KEYS[4] holds hash    <prefix>:wallet:v2:{<group>}:holds:<account>
-- KEYS[5] hold index    <prefix>:wallet:v2:{<group>}:hidx:<account>
-- ARGV[1] tx ID
-- ARGV[2] kind: "credit" or "debit"
-- ARGV[3] account ID
-- ARGV[4] amount, decimal 1..9007199254740991
-- ARGV[5] expected currency, "" for any
-- ARGV[6] memo, "" for none
-- ARGV[7] call nonce: a retry of the same call sends the same nonce
-- ARGV[8] idempotency window in milliseconds (marker expiry)
-- Optional fence (a lock.Lease guarding the caller's work):
-- KEYS[6] fence key     <prefix>:fence:v1:{<group>}:<lock name>
-- ARGV[9] fencing token; a token below the highest seen refuses the call
--
-- Reply: {status, replayed, field, time_ms, entry_id, currency, overdraft,
-- posted, held, closed}, all strings.
--   status "ok"; or a refusal remembered under the tx ID: "not_found",
--   "closed", "currency", "insufficient"; or "conflict" with field naming
--   the first differing field (kind, account, amount, currency, memo); or
--   "stale_fence" (nothing written); or "again": funds looked short while
--   expired holds were still left after this call's sweep, so nothing was
--   decided or stored (the caller sweeps and calls again).
--   replayed "1" when an earlier call (another nonce) decided the tx.
-- Error reply "ERR wallet: invalid: ..." (bad argument, or the balance or a
-- running total would leave its bounds): nothing was written.
--
-- redis-benchmark, one hot account "hot" that may overdraw (open it first):
--   redis-benchmark -r 1000000000 -n 200000 -c 64 EVALSHA <sha> 5 \
--     redkit:wallet:v2:{hot}:acct:hot redkit:wallet:v2:{hot}:journal:hot \
--     redkit:wallet:v2:{hot}:tx:__rand_int__ redkit:wallet:v2:{hot}:holds:hot \
--     redkit:wallet:v2:{hot}:hidx:hot __rand_int__ debit hot 1 "" "" bench 60000

local tx, kind, acct, amount_s, cur, memo, nonce, window =
  ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[7], ARGV[8]
local n = amount(amount_s)
if not n then return invalid('amount ' .. tostring(amount_s)) end
if kind ~= 'credit' and kind ~= 'debit' then return invalid('kind') end

local a = account(KEYS[1])
local m = marker(KEYS[3])
if m then
  local f = conflict(m, kind, acct, '', amount_s, cur, memo)
  if f then return reply('conflict', false, f) end
  return replay(m, nonce, a)
end

if a then
  if kind == 'credit' then
    if a.posted + n > MAX then return invalid('balance would exceed 9007199254740991') end
    if a.cr + n > TOTAL_MAX then return invalid('credit total would exceed 9e18') end
  else
    -- posted - n >= -MAX needs no check: an accepted debit keeps
    -- posted - held - n >= -overdraft >= -MAX.
    if a.db + n > TOTAL_MAX then return invalid('debit total would exceed 9e18') end
  end
end

if not fence_ok(6, 9) then return reply('stale_fence', false) end
local now = now_ms()
sweep(KEYS[1], KEYS[2], KEYS[4], KEYS[5], a, now, window, SWEEP_LIMIT)
local out = nil
if kind == 'debit' then out = n end
local status = status_of(a, cur, out)
if status == 'insufficient' and due_left(KEYS[5], now) then return reply('again', false) end
if status ~= 'ok' then
  remember(KEYS[3], window, {'k', kind, 'a', acct, 'b', '', 'n', amount_s, 'c', cur, 'm', memo,
                             'nonce', nonce, 's', status, 't', str(now)})
  return reply(status, false)
end

local delta, total = amount_s, 'cr'
if kind == 'debit' then delta, total = '-' .. amount_s, 'db' end
local posted = redis.call('HINCRBY', KEYS[1], 'posted', delta)
redis.call('HINCRBY', KEYS[1], total, amount_s)
local e = journal(KEYS[1], KEYS[2], tx, kind, delta, '0', posted, str(a.held), '', memo)
remember(KEYS[3], window, {'k', kind, 'a', acct, 'b', '', 'n', amount_s, 'c', cur, 'm', memo,
                           'nonce', nonce, 's', 'ok', 't', str(now), 'e', e, 'p', str(posted), 'h', str(a.held)})
return reply('ok', false, '', str(now), e, balance_reply(a, posted, a.held))
