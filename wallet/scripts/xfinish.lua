-- xfinish: last step of a transfer across slot groups, in the source's
-- group: post the held amount (destination credited) or release it
-- (destination refused). Idempotent. Runs after lib.lua.
--
-- KEYS[1] source account hash  <prefix>:wallet:v2:{<from group>}:acct:<from>
-- KEYS[2] source journal       <prefix>:wallet:v2:{<from group>}:journal:<from>
-- KEYS[3] transfer record      <prefix>:wallet:v2:{<from group>}:tx:<tx id>
-- KEYS[4] source holds hash    <prefix>:wallet:v2:{<from group>}:holds:<from>
-- KEYS[5] source hold index    <prefix>:wallet:v2:{<from group>}:hidx:<from>
-- ARGV[1] tx ID
-- ARGV[2] destination outcome: "credited" or its refusal
-- ARGV[3..7] the destination's entry ID, currency, overdraft, posted, held
--         after the credit ("" when refused), kept for replies
-- ARGV[8] begin nonce (see xbegin.lua): a record under another nonce is
--         another transfer's, begun under the same ID after this one was
--         finished and forgotten, and is left alone ("missing")
-- ARGV[9] idempotency window in milliseconds (for the sweep of the
--         source's holds, which comes first: the balances in the reply
--         count no expired hold; "again" when more are due than one sweep
--         releases, nothing of the transfer written)
--
-- Reply: {state, replayed(unused), '', currency, reason, time_ms, entry,
-- posted, held, overdraft, to_entry, to_currency, to_overdraft, to_posted,
-- to_held, begin_ms} as xbegin's; state "posted" or "voided", or
-- "missing" when there is no record. The record keeps no expiry until
-- xdone, so a transfer in flight is never forgotten.

local tx, outcome = ARGV[1], ARGV[2]
local m = {}
local raw = redis.call('HGETALL', KEYS[3])
for i = 1, #raw, 2 do m[raw[i]] = raw[i + 1] end
local function state()
  return {m.s, '0', '', m.cur or '', m.r or '', m.t or '', m.e3 or '', m.p or '', m.h or '', m.od or '',
          m.e2 or '', m.cur2 or '', m.od2 or '', m.p2 or '', m.h2 or '', m.t0 or '', m.nonce or ''}
end
if not m.s or m.nonce ~= ARGV[8] then return {'missing', '0', ''} end
if m.s ~= 'pending' then return state() end
local a = account(KEYS[1])
if not a then return invalid('source account of ' .. tx .. ' is missing') end
-- Checked before the first write (xbegin keeps room for it): a script
-- failing after a write would keep that write and leave the transfer
-- pending, repeating it on every retry.
if outcome == 'credited' and a.tout + tonumber(m.n) > TOTAL_MAX then
  return invalid('transfer total would exceed 9e18')
end
if a.held - tonumber(m.n) < 0 then return invalid('held total of the source is below ' .. m.n) end
local now = now_ms()
if sweep(KEYS[1], KEYS[2], KEYS[4], KEYS[5], a, now, ARGV[9], SWEEP_LIMIT) == SWEEP_LIMIT and
   due_left(KEYS[5], now) then
  return {'again', '0', ''}
end
local held = redis.call('HINCRBY', KEYS[1], 'held', '-' .. m.n)
local posted = a.posted
local e
if outcome == 'credited' then
  posted = redis.call('HINCRBY', KEYS[1], 'posted', '-' .. m.n)
  redis.call('HINCRBY', KEYS[1], 'tout', m.n)
  e = journal(KEYS[1], KEYS[2], tx, 'transfer_out', '-' .. m.n, '-' .. m.n, posted, held, m.b, m.m)
  m.s = 'posted'
else
  e = journal(KEYS[1], KEYS[2], tx, 'transfer_void', '0', '-' .. m.n, posted, held, m.b, m.m)
  m.s, m.r = 'voided', outcome
end
m.t, m.e3, m.p, m.h = str(now), e, str(posted), str(held)
m.e2, m.cur2, m.od2, m.p2, m.h2 = ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[7]
redis.call('HSET', KEYS[3], 's', m.s, 'r', m.r or '', 't', m.t, 'e3', e, 'p', m.p, 'h', m.h,
           'e2', m.e2, 'cur2', m.cur2, 'od2', m.od2, 'p2', m.p2, 'h2', m.h2)
return state()
