-- xcredit: second step of a transfer across slot groups, run in the
-- destination's group: credit the destination once, or refuse for good.
-- Idempotent by transaction ID. Runs after lib.lua.
--
-- KEYS[1] destination account  <prefix>:wallet:v2:{<to group>}:acct:<to>
-- KEYS[2] destination journal  <prefix>:wallet:v2:{<to group>}:journal:<to>
-- KEYS[3] inbound record       <prefix>:wallet:v2:{<to group>}:xin:<from group>/<tx id>
--         (transaction IDs are unique per source group, so the source
--         group is part of its name)
-- KEYS[4] destination holds    <prefix>:wallet:v2:{<to group>}:holds:<to>
-- KEYS[5] destination index    <prefix>:wallet:v2:{<to group>}:hidx:<to>
-- ARGV[1] tx ID
-- ARGV[2] from account ID
-- ARGV[3] to account ID
-- ARGV[4] amount
-- ARGV[5] the source's currency
-- ARGV[6] memo
-- ARGV[7] idempotency window in milliseconds
-- ARGV[8] server time (ms) at which the source recorded the transfer
-- ARGV[9] begin nonce: the nonce under which the source recorded it
--
-- Reply: {status, entry, currency, overdraft, posted, held}: status
-- "credited", or a refusal ("to_not_found", "to_closed", "currency",
-- "to_overflow", "late"), the same on every call; or "again" (see below). The record has no
-- expiry until the transfer is finished; then it is kept for two windows.
--
-- The record carries the transfer's begin time and nonce (t0, bn) and
-- answers only calls that carry the same: after the window the same ID
-- names a new transfer, which may find the record of an earlier one still
-- kept. A record of a transfer that began earlier than this call's belongs
-- to one that finished (its source record, without which this one could
-- not have begun, is forgotten only after it finished): this transfer is
-- judged afresh and its record replaces that one. A record of a transfer
-- that began later means this call is stale (stalled past a window while
-- its transfer was finished by another call): it is answered "late"
-- without writing, and xfinish then finds no record of it.
--
-- "late": there is no record and the transfer began a window or more
-- ago. A record that existed was kept for two windows after the transfer
-- finished, so either the destination never saw this transfer or it was
-- finished and forgotten long ago, and a call that stalled across the
-- window is only now sending this step. Crediting would pay twice in the
-- second case; refusing makes the source release its hold in the first
-- and finds nothing left to do in the second. (The second window covers
-- a clock on the destination's node that runs ahead of the source's.)

local tx, from, to, amount_s, cur, memo, window, begin_ms, bn =
  ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[7], ARGV[8], ARGV[9]
local n = amount(amount_s)
if not n then return invalid('amount ' .. tostring(amount_s)) end
local t0 = tonumber(begin_ms)
if not t0 or type(bn) ~= 'string' or bn == '' then return invalid('begin time and nonce') end
local r = redis.call('HMGET', KEYS[3], 's', 'e', 'cur', 'od', 'p', 'h', 'a', 'n', 't0', 'bn')
local replaced = false
if r[1] then
  local same = r[10] == bn
  if not r[10] then
    -- A record written before records carried their transfer's identity.
    if r[7] ~= from or r[8] ~= amount_s then return invalid('transaction ID used for another transfer') end
    same = true
  end
  if same then return {r[1], r[2] or '', r[3] or '', r[4] or '', r[5] or '', r[6] or ''} end
  if (tonumber(r[9]) or 0) >= t0 then return {'late', '', '', '', '', ''} end
  replaced = true
end
local b = account(KEYS[1])
local now = now_ms()
local status = 'credited'
if now - t0 >= tonumber(window) then status = 'late'
elseif not b then status = 'to_not_found'
elseif b.closed then status = 'to_closed'
elseif b.cur ~= cur then status = 'currency'
elseif b.posted + n > MAX or b.tin + n > TOTAL_MAX then status = 'to_overflow'
end
-- A sweep stopped at its limit with more due: the balance in the reply
-- would count an expired hold, so "again" (nothing of the transfer
-- written; the Go side sweeps the account and sends this step again).
if status == 'credited' and sweep(KEYS[1], KEYS[2], KEYS[4], KEYS[5], b, now, window, SWEEP_LIMIT) == SWEEP_LIMIT and
   due_left(KEYS[5], now) then
  return {'again', '', '', '', '', ''}
end
-- The record of an earlier transfer goes, its expiry too: this one's
-- record keeps none until this transfer is finished. (HDEL of the fields
-- that are not set again, and PERSIST: the ACL user in redis.acl has no
-- DEL.)
if replaced then
  redis.call('HDEL', KEYS[3], 'e', 'cur', 'od', 'p', 'h')
  redis.call('PERSIST', KEYS[3])
end
if status ~= 'credited' then
  redis.call('HSET', KEYS[3], 's', status, 'a', from, 'n', amount_s, 't0', begin_ms, 'bn', bn)
  if status == 'late' then redis.call('PEXPIRE', KEYS[3], str(2 * tonumber(window))) end
  return {status, '', '', '', '', ''}
end
local posted = redis.call('HINCRBY', KEYS[1], 'posted', amount_s)
redis.call('HINCRBY', KEYS[1], 'tin', amount_s)
local e = journal(KEYS[1], KEYS[2], tx, 'transfer_in', amount_s, '0', posted, b.held, from, memo)
local reply = {'credited', e, b.cur, str(b.od), str(posted), str(b.held)}
redis.call('HSET', KEYS[3], 's', 'credited', 'e', e, 'cur', b.cur, 'od', str(b.od), 'p', str(posted),
           'h', str(b.held), 'a', from, 'n', amount_s, 't0', begin_ms, 'bn', bn)
return reply
