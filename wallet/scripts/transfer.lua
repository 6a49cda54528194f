-- transfer: move an amount between two accounts of one slot group,
-- idempotent by transaction ID. Runs after fast.lua (and lib.lua, see there).
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
-- ARGV[8] canonical description ("transfer", from, to, amount, "", memo;
--         see post.lua), stored in the marker
-- Optional fence: KEYS[10] fence key, ARGV[9] fencing token (see post.lua).
--
-- The marker is a string as in post.lua, an accepted transfer's followed by
-- \n<to_entry>\n<to_posted>\n<to_held>.
--
-- Reply: {status, replayed, field, time_ms, from_entry_id, from currency,
-- overdraft, posted, held, closed, to_entry_id, to currency, overdraft,
-- posted, held, closed}, all strings; balances are those right after the
-- transfer. status "ok"; or a refusal remembered under the tx ID:
-- "not_found" (source), "to_not_found", "closed" (source), "to_closed",
-- "currency" (the accounts' currencies differ), "insufficient"; or
-- "conflict" with field (kind, from, to, amount, memo); "stale_fence";
-- "again" (see post.lua); a refusal is just {status, "0"}. Or
-- {"marker", value, currency, overdraft, to_currency, to_overdraft} when
-- the tx ID has a string marker (judged by the Go side, see post.lua).
-- A decided reply ends with "xt" when the source has begun a transfer
-- across groups that may still be in flight (see post.lua).
-- Error reply "ERR wallet: invalid: ...": nothing was written.

local tx, from, to, amount_s, memo, nonce, window, canon =
  ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[7], ARGV[8]
local n = tonumber(amount_s)
if not n or n < 1 or n > MAX or n % 1 ~= 0 or fmt(n) ~= amount_s then
  return invalid('amount ' .. tostring(amount_s))
end
if from == to or KEYS[1] == KEYS[3] then return invalid('same account on both sides') end
if type(canon) ~= 'string' then return invalid('canonical description') end

local mv = redis.pcall('GET', KEYS[5])
if mv then
  if type(mv) == 'table' then
    -- A hash (WRONGTYPE): an older marker or a transfer across groups.
    local L = redkit_lib()
    local a, b = L.account(KEYS[1]), L.account(KEYS[3])
    local m = L.marker(KEYS[5])
    local f = L.conflict(m, 'transfer', from, to, amount_s, '', memo)
    if f then return L.reply('conflict', false, f) end
    return L.replay(m, nonce, a, b)
  end
  local va = redis.call('HMGET', KEYS[1], 'cur', 'od')
  local vb = redis.call('HMGET', KEYS[3], 'cur', 'od')
  return {'marker', mv, va[1] or '', va[2] or '0', vb[1] or '', vb[2] or '0'}
end

local va = redis.call('HMGET', KEYS[1], 'cur', 'od', 'posted', 'held', 'closed', 'tout', 'xt')
local vb = redis.call('HMGET', KEYS[3], 'cur', 'od', 'posted', 'held', 'closed', 'tin')
local pa, ha = tonumber(va[3]) or 0, tonumber(va[4]) or 0
local pb, hb = tonumber(vb[3]) or 0, tonumber(vb[4]) or 0
if va[1] and vb[1] then
  if pb + n > MAX then return invalid('destination balance would exceed 9007199254740991') end
  -- ha counts transfers across groups still in flight from a, whose
  -- last step adds to a's tout and must not fail then.
  local tout_over = (tonumber(va[6]) or 0) + ha + n > TOTAL_MAX
  if tout_over or (tonumber(vb[6]) or 0) + n > TOTAL_MAX then
    -- ha may still count holds that have expired (the sweep that releases
    -- them writes, so it comes later): no bound is refused on such a view.
    if tout_over and due_left(KEYS[7], fmt(now_ms())) then return {'again', '0'} end
    return invalid('transfer total would exceed 9e18')
  end
end

if KEYS[10] and not redkit_fence(KEYS[10], ARGV[9]) then return {'stale_fence', '0'} end
local now = now_ms()
local now_s = fmt(now)
local fa, fb = false, false
if va[1] then ha, fa = sweep_fast(KEYS[1], KEYS[2], KEYS[6], KEYS[7], pa, ha, now_s, now, window) end
if vb[1] then hb, fb = sweep_fast(KEYS[3], KEYS[4], KEYS[8], KEYS[9], pb, hb, now_s, now, window) end
local status = 'ok'
if not va[1] then status = 'not_found'
elseif va[5] == '1' then status = 'closed'
elseif not vb[1] then status = 'to_not_found'
elseif vb[5] == '1' then status = 'to_closed'
elseif va[1] ~= vb[1] then status = 'currency'
elseif pa - ha - n < -(tonumber(va[2]) or 0) then
  if due_left(KEYS[7], now_s) then return {'again', '0'} end
  status = 'insufficient'
end
if status ~= 'ok' then
  redis.call('SET', KEYS[5], canon .. '\n' .. status .. '\n' .. nonce .. '\n' .. now_s, 'PX', window)
  if va[7] then return {status, '0', 'xt'} end
  return {status, '0'}
end

if not swept_all(fa, KEYS[7], now_s) or not swept_all(fb, KEYS[9], now_s) then return {'again', '0'} end
pa, pb = pa - n, pb + n
local pas, has, pbs, hbs = fmt(pa), fmt(ha), fmt(pb), fmt(hb)
local ea, eb
if memo == '' then
  ea = redis.call('XADD', KEYS[2], '*', 'tx', tx, 'kind', 'transfer_out', 'delta', '-' .. amount_s, 'hdelta', '0',
                  'posted', pas, 'held', has, 'peer', to)
  eb = redis.call('XADD', KEYS[4], '*', 'tx', tx, 'kind', 'transfer_in', 'delta', amount_s, 'hdelta', '0',
                  'posted', pbs, 'held', hbs, 'peer', from)
else
  ea = redis.call('XADD', KEYS[2], '*', 'tx', tx, 'kind', 'transfer_out', 'delta', '-' .. amount_s, 'hdelta', '0',
                  'posted', pas, 'held', has, 'peer', to, 'memo', memo)
  eb = redis.call('XADD', KEYS[4], '*', 'tx', tx, 'kind', 'transfer_in', 'delta', amount_s, 'hdelta', '0',
                  'posted', pbs, 'held', hbs, 'peer', from, 'memo', memo)
end
set_posted(KEYS[1], pas, ea, 'tout', tonumber(va[6]) or 0, n, amount_s)
set_posted(KEYS[3], pbs, eb, 'tin', tonumber(vb[6]) or 0, n, amount_s)
redis.call('SET', KEYS[5], canon .. '\nok\n' .. nonce .. '\n' .. now_s .. '\n' .. ea .. '\n' .. pas .. '\n' .. has ..
           '\n' .. eb .. '\n' .. pbs .. '\n' .. hbs, 'PX', window)
local r = {'ok', '0', '', now_s, ea, va[1], va[2] or '0', pas, has, '0', eb, vb[1], vb[2] or '0', pbs, hbs, '0'}
if va[7] then r[17] = 'xt' end
return r
