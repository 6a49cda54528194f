-- close.lua: stop all further sales and restocks of a SKU.
--
-- KEYS[1]  SKU hash        <p>:stock:v1:{g}:sku:<sku>
-- KEYS[2]  journal stream  <p>:stock:v1:{g}:journal:<sku>
-- ARGV[1]  SKU
--
-- Reply: "closed" (now closed), "already" (it was; nothing written) or
-- "not_found".

local h = redis.call('HMGET', KEYS[1], 'closed', 'available', 'reserved', 'sold', 'refunded', 'supply')
if not h[1] then return 'not_found' end
if h[1] == '1' then return 'already' end
redis.call('HSET', KEYS[1], 'closed', '1')
redis.call('XADD', KEYS[2], '*', 'op', '', 'kind', 'close', 'sku', ARGV[1],
  'avail', h[2], 'res', h[3], 'sold', h[4], 'ref', h[5], 'supply', h[6])
return 'closed'
