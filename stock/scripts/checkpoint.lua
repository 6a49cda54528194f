-- checkpoint.lua: append a checkpoint entry carrying the SKU's levels, so an
-- audit can start from it and older entries may be trimmed.
--
-- KEYS[1]  SKU hash        <p>:stock:v1:{g}:sku:<sku>
-- KEYS[2]  journal stream  <p>:stock:v1:{g}:journal:<sku>
-- ARGV[1]  SKU
--
-- Reply: the checkpoint's journal ID, or false when the SKU does not exist.

local h = redis.call('HMGET', KEYS[1], 'available', 'reserved', 'sold', 'refunded', 'supply')
if not h[1] then return false end
local id = redis.call('XADD', KEYS[2], '*', 'op', '', 'kind', 'checkpoint', 'sku', ARGV[1],
  'avail', h[1], 'res', h[2], 'sold', h[3], 'ref', h[4], 'supply', h[5])
redis.call('HSET', KEYS[1], 'ckpt', id)
return id
