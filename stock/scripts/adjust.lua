-- adjust.lua: restock or write off units of a SKU, idempotent by operation ID.
--
-- KEYS[1]  operation marker  <p>:stock:v1:{g}:op:<op ID>
-- KEYS[2]  SKU hash          <p>:stock:v1:{g}:sku:<sku>
-- KEYS[3]  journal stream    <p>:stock:v1:{g}:journal:<sku>
-- ARGV[1]  operation ID
-- ARGV[2]  SKU
-- ARGV[3]  kind: "restock" (adds to available) or "writeoff" (removes from it)
-- ARGV[4]  quantity, 1..2^53-1
-- ARGV[5]  call nonce (same on every retry of one call)
-- ARGV[6]  idempotency window in milliseconds (marker TTL)
--
-- Reply: {code, replayed, detail, 0, available, reserved, sold, refunded}
--   (the 0 keeps the layout of deduct.lua's reply)
--   code      "ok" | "sold_out" (write-off beyond available) | "closed"
--             (restock of a closed SKU) | "not_found" | "overflow"
--             | "conflict" | "invalid" | "buckets" (KEYS are not the
--             operation's bucket, hash(op ID) mod B as in deduct.lua)
--   replayed  1 when an earlier call (another nonce) had decided this operation
--   detail    conflict: the differing field ("kind", "items"); invalid: reason
--   levels    on "ok": right after the operation was first applied
-- Refusals are stored in the marker too: a refused operation stays refused;
-- except "overflow", which writes nothing (the same call may succeed once the
-- levels fell).

local MAX = 9007199254740991
local id, sku, kind, nonce = ARGV[1], ARGV[2], ARGV[3], ARGV[5]
local q, window = tonumber(ARGV[4]), tonumber(ARGV[6])
local function fmt(x) return string.format('%d', x) end
local function fence_ok() return true end -- fenced calls check here (fence.go), after any replay
local function positive(x) return x and x == math.floor(x) and x >= 1 and x <= MAX end
if kind ~= 'restock' and kind ~= 'writeoff' then return {'invalid', 0, 'kind', 0} end
if not positive(q) then return {'invalid', 0, 'quantity', 0} end
if not positive(window) then return {'invalid', 0, 'window', 0} end
local desc = sku .. ' ' .. fmt(q)

local m = redis.call('HMGET', KEYS[1], 'k', 'i', 'n', 'r', 'd', 'l', 'ck', 'ci')
-- Claimed (claim.lua) on a SKU split into buckets, by an order or by this
-- operation itself.
if not m[1] and m[7] then
  if m[7] ~= kind then return {'conflict', 0, 'kind', 0} end
  if m[8] ~= desc then return {'conflict', 0, 'items', 0} end
end
if m[1] then
  if m[1] ~= kind then return {'conflict', 0, 'kind', 0} end
  if m[2] ~= desc then return {'conflict', 0, 'items', 0} end
  local reply = {m[4], (m[3] ~= nonce) and 1 or 0, m[5], 0}
  for v in string.gmatch(m[6], '%S+') do reply[#reply + 1] = tonumber(v) end
  return reply
end
if not fence_ok() then return {'stale_fence', 0, '', 0} end

local h = redis.call('HMGET', KEYS[2], 'available', 'reserved', 'sold', 'refunded', 'supply',
  'restocked', 'written_off', 'closed', 'buckets', 'bucket', 'initial')
local buckets = tonumber(h[9] or '1')
if buckets > 1 then
  -- A SKU split into buckets: the operation's bucket is hash(op ID) mod B.
  local hash = 0
  for c = 1, #id do hash = (hash * 31 + string.byte(id, c)) % 4294967296 end
  if hash % buckets ~= tonumber(h[10]) then return {'buckets', 0, tostring(buckets), 0} end
end
local code = 'ok'
local a, r, s, f, supply = tonumber(h[1]), tonumber(h[2]), tonumber(h[3]), tonumber(h[4]), tonumber(h[5])
local sign, total, field = 1, 0, 'restocked'
if not h[1] then
  code = 'not_found'
elseif kind == 'restock' then
  total = tonumber(h[6])
  if h[8] == '1' then code = 'closed'
  elseif a + q > MAX or supply + q > MAX or total + q > MAX then code = 'overflow'
  elseif buckets > 1 then
    -- Bucket k takes units (its initial share and restocks) up to its own
    -- share of 2^53-1: floor(MAX/B), plus one for the first MAX mod B
    -- buckets (Create spreads the initial stock the same way). The shares
    -- add up to 2^53-1, so the SKU's total never passes it, whichever
    -- buckets are restocked.
    local k, share = tonumber(h[10]), math.floor(MAX / buckets)
    while share * buckets > MAX do share = share - 1 end -- exact integers: MAX / B rounds
    while (share + 1) * buckets <= MAX do share = share + 1 end
    local cap = share + ((k < MAX - share * buckets) and 1 or 0)
    if tonumber(h[11] or '0') + total + q > cap then code = 'overflow' end
  end
else
  sign, total, field = -1, tonumber(h[7]), 'written_off'
  if a < q then code = 'sold_out'
  elseif total + q > MAX then code = 'overflow' end
end

-- A bound is an error, not a stored decision (available can fall again).
if code == 'overflow' then return {code, 0, '', 0} end
local l = ''
if code == 'ok' then
  a, supply = a + sign * q, supply + sign * q
  -- Levels that do not change are written back as read.
  local la, lsup, d = fmt(a), fmt(supply), fmt(sign * q)
  redis.call('HSET', KEYS[2], 'available', la, 'supply', lsup, field, fmt(total + q))
  redis.call('XADD', KEYS[3], '*', 'op', id, 'kind', kind, 'sku', sku, 'd_avail', d, 'd_supply', d,
    'avail', la, 'res', h[2], 'sold', h[3], 'ref', h[4], 'supply', lsup)
  l = la .. ' ' .. h[2] .. ' ' .. h[3] .. ' ' .. h[4]
end
redis.call('HSET', KEYS[1], 'k', kind, 'b', '', 'i', desc, 'n', nonce, 'r', code, 'd', '', 'l', l)
redis.call('PEXPIRE', KEYS[1], fmt(window))
if code == 'ok' then return {code, 0, '', 0, a, r, s, f} end
return {code, 0, '', 0}
