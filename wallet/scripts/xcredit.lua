-- xcredit: second step of a transfer across slot groups, run in the
-- destination's group: credit the destination once, or refuse for good.
-- Idempotent by transaction ID. Runs after lib.lua.
--
-- KEYS[1] destination account  <prefix>:wallet:v1:{<to group>}:acct:<to>
-- KEYS[2] destination journal  <prefix>:wallet:v1:{<to group>}:journal:<to>
-- KEYS[3] inbound record       <prefix>:wallet:v1:{<to group>}:xin:<tx id>
-- KEYS[4] destination holds    <prefix>:wallet:v1:{<to group>}:holds:<to>
-- KEYS[5] destination index    <prefix>:wallet:v1:{<to group>}:hidx:<to>
-- ARGV[1] tx ID
-- ARGV[2] from account ID
-- ARGV[3] to account ID
-- ARGV[4] amount
-- ARGV[5] the source's currency
-- ARGV[6] memo
-- ARGV[7] idempotency window in milliseconds
--
-- Reply: {status, entry, currency, overdraft, posted, held}: status
-- "credited", or a refusal ("to_not_found", "to_closed", "currency",
-- "to_overflow"), the same on every call. The record stays until xclean.

local tx, from, to, amount_s, cur, memo, window = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[7]
local n = amount(amount_s)
if not n then return invalid('amount ' .. tostring(amount_s)) end
local r = redis.call('HMGET', KEYS[3], 's', 'e', 'cur', 'od', 'p', 'h', 'a', 'n')
if r[1] then
  if r[7] ~= from or r[8] ~= amount_s then return invalid('transaction ID used for another transfer') end
  return {r[1], r[2] or '', r[3] or '', r[4] or '', r[5] or '', r[6] or ''}
end
local b = account(KEYS[1])
local status = 'credited'
if not b then status = 'to_not_found'
elseif b.closed then status = 'to_closed'
elseif b.cur ~= cur then status = 'currency'
elseif b.posted + n > MAX or b.tin + n > TOTAL_MAX then status = 'to_overflow'
end
if status ~= 'credited' then
  redis.call('HSET', KEYS[3], 's', status, 'a', from, 'n', amount_s)
  return {status, '', '', '', '', ''}
end
sweep(KEYS[1], KEYS[2], KEYS[4], KEYS[5], b, now_ms(), window, SWEEP_LIMIT)
local posted = redis.call('HINCRBY', KEYS[1], 'posted', amount_s)
redis.call('HINCRBY', KEYS[1], 'tin', amount_s)
local e = journal(KEYS[1], KEYS[2], tx, 'transfer_in', amount_s, '0', posted, b.held, from, memo)
local reply = {'credited', e, b.cur, str(b.od), str(posted), str(b.held)}
redis.call('HSET', KEYS[3], 's', 'credited', 'e', e, 'cur', b.cur, 'od', str(b.od), 'p', str(posted),
           'h', str(b.held), 'a', from, 'n', amount_s)
return reply
