-- xbegin: first step of a transfer across slot groups, run in the source's
-- group: record the transfer and hold the amount on the source (a hold
-- that never expires). Idempotent by transaction ID. Runs after lib.lua.
--
-- KEYS[1] source account hash  <prefix>:wallet:v2:{<from group>}:acct:<from>
-- KEYS[2] source journal       <prefix>:wallet:v2:{<from group>}:journal:<from>
-- KEYS[3] transfer record      <prefix>:wallet:v2:{<from group>}:tx:<tx id>
-- KEYS[4] source holds hash    <prefix>:wallet:v2:{<from group>}:holds:<from>
-- KEYS[5] source hold index    <prefix>:wallet:v2:{<from group>}:hidx:<from>
-- KEYS[6] in-flight index      <prefix>:wallet:v2:{<from group>}:xpend
-- ARGV[1] tx ID
-- ARGV[2] from account ID
-- ARGV[3] to account ID (another slot group)
-- ARGV[4] amount, decimal 1..9007199254740991
-- ARGV[5] memo, "" for none
-- ARGV[6] call nonce
-- ARGV[7] idempotency window in milliseconds
-- ARGV[8] "1" when the Go side read the destination and found that the
--         amount would take its balance or transfers-in total out of
--         bounds: a new transfer is then refused as invalid (nothing
--         written), as inside one group; a recorded one answers as usual
-- Optional fence: KEYS[7] fence key, ARGV[9] fencing token (see post.lua).
--
-- Reply: {status, replayed, field, currency, state record...}:
--   status "pending" (held, the destination step is next), "posted" or
--   "voided" (finished; the record follows), a refusal remembered under the
--   tx ID ("not_found", "closed", "insufficient"), "conflict" with field,
--   "stale_fence", or "again" (see post.lua).
--   For pending/posted/voided: {status, replayed, '', currency, reason,
--   time_ms, entry, posted, held, overdraft, to_entry, to_currency,
--   to_overdraft, to_posted, to_held, begin_ms, begin_nonce} (see
--   xfinish.lua). begin_nonce, the nonce of the call that recorded the
--   transfer, names this transfer apart from any other under the same ID
--   (one begun after this one was finished and forgotten): the later steps
--   carry it and act only on records that hold it.
-- Error reply "ERR wallet: invalid: ...": nothing was written.

local tx, from, to, amount_s, memo, nonce, window, dest_full =
  ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[7], ARGV[8]
local n = amount(amount_s)
if not n then return invalid('amount ' .. tostring(amount_s)) end

local function state(m, replayed)
  return {m.s, replayed and '1' or '0', '', m.cur or '', m.r or '', m.t or '', m.e3 or '',
          m.p or '', m.h or '', m.od or '', m.e2 or '', m.cur2 or '', m.od2 or '', m.p2 or '', m.h2 or '',
          m.t0 or '', m.nonce or ''}
end

local a = account(KEYS[1])
local raw = redis.pcall('HGETALL', KEYS[3])
-- WRONGTYPE: the ID names a posting or a same-group transfer, whose
-- marker is a string (post.lua): another kind of transaction.
if raw.err then return {'conflict', '0', 'kind'} end
if #raw > 0 then
  local m = {}
  for i = 1, #raw, 2 do m[raw[i]] = raw[i + 1] end
  local f = conflict({k = m.k or '', a = m.a or '', b = m.b or '', n = m.n or '', c = m.c or '', m = m.m or ''},
                     'xtransfer', from, to, amount_s, '', memo)
  if f then
    if f == 'account' then f = 'from' end
    return {'conflict', '0', f}
  end
  return state(m, m.nonce ~= nonce)
end

if dest_full == '1' then return invalid('destination balance would exceed 9007199254740991') end
local now = now_ms()
local over = held_over(a, KEYS[4], KEYS[5], n, now)
if over == nil then return {'again', '0', ''} end
if over then return invalid('held total would exceed 9007199254740991') end
-- The last step adds n to a.tout, after the destination was credited, when
-- it can no longer refuse: the bound is checked here, counting the
-- transfers already in flight (in a.held).
if a and a.tout + a.held + n > TOTAL_MAX then
  -- a.held may still count holds that have expired (the sweep comes after
  -- the checks): no bound is refused on such a view.
  if due_left(KEYS[5], now) then return {'again', '0', ''} end
  return invalid('transfer total would exceed 9e18')
end
if not fence_ok(7, 9) then return {'stale_fence', '0', ''} end
sweep(KEYS[1], KEYS[2], KEYS[4], KEYS[5], a, now, window, SWEEP_LIMIT)
local status = status_of(a, '', n)
if status == 'insufficient' and due_left(KEYS[5], now) then return {'again', '0', ''} end
local fields = {'k', 'xtransfer', 'a', from, 'b', to, 'n', amount_s, 'c', '', 'm', memo, 'nonce', nonce,
                't0', str(now)}
if status ~= 'ok' then
  for _, x in ipairs({'s', status}) do fields[#fields + 1] = x end
  remember(KEYS[3], window, fields)
  return {status, '0', ''}
end
local held = redis.call('HINCRBY', KEYS[1], 'held', amount_s)
-- xt: when the source last began a transfer across groups. Calls on the
-- account that see it ask the Go side to finish transfers left in flight
-- by a caller that died (xstale.lua), so no money stays held for want of
-- a Recover run.
redis.call('HSET', KEYS[1], 'xt', str(now))
local e = journal(KEYS[1], KEYS[2], tx, 'transfer_hold', '0', amount_s, a.posted, held, to, memo)
for _, x in ipairs({'s', 'pending', 'cur', a.cur, 'od', str(a.od), 'e1', e}) do fields[#fields + 1] = x end
redis.call('HSET', KEYS[3], unpack(fields))
redis.call('ZADD', KEYS[6], str(now), tx)
return {'pending', '0', '', a.cur, '', '', '', '', '', str(a.od), '', '', '', '', '', str(now), nonce}
