-- close.lua: end the sale of a SKU: stop all further sales and restocks, and
-- drop the per-buyer counters, which only judge the buyer limit of new
-- orders (a closed SKU takes none).
--
-- KEYS[1]  SKU hash          <p>:stock:v1:{g}:sku:<sku>
-- KEYS[2]  journal stream    <p>:stock:v1:{g}:journal:<sku>
-- KEYS[3]  optional: per-buyer units hash  <p>:stock:v1:{g}:buyers:<sku>
-- ARGV[1]  SKU
--
-- Reply: "closed" (now closed), "already" (it was; nothing written but the
-- deletion of counters a closed SKU may still have) or "not_found".
--
-- A hold taken before the close can still be confirmed, cancelled or
-- expire, and a sold order refunded: those give units back to a buyer whose
-- counter is gone, which leaves no counter (HINCRBY of a missing field then
-- HDEL when it is not positive, as for any buyer back at zero).

local h = redis.call('HMGET', KEYS[1], 'closed', 'available', 'reserved', 'sold', 'refunded', 'supply')
if not h[1] then return 'not_found' end
-- An expiry in the past deletes the key (and writes nothing when there is
-- none), without the DEL command the package's ACL user is denied.
if KEYS[3] then redis.call('PEXPIRE', KEYS[3], '0') end
if h[1] == '1' then return 'already' end
redis.call('HSET', KEYS[1], 'closed', '1')
redis.call('XADD', KEYS[2], '*', 'op', '', 'kind', 'close', 'sku', ARGV[1],
  'avail', h[2], 'res', h[3], 'sold', h[4], 'ref', h[5], 'supply', h[6])
return 'closed'
