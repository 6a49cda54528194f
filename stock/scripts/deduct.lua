-- deduct.lua: sell (or reserve) every item of one order, all or nothing,
-- idempotent by order ID. All keys share the order's slot group {g}. This
-- file is self-contained so it can be run and benchmarked on its own.
--
-- KEYS[1]      operation marker of the order  <p>:stock:v1:{g}:op:<order ID>
-- then 4 keys per item i = 1..N, j = 1 + 4*(i-1):
-- KEYS[j+1]    SKU hash (levels and settings)  <p>:stock:v1:{g}:sku:<sku>
-- KEYS[j+2]    per-buyer units hash            <p>:stock:v1:{g}:buyers:<sku>
-- KEYS[j+3]    journal stream                  <p>:stock:v1:{g}:journal:<sku>
-- KEYS[j+4]    reservation deadline index      <p>:stock:v1:{g}:holds:<sku>
--
-- ARGV[1]      order ID
-- ARGV[2]      buyer ID
-- ARGV[3]      call nonce (same on every retry of one call)
-- ARGV[4]      idempotency window in milliseconds (marker TTL)
-- ARGV[5]      hold TTL in milliseconds: 0 sells now (Deduct); > 0 moves the
--              units to reserved until Confirm, Cancel or the deadline (Reserve)
-- ARGV[4+2i]   SKU of item i      (ARGV[6], ARGV[8], ...)
-- ARGV[5+2i]   quantity of item i (ARGV[7], ARGV[9], ...), 1..2^53-1
-- ARGV[6+2N]   optional: "final" stores "sold_out" for a bucketed SKU instead
--              of replying "short"
--
-- A SKU split into B > 1 buckets (WithBuckets) is served by the buyer's home
-- bucket, number hash(buyer) mod B with hash = (hash * 31 + byte) mod 2^32;
-- KEYS are then that bucket's keys, tagged {g#k} (bucket 0 is {g}), and the
-- SKU must be the order's only item.
--
-- Reply: {code, replayed, detail, deadline, a1, r1, s1, f1, a2, r2, s2, f2, ...}
--   code      "ok" | "sold_out" | "limit" | "closed" | "not_found" | "cancelled"
--             (a Cancel came first) | "overflow" (a level would pass 2^53-1)
--             | "conflict" | "invalid" | "again" (expired holds were
--             reclaimed but more remain and stock was short: nothing decided,
--             call again with the same arguments) | "short" (a bucket ran
--             short: nothing decided; refill it, call again) | "buckets"
--             (KEYS are not the buyer's home bucket; detail = bucket count)
--   replayed  1 when an earlier call (another nonce) had decided this order
--   detail    refusal: 1-based index of the refused item; conflict: the
--             differing field ("kind", "buyer", "items"); invalid: the reason
--   deadline  reservations: the hold's deadline, Unix ms of the server clock
--   a r s f   per item, on "ok": available, reserved, sold, refunded right
--             after the order was first applied
--
-- A refusal is stored in the marker like a success, so a refused order stays
-- refused when retried ("overflow" and "conflict" are not stored: they write
-- nothing and may not stay true); a reservation cancelled since its first call is
-- reported as "cancelled". Holds whose deadline has passed (at most 64 per SKU
-- per call) are returned to available before the order is judged, so
-- correctness never waits for the reclaimer.
--
-- Marker fields: k kind ("deduct" | "reserve"), b buyer, i items ("sku qty
-- ..."), n nonce, r code, d detail, l levels, and for reservations s state
-- ("held" | "confirmed" | "cancelled" | "refunded") and dl deadline.
-- Hold members: "<qty> <buyer> <order ID>", scored by deadline.

local MAX = 9007199254740991
local n = (#KEYS - 1) / 4
local id, buyer, nonce = ARGV[1], ARGV[2], ARGV[3]
local window, ttl = tonumber(ARGV[4]), tonumber(ARGV[5])

local floor = math.floor
local function int(v, lo)
  local x = tonumber(v)
  if x and x == floor(x) and x >= lo and x <= MAX then return x end
  return nil
end
local format = string.format
local function fmt(x) return format('%d', x) end
local function fence_ok() return true end -- fenced calls check here (fence.go), after any replay

if n < 1 or n ~= floor(n) or (#ARGV ~= 5 + 2 * n and #ARGV ~= 6 + 2 * n) then
  return {'invalid', 0, 'key or argument count', 0}
end
local final = ARGV[6 + 2 * n] == 'final'
if not int(window, 1) then return {'invalid', 0, 'window', 0} end
if not int(ttl, 0) then return {'invalid', 0, 'hold ttl', 0} end
local kind = (ttl > 0) and 'reserve' or 'deduct'

-- The canonical description of the order ("sku qty ..."), compared on every
-- retry. A quantity the caller already sent in canonical decimal (this
-- package always does) is used as sent.
-- Per item: SKU, quantity and its canonical decimal (tables only for
-- orders of several items or the general path).
local skus, qtys, qstr
local sku1, q1, qs1 = ARGV[6], int(ARGV[7], 1), ARGV[7]
if not q1 then return {'invalid', 0, 'quantity of item 1', 0} end
if format('%d', q1) ~= qs1 then qs1 = format('%d', q1) end
local desc = sku1 .. ' ' .. qs1
if n > 1 then
  skus, qtys, qstr = {sku1}, {q1}, {qs1}
  for i = 2, n do
    local sku, qs = ARGV[4 + 2 * i], ARGV[5 + 2 * i]
    local q = int(qs, 1)
    if not q then return {'invalid', 0, 'quantity of item ' .. i, 0} end
    if format('%d', q) ~= qs then qs = format('%d', q) end
    for k = 1, i - 1 do
      if skus[k] == sku then return {'invalid', 0, 'duplicate sku', 0} end
    end
    skus[i], qtys[i], qstr[i] = sku, q, qs
    desc = desc .. ' ' .. sku .. ' ' .. qs
  end
end

-- The common case, an order never seen, reads two fields; a marker or a
-- claim is read whole.
local m = redis.call('HMGET', KEYS[1], 'k', 'ck')
if m[1] or m[2] then
  m = redis.call('HMGET', KEYS[1], 'k', 'b', 'i', 'n', 'r', 'd', 'l', 'dl', 's', 'ck', 'cb', 'ci')
  if not m[1] then
    -- Claimed (claim.lua) by an order on a SKU split into buckets.
    if m[10] ~= kind then return {'conflict', 0, 'kind', 0} end
    if m[11] ~= buyer then return {'conflict', 0, 'buyer', 0} end
    if m[12] ~= desc then return {'conflict', 0, 'items', 0} end
  else
    if m[1] ~= kind then return {'conflict', 0, 'kind', 0} end
    if m[2] ~= buyer then return {'conflict', 0, 'buyer', 0} end
    if m[3] ~= desc then return {'conflict', 0, 'items', 0} end
    -- A reservation cancelled since is reported as cancelled, not as held.
    if m[9] == 'cancelled' then return {'cancelled', 1, '', tonumber(m[8] or '0')} end
    local reply = {m[5], (m[4] ~= nonce) and 1 or 0, m[6], tonumber(m[8] or '0')}
    for v in string.gmatch(m[7], '%S+') do reply[#reply + 1] = tonumber(v) end
    return reply
  end
end
-- The fence is judged only for an order not decided yet: a replay answers
-- whatever lease wrote since.
if not fence_ok() then return {'stale_fence', 0, '', 0} end

local pre
if n == 1 and kind == 'deduct' then
  -- The common case: one item sold now, on a SKU not split into buckets
  -- with nothing reserved (so no hold can have expired). The same
  -- decisions as the general path below, without its tables; the levels
  -- that do not change are written back as read.
  local h = redis.call('HMGET', KEYS[2], 'available', 'reserved', 'sold', 'refunded', 'closed', 'limit',
    'supply', 'buckets', 'bucket')
  if h[1] and (not h[8] or h[8] == '1') and tonumber(h[2]) == 0 then
    local q, qs = q1, qs1
    local a, s, limit = tonumber(h[1]), tonumber(h[3]), tonumber(h[6])
    local code = 'ok'
    if h[5] == '1' then
      code = 'closed'
    elseif limit > 0 and tonumber(redis.call('HGET', KEYS[3], buyer) or '0') + q > limit then
      code = 'limit'
    elseif a < q then
      code = 'sold_out'
    elseif s + q > MAX then
      return {'overflow', 0, '1', 0}
    end
    if code ~= 'ok' then
      redis.call('HSET', KEYS[1], 'k', 'deduct', 'b', buyer, 'i', desc, 'n', nonce, 'r', code, 'd', '1', 'l', '')
      redis.call('PEXPIRE', KEYS[1], fmt(window))
      return {code, 0, '1', 0}
    end
    a, s = a - q, s + q
    local la, ls = fmt(a), fmt(s)
    redis.call('HSET', KEYS[2], 'available', la, 'sold', ls)
    if limit > 0 then redis.call('HINCRBY', KEYS[3], buyer, qs) end
    redis.call('XADD', KEYS[4], '*', 'op', id, 'kind', 'deduct', 'sku', sku1, 'buyer', buyer,
      'd_avail', '-' .. qs, 'd_sold', qs, 'avail', la, 'res', h[2], 'sold', ls, 'ref', h[4], 'supply', h[7])
    redis.call('HSET', KEYS[1], 'k', 'deduct', 'b', buyer, 'i', desc, 'n', nonce, 'r', 'ok', 'd', '',
      'l', la .. ' ' .. h[2] .. ' ' .. ls .. ' ' .. h[4])
    redis.call('PEXPIRE', KEYS[1], fmt(window))
    return {'ok', 0, '', 0, a, 0, s, tonumber(h[4])}
  end
  pre = h -- read once: the general path starts from it
end
if n == 1 then skus, qtys, qstr = {sku1}, {q1}, {qs1} end

-- The server clock is read only when a deadline matters: a reservation, or
-- reserved units whose holds may have expired.
local now
local function clock()
  if not now then
    local t = redis.call('TIME')
    now = tonumber(t[1]) * 1000 + floor(tonumber(t[2]) / 1000)
  end
  return now
end

-- Read everything and judge before the first write. Per item: available,
-- reserved, sold, refunded, limit, supply, the buyer's units, expired holds
-- (nil when none) and whether more expired holds wait.
local A, R, S, F, L, SUP, HAD, EXP, MORE = {}, {}, {}, {}, {}, {}, {}, {}, {}
local swept = false
local code, detail = 'ok', ''
for i = 1, n do
  local j = 1 + 4 * (i - 1)
  local h = (i == 1 and pre) or redis.call('HMGET', KEYS[j + 1], 'available', 'reserved', 'sold', 'refunded',
    'closed', 'limit', 'supply', 'buckets', 'bucket')
  if not h[1] then
    code, detail = 'not_found', i
    break
  end
  local buckets = 1
  if h[8] and h[8] ~= '1' then
    buckets = tonumber(h[8])
    -- A SKU split into buckets: the buyer's home bucket only, alone.
    if n > 1 then return {'invalid', 0, 'a SKU split into buckets must be alone in its order', 0} end
    local hash = 0
    for c = 1, #buyer do hash = (hash * 31 + string.byte(buyer, c)) % 4294967296 end
    if hash % buckets ~= tonumber(h[9]) then return {'buckets', 0, tostring(buckets), 0} end
  end
  local a, r, limit, had = tonumber(h[1]), tonumber(h[2]), tonumber(h[6]), 0
  if limit > 0 then had = tonumber(redis.call('HGET', KEYS[j + 2], buyer) or '0') end
  if r > 0 then
    -- Lazy expiry: holds past their deadline count as available again.
    local due = redis.call('ZRANGEBYSCORE', KEYS[j + 4], '-inf', fmt(clock()), 'LIMIT', '0', '64')
    MORE[i] = #due == 64
    if #due > 0 then
      local expired = {}
      for k, member in ipairs(due) do
        local eq, eb, eid = string.match(member, '^(%d+) (%S+) (%S+)$')
        eq = tonumber(eq)
        expired[k] = {member = member, q = eq, buyer = eb, id = eid}
        a, r = a + eq, r - eq
        if eb == buyer then had = had - eq end
      end
      EXP[i], swept = expired, true
    end
  end
  A[i], R[i], S[i], F[i], L[i], SUP[i], HAD[i] = a, r, tonumber(h[3]), tonumber(h[4]), limit, h[7], had
  local q = qtys[i]
  if kind == 'reserve' then
    -- The order's hold member may still be indexed when its marker is gone
    -- (a Reserve re-sent after the window whose old hold was never
    -- reclaimed). Adding it again would replace the member and count its
    -- units twice in reserved.
    local member = qstr[i] .. ' ' .. buyer .. ' ' .. id
    local score = redis.call('ZSCORE', KEYS[j + 4], member)
    if score then
      local gone = false
      for _, e in ipairs(EXP[i] or {}) do if e.member == member then gone = true end end
      if not gone then
        if tonumber(score) <= clock() then code = 'again' else code = 'conflict' end
        detail = i
        break
      end
    end
  end
  if h[5] == '1' then
    code, detail = 'closed', i
    break
  end
  if limit > 0 and had + q > limit then
    code, detail = 'limit', i
    break
  end
  if a < q then
    -- A bucket that runs short asks the caller to refill it from the
    -- other buckets.
    if buckets > 1 and not final then code = 'short'
    else code = 'sold_out' end
    detail = i
    break
  end
  if S[i] + q > MAX or r + q > MAX then
    code, detail = 'overflow', i
    break
  end
end
-- A refusal that expired holds not yet swept could change (the buyer's own
-- expired hold, units coming back) is never decided on a partial sweep:
-- reclaim this batch and let the caller call again.
if code == 'limit' or code == 'sold_out' or code == 'short' or code == 'overflow' then
  if MORE[detail] then code = 'again' end
end
-- A bound (a level would pass 2^53-1) or a hold conflict is an error, not a
-- stored decision: it may not stay true, so nothing may be written before
-- it. Expired holds found on the way are swept first by an 'again' round.
if (code == 'overflow' or code == 'conflict') and swept then code = 'again' end
detail = tostring(detail)

-- Writes. Expired holds are returned even when the order is refused.
local deadline = 0
if kind == 'reserve' then deadline = clock() + ttl end
local reply = {code, 0, detail, deadline}
local levels
for i = 1, #A do
  local j = 1 + 4 * (i - 1)
  local expired = EXP[i]
  if expired then
    local a, r = A[i], R[i]
    for k = #expired, 1, -1 do
      local e = expired[k]
      a, r = a - e.q, r + e.q
    end
    local sold, ref = fmt(S[i]), fmt(F[i])
    for _, e in ipairs(expired) do
      a, r = a + e.q, r - e.q
      redis.call('ZREM', KEYS[j + 4], e.member)
      if L[i] > 0 and redis.call('HINCRBY', KEYS[j + 2], e.buyer, fmt(-e.q)) <= 0 then
        redis.call('HDEL', KEYS[j + 2], e.buyer)
      end
      redis.call('XADD', KEYS[j + 3], '*', 'op', e.id, 'kind', 'expire', 'sku', skus[i], 'buyer', e.buyer,
        'd_avail', fmt(e.q), 'd_res', fmt(-e.q), 'avail', fmt(a), 'res', fmt(r), 'sold', sold,
        'ref', ref, 'supply', SUP[i])
    end
    if code ~= 'ok' then
      redis.call('HSET', KEYS[j + 1], 'available', fmt(A[i]), 'reserved', fmt(R[i]))
    end
  end
  if code == 'ok' then
    local q, qs = qtys[i], qstr[i]
    local a, r, s = A[i] - q, R[i], S[i]
    local la, lr, ls, lf
    if kind == 'reserve' then
      r = r + q
      la, lr, ls, lf = fmt(a), fmt(r), fmt(s), fmt(F[i])
      redis.call('ZADD', KEYS[j + 4], fmt(deadline), qs .. ' ' .. buyer .. ' ' .. id)
      redis.call('HSET', KEYS[j + 1], 'available', la, 'reserved', lr)
    else
      s = s + q
      la, lr, ls, lf = fmt(a), fmt(r), fmt(s), fmt(F[i])
      if expired then
        redis.call('HSET', KEYS[j + 1], 'available', la, 'reserved', lr, 'sold', ls)
      else
        redis.call('HSET', KEYS[j + 1], 'available', la, 'sold', ls)
      end
    end
    if L[i] > 0 then redis.call('HINCRBY', KEYS[j + 2], buyer, qs) end
    if kind == 'reserve' then
      redis.call('XADD', KEYS[j + 3], '*', 'op', id, 'kind', 'reserve', 'sku', skus[i], 'buyer', buyer,
        'd_avail', '-' .. qs, 'd_res', qs, 'avail', la, 'res', lr, 'sold', ls, 'ref', lf, 'supply', SUP[i])
    else
      redis.call('XADD', KEYS[j + 3], '*', 'op', id, 'kind', 'deduct', 'sku', skus[i], 'buyer', buyer,
        'd_avail', '-' .. qs, 'd_sold', qs, 'avail', la, 'res', lr, 'sold', ls, 'ref', lf, 'supply', SUP[i])
    end
    local k = 4 * i
    reply[k + 1], reply[k + 2], reply[k + 3], reply[k + 4] = a, r, s, F[i]
    if levels then levels = levels .. ' ' .. la .. ' ' .. lr .. ' ' .. ls .. ' ' .. lf
    else levels = la .. ' ' .. lr .. ' ' .. ls .. ' ' .. lf end
  end
end

if code == 'again' or code == 'short' or code == 'overflow' then return {code, 0, detail, 0} end
if code == 'conflict' then return {code, 0, 'hold', 0} end
if kind == 'reserve' then
  redis.call('HSET', KEYS[1], 'k', kind, 'b', buyer, 'i', desc, 'n', nonce, 'r', code, 'd', detail,
    'l', levels or '', 's', 'held', 'dl', fmt(deadline))
  redis.call('PEXPIRE', KEYS[1], fmt(window + ttl))
else
  redis.call('HSET', KEYS[1], 'k', kind, 'b', buyer, 'i', desc, 'n', nonce, 'r', code, 'd', detail,
    'l', levels or '')
  redis.call('PEXPIRE', KEYS[1], fmt(window))
end
return reply
