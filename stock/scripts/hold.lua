-- hold.lua: confirm, cancel or refund an order placed by deduct.lua,
-- idempotent per action.
--
-- KEYS         as in deduct.lua: KEYS[1] the order's marker, then per item
--              i = 1..N the SKU hash, buyers hash, journal and deadline index
-- ARGV[1]      order ID
-- ARGV[2]      buyer ID
-- ARGV[3]      call nonce (same on every retry of one call)
-- ARGV[4]      idempotency window in milliseconds
-- ARGV[5]      action: "confirm" | "cancel" | "refund"
-- ARGV[4+2i]   SKU of item i, ARGV[5+2i] its quantity, as in the order
-- ARGV[5+2N+i] confirm only: units of item i to sell, 0..quantity; the rest
--              goes back to available
--
-- Reply: {code, replayed, detail, deadline, a1, r1, s1, f1, ...}
--   code      "ok" | "expired" (confirm after the deadline) | "cancelled"
--             (confirm of a cancelled order) | "no_order" (no such order, or
--             its marker expired) | "refused" (the order itself was refused;
--             detail = its code) | "state" (the action does not fit: detail =
--             the order's state) | "conflict" | "invalid" | "buckets" (KEYS
--             are not the buyer's home bucket and hold no decided order,
--             see deduct.lua)
--   replayed  1 when an earlier call (another nonce) had done this action
--   deadline  the hold's deadline (Unix ms, server clock); 0 for Deduct orders
--   levels    on "ok": per item, right after the action was first applied
--
-- confirm: held -> confirmed (sold = take; the rest back to available);
--          after the deadline, or once the hold was reclaimed, the units go
--          back and the reply is "expired".
-- cancel:  held -> cancelled, units back; with no marker at all a tombstone
--          is left so that a late Reserve of the order is refused.
-- refund:  sold (Deduct) or confirmed -> refunded, sold units back to
--          available and counted in refunded. Once.
-- Units returned also return the buyer's allowance (SKUs with a limit).

local MAX = 9007199254740991
local n = (#KEYS - 1) / 4
local id, buyer, nonce, action = ARGV[1], ARGV[2], ARGV[3], ARGV[5]
local window = tonumber(ARGV[4])
local format = string.format
local function fmt(x) return format('%d', x) end
local function fence_ok() return true end -- fenced calls check here (fence.go), after any replay
local function int(v, lo, hi)
  local x = tonumber(v)
  if x and x == math.floor(x) and x >= lo and x <= hi then return x end
  return nil
end

if n < 1 or n ~= math.floor(n) then return {'invalid', 0, 'key count', 0} end
local nargs = 5 + 2 * n
if action == 'confirm' then nargs = nargs + n end
if #ARGV ~= nargs then return {'invalid', 0, 'argument count', 0} end
if action ~= 'confirm' and action ~= 'cancel' and action ~= 'refund' then return {'invalid', 0, 'action', 0} end
if not int(window, 1, MAX) then return {'invalid', 0, 'window', 0} end

-- A SKU split into buckets is served by the buyer's home bucket only. The
-- first SKU's levels are read here too, once (nothing is written before
-- they are used).
local SKU_FIELDS = {'available', 'reserved', 'sold', 'refunded', 'limit', 'supply', 'buckets', 'bucket'}
local route = redis.call('HMGET', KEYS[2], unpack(SKU_FIELDS))
local buckets = tonumber(route[7] or '1')
if buckets > 1 then
  if n > 1 then return {'invalid', 0, 'a SKU split into buckets must be alone in its order', 0} end
  local hash = 0
  for c = 1, #buyer do hash = (hash * 31 + string.byte(buyer, c)) % 4294967296 end
  -- Not the home bucket: only an order decided here before the SKU existed
  -- (a refusal, a Cancel's tombstone) is answered here, where it is stored.
  if hash % buckets ~= tonumber(route[8]) and redis.call('HEXISTS', KEYS[1], 'k') == 0 then
    return {'buckets', 0, tostring(buckets), 0}
  end
end

local skus, qtys, desc = {}, {}, {}
for i = 1, n do
  skus[i], qtys[i] = ARGV[4 + 2 * i], int(ARGV[5 + 2 * i], 1, MAX)
  if not qtys[i] then return {'invalid', 0, 'quantity of item ' .. i, 0} end
  desc[i] = skus[i] .. ' ' .. fmt(qtys[i])
end
desc = (n == 1) and desc[1] or table.concat(desc, ' ')

local m = redis.call('HMGET', KEYS[1], 'k', 'b', 'i', 'r', 's', 'dl', 'c', 'cn', 'cl', 'xn', 'xl', 'fn', 'fl',
  'ck', 'cb', 'ci')
if not m[1] and m[14] then
  -- Claimed (claim.lua) by an order on a SKU split into buckets, not placed
  -- here: the action is for that order.
  if m[15] ~= buyer then return {'conflict', 0, 'buyer', 0} end
  if m[16] ~= desc then return {'conflict', 0, 'items', 0} end
  if action == 'cancel' and m[14] ~= 'reserve' then return {'conflict', 0, 'kind', 0} end
end
local kind, mb, mi, code, state, dl = m[1], m[2], m[3], m[4], m[5], tonumber(m[6] or '0')
-- The action's own fields: its nonce and the levels it left (prefix c, x, f).
local p, an, al = 'c', m[8], m[9]
if action == 'cancel' then p, an, al = 'x', m[10], m[11]
elseif action == 'refund' then p, an, al = 'f', m[12], m[13] end

-- A reply with levels as stored ("a r s f ..."): replays only; a fresh
-- result builds its reply from numbers.
local function reply(c, replayed, detail, l)
  local out = {c, replayed, detail, dl}
  if l and l ~= '' then
    for v in string.gmatch(l, '%S+') do out[#out + 1] = tonumber(v) end
  end
  return out
end

if not kind then
  if action ~= 'cancel' then return reply('no_order', 0, '') end
  if not fence_ok() then return reply('stale_fence', 0, '') end
  redis.call('HSET', KEYS[1], 'k', 'reserve', 'b', buyer, 'i', desc, 'n', nonce, 'r', 'cancelled', 'd', '',
    'l', '', 's', 'cancelled', 'xn', nonce, 'xl', '')
  redis.call('PEXPIRE', KEYS[1], fmt(window))
  return reply('ok', 0, '')
end
if action ~= 'refund' and kind ~= 'reserve' then return reply('conflict', 0, 'kind') end
if mb ~= buyer then return reply('conflict', 0, 'buyer') end
if mi ~= desc then return reply('conflict', 0, 'items') end
if not state then state = 'sold' end -- a Deduct order

-- Units of each item to sell on confirm.
local take, takeDesc = {}, {}
if action == 'confirm' then
  for i = 1, n do
    take[i] = int(ARGV[5 + 2 * n + i], 0, qtys[i])
    if not take[i] then return reply('invalid', 0, 'confirmed quantity of item ' .. i) end
    takeDesc[i] = fmt(take[i])
  end
  takeDesc = table.concat(takeDesc, ' ')
end

-- Replays and refusals.
if code ~= 'ok' then
  if action == 'cancel' then
    if not an then
      if not fence_ok() then return reply('stale_fence', 0, '') end
      redis.call('HSET', KEYS[1], 'xn', nonce, 'xl', '')
      return reply('ok', 0, '')
    end
    return reply('ok', (an ~= nonce) and 1 or 0, '', al)
  end
  return reply('refused', 0, code)
end
if action == 'confirm' then
  if state == 'confirmed' or (state == 'refunded' and m[7]) then
    if m[7] ~= takeDesc then return reply('conflict', 0, 'confirmed quantities') end
    return reply('ok', (an ~= nonce) and 1 or 0, '', al)
  end
  if state == 'cancelled' then return reply('cancelled', 0, '') end
  if state == 'expired' then return reply('expired', 0, '') end
elseif action == 'cancel' then
  if state == 'cancelled' or state == 'expired' then
    if not an then
      if not fence_ok() then return reply('stale_fence', 0, '') end
      redis.call('HSET', KEYS[1], 's', 'cancelled', 'xn', nonce, 'xl', '')
      return reply('ok', 0, '')
    end
    return reply('ok', (an ~= nonce) and 1 or 0, '', al)
  end
  if state ~= 'held' then return reply('state', 0, state) end
else
  if state == 'refunded' then return reply('ok', (an ~= nonce) and 1 or 0, '', al) end
  if state ~= 'sold' and state ~= 'confirmed' then return reply('state', 0, state) end
end

-- Not a replay: the action is judged now, so the fence is too.
if not fence_ok() then return reply('stale_fence', 0, '') end

-- Read every SKU and hold before the first write.
local st = {}
local expired = false
for i = 1, n do
  local j = 1 + 4 * (i - 1)
  local h = (i == 1) and route or redis.call('HMGET', KEYS[j + 1], unpack(SKU_FIELDS))
  if not h[1] then return reply('invalid', 0, 'sku ' .. skus[i] .. ' vanished') end
  local s = {a = tonumber(h[1]), r = tonumber(h[2]), s = tonumber(h[3]), f = tonumber(h[4]),
             limit = tonumber(h[5]), supply = h[6], ref = h[4]}
  st[i] = s
  if state == 'held' then
    s.member = fmt(qtys[i]) .. ' ' .. buyer .. ' ' .. id
    s.held = redis.call('ZSCORE', KEYS[j + 4], s.member) ~= false
    if not s.held then expired = true end
  end
end
if action == 'confirm' then
  -- Only a confirm depends on the server's clock (the deadline).
  local t = redis.call('TIME')
  if tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) >= dl then expired = true end
end
if action == 'confirm' and not expired then
  for i = 1, n do
    if st[i].s + take[i] > MAX then return reply('invalid', 0, 'overflow') end
  end
end

local newState, outcome = 'cancelled', 'ok'
local levels = {}
if action == 'refund' then
  local sold = {}
  if state == 'confirmed' then
    for v in string.gmatch(m[7], '%S+') do sold[#sold + 1] = tonumber(v) end
  else
    sold = qtys
  end
  for i = 1, n do
    if st[i].a + sold[i] > MAX or st[i].f + sold[i] > MAX then return reply('invalid', 0, 'overflow') end
  end
  newState = 'refunded'
  for i = 1, n do
    local j, s, q = 1 + 4 * (i - 1), st[i], sold[i]
    if q > 0 then
      s.a, s.f = s.a + q, s.f + q
      local la, lf, qs = fmt(s.a), fmt(s.f), fmt(q)
      redis.call('HSET', KEYS[j + 1], 'available', la, 'refunded', lf)
      if s.limit > 0 and redis.call('HINCRBY', KEYS[j + 2], buyer, '-' .. qs) <= 0 then
        redis.call('HDEL', KEYS[j + 2], buyer)
      end
      redis.call('XADD', KEYS[j + 3], '*', 'op', id, 'kind', 'refund', 'sku', skus[i], 'buyer', buyer,
        'd_avail', qs, 'd_ref', qs, 'avail', la, 'res', fmt(s.r), 'sold', fmt(s.s),
        'ref', lf, 'supply', s.supply)
    end
    levels[i] = fmt(s.a) .. ' ' .. fmt(s.r) .. ' ' .. fmt(s.s) .. ' ' .. fmt(s.f)
  end
else
  -- confirm or cancel of a held order; an expired confirm returns the units.
  local sell = action == 'confirm' and not expired
  local entryKind = action
  if action == 'confirm' then
    if sell then newState = 'confirmed' else newState, outcome, entryKind = 'expired', 'expired', 'expire' end
  end
  for i = 1, n do
    local j, s, q = 1 + 4 * (i - 1), st[i], qtys[i]
    if s.held then
      local sold = 0
      if sell then sold = take[i] end
      local back = q - sold
      s.r, s.s, s.a = s.r - q, s.s + sold, s.a + back
      local la, lr, ls = fmt(s.a), fmt(s.r), fmt(s.s)
      redis.call('ZREM', KEYS[j + 4], s.member)
      if sold > 0 then
        redis.call('HSET', KEYS[j + 1], 'available', la, 'reserved', lr, 'sold', ls)
      else
        redis.call('HSET', KEYS[j + 1], 'available', la, 'reserved', lr)
      end
      if s.limit > 0 and back > 0 and redis.call('HINCRBY', KEYS[j + 2], buyer, fmt(-back)) <= 0 then
        redis.call('HDEL', KEYS[j + 2], buyer)
      end
      redis.call('XADD', KEYS[j + 3], '*', 'op', id, 'kind', entryKind, 'sku', skus[i], 'buyer', buyer,
        'd_avail', fmt(back), 'd_res', fmt(-q), 'd_sold', fmt(sold), 'avail', la, 'res', lr,
        'sold', ls, 'ref', s.ref, 'supply', s.supply)
    end
    levels[i] = fmt(s.a) .. ' ' .. fmt(s.r) .. ' ' .. fmt(s.s) .. ' ' .. fmt(s.f)
  end
end

if outcome ~= 'ok' then
  redis.call('HSET', KEYS[1], 's', newState)
  redis.call('PEXPIRE', KEYS[1], fmt(window))
  return reply(outcome, 0, '')
end
local l = (n == 1) and levels[1] or table.concat(levels, ' ')
if action == 'confirm' then
  redis.call('HSET', KEYS[1], 's', newState, 'cn', nonce, 'cl', l, 'c', takeDesc)
else
  redis.call('HSET', KEYS[1], 's', newState, p .. 'n', nonce, p .. 'l', l)
end
redis.call('PEXPIRE', KEYS[1], fmt(window))
local out = {outcome, 0, '', dl}
for i = 1, n do
  local s = st[i]
  out[4 * i + 1], out[4 * i + 2], out[4 * i + 3], out[4 * i + 4] = s.a, s.r, s.s, s.f
end
return out
