-- transfer: move an amount between two accounts of one slot group,
-- idempotent by transaction ID. Runs after lib.lua.
--
-- KEYS[1] source account hash   <prefix>:wallet:v2:{<group>}:acct:<from>
-- KEYS[2] source journal        <prefix>:wallet:v2:{<group>}:journal:<from>
-- KEYS[3] destination account   <prefix>:wallet:v2:{<group>}:acct:<to>
-- KEYS[4] destination journal   <prefix>:wallet:v2:{<group>}:journal:<to>
-- KEYS[5] tx marker             <prefix>:wallet:v2:{<group>}:tx:<tx id>
-- KEYS[6] source holds hash     <prefix>:wallet:v2:{<group>}:holds:<from>
-- KEYS[7] source hold index     <prefix>:wallet:v2:{<group>}:hidx:<from>
-- KEYS[8] destination holds     <prefix>:wallet:v2:{<group>}:holds:<to>
-- KEYS[9] destination index     <prefix>:wallet:v2:{<group>}:hidx:<to>
-- ARGV[1] tx ID
-- ARGV[2] from account ID
-- ARGV[3] to account ID (never equal to from)
-- ARGV[4] amount, decimal 1..9007199254740991
-- ARGV[5] memo, "" for none
-- ARGV[6] call nonce
-- ARGV[7] idempotency window in milliseconds
-- Optional fence: KEYS[10] fence key, ARGV[8] fencing token (see post.lua).
--
-- Reply: {status, replayed, field, time_ms, from_entry_id, from currency,
-- overdraft, posted, held, closed, to_entry_id, to currency, overdraft,
-- posted, held, closed}, all strings; balances are those right after the
-- transfer. status "ok"; or a refusal remembered under the tx ID:
-- "not_found" (source), "to_not_found", "closed" (source), "to_closed",
-- "currency" (the accounts' currencies differ), "insufficient"; or
-- "conflict" with field (kind, from, to, amount, memo); "stale_fence";
-- "again" (see post.lua).
-- Error reply "ERR wallet: invalid: ...": nothing was written.

local tx, from, to, amount_s, memo, nonce, window =
  ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[7]
local n = amount(amount_s)
if not n then return invalid('amount ' .. tostring(amount_s)) end
if from == to or KEYS[1] == KEYS[3] then return invalid('same account on both sides') end

local a = account(KEYS[1])
local b = account(KEYS[3])
local m = marker(KEYS[5])
if m then
  local f = conflict(m, 'transfer', from, to, amount_s, '', memo)
  if f then return reply('conflict', false, f) end
  return replay(m, nonce, a, b)
end

if a and b then
  if b.posted + n > MAX then return invalid('destination balance would exceed 9007199254740991') end
  -- a.held counts transfers across groups still in flight from a, whose
  -- last step adds to a.tout and must not fail then.
  if a.tout + a.held + n > TOTAL_MAX or b.tin + n > TOTAL_MAX then
    return invalid('transfer total would exceed 9e18')
  end
end

if not fence_ok(10, 8) then return reply('stale_fence', false) end
local now = now_ms()
sweep(KEYS[1], KEYS[2], KEYS[6], KEYS[7], a, now, window, SWEEP_LIMIT)
sweep(KEYS[3], KEYS[4], KEYS[8], KEYS[9], b, now, window, SWEEP_LIMIT)
local status = status_of(a, '', nil)
if status == 'ok' then
  local sb = status_of(b, '', nil)
  if sb ~= 'ok' then status = 'to_' .. sb end
end
if status == 'ok' and a.cur ~= b.cur then status = 'currency' end
if status == 'ok' then status = status_of(a, '', n) end
if status == 'insufficient' and due_left(KEYS[7], now) then return reply('again', false) end
local fields = {'k', 'transfer', 'a', from, 'b', to, 'n', amount_s, 'c', '', 'm', memo,
                'nonce', nonce, 's', status, 't', str(now)}
if status ~= 'ok' then
  remember(KEYS[5], window, fields)
  return reply(status, false)
end

local pa = redis.call('HINCRBY', KEYS[1], 'posted', '-' .. amount_s)
redis.call('HINCRBY', KEYS[1], 'tout', amount_s)
local pb = redis.call('HINCRBY', KEYS[3], 'posted', amount_s)
redis.call('HINCRBY', KEYS[3], 'tin', amount_s)
local ea = journal(KEYS[1], KEYS[2], tx, 'transfer_out', '-' .. amount_s, '0', pa, a.held, to, memo)
local eb = journal(KEYS[3], KEYS[4], tx, 'transfer_in', amount_s, '0', pb, b.held, from, memo)
for _, x in ipairs({'e', ea, 'p', str(pa), 'h', str(a.held), 'e2', eb, 'p2', str(pb), 'h2', str(b.held)}) do
  fields[#fields + 1] = x
end
remember(KEYS[5], window, fields)
return reply('ok', false, '', str(now), ea, balance_reply(a, pa, a.held), eb, balance_reply(b, pb, b.held))
