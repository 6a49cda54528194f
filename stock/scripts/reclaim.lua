-- reclaim.lua: return the units of holds whose deadline has passed.
--
-- KEYS[1]  SKU hash                    <p>:stock:v1:{g}:sku:<sku>
-- KEYS[2]  per-buyer units hash        <p>:stock:v1:{g}:buyers:<sku>
-- KEYS[3]  journal stream              <p>:stock:v1:{g}:journal:<sku>
-- KEYS[4]  reservation deadline index  <p>:stock:v1:{g}:holds:<sku>
-- ARGV[1]  SKU
-- ARGV[2]  most holds to reclaim, 1..1000
--
-- Reply: {reclaimed, remaining expired, age of the oldest expired hold in ms
-- before this call (0 when none)}. The orders' markers are not touched:
-- Confirm after the deadline reports the hold expired whether or not it was
-- reclaimed. deduct.lua does the same for up to 64 holds per call.

local batch = tonumber(ARGV[2])
if not batch or batch ~= math.floor(batch) or batch < 1 or batch > 1000 then return redis.error_reply('ERR batch') end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local due = redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', string.format('%d', now), 'WITHSCORES', 'LIMIT', '0', string.format('%d', batch))
if #due == 0 then return {0, 0, 0} end
local h = redis.call('HMGET', KEYS[1], 'available', 'reserved', 'sold', 'refunded', 'limit', 'supply')
if not h[1] then return {0, 0, 0} end
local a, r, s, f, limit = tonumber(h[1]), tonumber(h[2]), h[3], h[4], tonumber(h[5])
local lag = now - tonumber(due[2])
for k = 1, #due, 2 do
  local member = due[k]
  local q, buyer, id = string.match(member, '^(%d+) (%S+) (%S+)$')
  q = tonumber(q)
  a, r = a + q, r - q
  redis.call('ZREM', KEYS[4], member)
  if limit > 0 and redis.call('HINCRBY', KEYS[2], buyer, string.format('%d', -q)) <= 0 then redis.call('HDEL', KEYS[2], buyer) end
  redis.call('XADD', KEYS[3], '*', 'op', id, 'kind', 'expire', 'sku', ARGV[1], 'buyer', buyer,
    'd_avail', string.format('%d', q), 'd_res', string.format('%d', -q), 'avail', string.format('%d', a),
    'res', string.format('%d', r), 'sold', s, 'ref', f, 'supply', h[6])
end
redis.call('HSET', KEYS[1], 'available', string.format('%d', a), 'reserved', string.format('%d', r))
local left = redis.call('ZCOUNT', KEYS[4], '-inf', string.format('%d', now))
return {#due / 2, left, lag}
