-- post: apply a credit or a debit to one account, idempotent by transaction
-- ID. Runs after fast.lua (and lib.lua, see there).
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
-- ARGV[9] the transaction's canonical description, as the Go side builds it
--         (kind, account, "", amount, currency, memo, each as
--         <length>:<bytes>): stored in the marker and compared there
-- Optional fence (a lock.Lease guarding the caller's work):
-- KEYS[6] fence key     <prefix>:fence:v1:{<group>}:<lock name>
-- ARGV[10] fencing token; a token below the highest seen refuses the call
--
-- The marker is a string, set with the window as its expiry:
--   <canonical>\n<status>\n<nonce>\n<time_ms>[\n<entry>\n<posted>\n<held>]
-- (the last three only for "ok"). A marker that is a hash is one written
-- before this format, or a transfer across groups (xbegin.lua): it is read
-- and judged here as before.
--
-- Reply: {status, replayed, field, time_ms, entry_id, currency, overdraft,
-- posted, held, closed}, all strings; a refusal is just {status, "0"}.
--   status "ok"; or a refusal remembered under the tx ID: "not_found",
--   "closed", "currency", "insufficient"; or "stale_fence" (nothing
--   written); or "again": funds looked short while expired holds were still
--   left after this call's sweep, so nothing was decided or stored (the
--   caller sweeps and calls again); or "conflict" with field naming the
--   first differing field (kind, account, amount, currency, memo), and
--   "replayed"/"ok" as below, for a marker stored as a hash.
--   Or {"marker", value, currency, overdraft} when the tx ID has a string
--   marker: the Go side compares its canonical description with the
--   stored one (a difference is a conflict naming the first differing
--   field) and otherwise replays the stored outcome (replayed unless the
--   marker carries this call's nonce).
--   A decided reply ends with one more element, "xt", when the account
--   has begun a transfer across groups that may still be in flight (its
--   field xt): the Go side then finishes those whose caller left them
--   (xstale.lua).
-- Error reply "ERR wallet: invalid: ..." (bad argument, or the balance or a
-- running total would leave its bounds): nothing was written.
--
-- redis-benchmark, one hot account "hot" that may overdraw (open it first):
--   redis-benchmark -r 1000000000 -n 200000 -c 64 EVALSHA <sha> 5 \
--     redkit:wallet:v2:{hot}:acct:hot redkit:wallet:v2:{hot}:journal:hot \
--     redkit:wallet:v2:{hot}:tx:__rand_int__ redkit:wallet:v2:{hot}:holds:hot \
--     redkit:wallet:v2:{hot}:hidx:hot __rand_int__ debit hot 1 "" "" bench 60000 \
--     5:debit3:hot0:1:10:0:

local tx, kind, acct, amount_s, cur, memo, nonce, window, canon =
  ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[7], ARGV[8], ARGV[9]
-- The Go side validated every argument; these checks only keep a wrong
-- direct call from writing, without pattern matching.
local n = tonumber(amount_s)
if not n or n < 1 or n > MAX or n % 1 ~= 0 or fmt(n) ~= amount_s then
  return invalid('amount ' .. tostring(amount_s))
end
local total
if kind == 'credit' then total = 'cr' elseif kind == 'debit' then total = 'db' else return invalid('kind') end
if type(canon) ~= 'string' then return invalid('canonical description') end

local mv = redis.pcall('GET', KEYS[3])
if mv then
  if type(mv) == 'table' then
    -- A hash (WRONGTYPE): an older marker or a transfer across groups.
    local L = redkit_lib()
    local a = L.account(KEYS[1])
    local m = L.marker(KEYS[3])
    local f = L.conflict(m, kind, acct, '', amount_s, cur, memo)
    if f then return L.reply('conflict', false, f) end
    return L.replay(m, nonce, a)
  end
  local v = redis.call('HMGET', KEYS[1], 'cur', 'od')
  return {'marker', mv, v[1] or '', v[2] or '0'}
end

local v = redis.call('HMGET', KEYS[1], 'cur', 'od', 'posted', 'held', 'closed', total, 'xt')
local acur = v[1]
local posted, held = tonumber(v[3]) or 0, tonumber(v[4]) or 0
if acur then
  if kind == 'credit' then
    if posted + n > MAX then return invalid('balance would exceed 9007199254740991') end
    if (tonumber(v[6]) or 0) + n > TOTAL_MAX then return invalid('credit total would exceed 9e18') end
  else
    -- posted - n >= -MAX needs no check: an accepted debit keeps
    -- posted - held - n >= -overdraft >= -MAX.
    if (tonumber(v[6]) or 0) + n > TOTAL_MAX then return invalid('debit total would exceed 9e18') end
  end
end

if KEYS[6] and not redkit_fence(KEYS[6], ARGV[10]) then return {'stale_fence', '0'} end
local now = now_ms()
local now_s = fmt(now)
local status, full = 'ok', false
if not acur then
  status = 'not_found'
else
  held, full = sweep_fast(KEYS[1], KEYS[2], KEYS[4], KEYS[5], posted, held, now_s, now, window)
  if v[5] == '1' then
    status = 'closed'
  elseif cur ~= '' and cur ~= acur then
    status = 'currency'
  elseif kind == 'debit' and posted - held - n < -(tonumber(v[2]) or 0) then
    if due_left(KEYS[5], now_s) then return {'again', '0'} end
    status = 'insufficient'
  end
end
if status ~= 'ok' then
  redis.call('SET', KEYS[3], canon .. '\n' .. status .. '\n' .. nonce .. '\n' .. now_s, 'PX', window)
  if v[7] then return {status, '0', 'xt'} end
  return {status, '0'}
end

if not swept_all(full, KEYS[5], now_s) then return {'again', '0'} end
local delta = amount_s
if kind == 'credit' then posted = posted + n else posted = posted - n; delta = '-' .. amount_s end
local ps, hs = fmt(posted), fmt(held)
-- The entry keeps every field of the call (a named currency too), so the
-- call can be sent again from the entry alone and match the marker.
local e
if memo == '' and cur == '' then
  e = redis.call('XADD', KEYS[2], '*', 'tx', tx, 'kind', kind, 'delta', delta, 'hdelta', '0', 'posted', ps, 'held', hs)
elseif cur == '' then
  e = redis.call('XADD', KEYS[2], '*', 'tx', tx, 'kind', kind, 'delta', delta, 'hdelta', '0', 'posted', ps, 'held', hs,
                 'memo', memo)
elseif memo == '' then
  e = redis.call('XADD', KEYS[2], '*', 'tx', tx, 'kind', kind, 'delta', delta, 'hdelta', '0', 'posted', ps, 'held', hs,
                 'cur', cur)
else
  e = redis.call('XADD', KEYS[2], '*', 'tx', tx, 'kind', kind, 'delta', delta, 'hdelta', '0', 'posted', ps, 'held', hs,
                 'memo', memo, 'cur', cur)
end
set_posted(KEYS[1], ps, e, total, tonumber(v[6]) or 0, n, amount_s)
redis.call('SET', KEYS[3], canon .. '\nok\n' .. nonce .. '\n' .. now_s .. '\n' .. e .. '\n' .. ps .. '\n' .. hs,
           'PX', window)
if v[7] then return {'ok', '0', '', now_s, e, acur, v[2] or '0', ps, hs, '0', 'xt'} end
return {'ok', '0', '', now_s, e, acur, v[2] or '0', ps, hs, '0'}
