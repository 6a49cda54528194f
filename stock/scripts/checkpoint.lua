-- checkpoint.lua: append a checkpoint entry carrying the SKU's levels, so an
-- audit can start from it and older entries may be trimmed.
--
-- KEYS[1]  SKU hash        <p>:stock:v1:{g}:sku:<sku>
-- KEYS[2]  journal stream  <p>:stock:v1:{g}:journal:<sku>
-- ARGV[1]  SKU
--
-- Reply: the checkpoint's journal ID; false when the SKU does not exist; the
-- error "DRIFT ..." (nothing written) when the SKU's levels are not the ones
-- its journal's last entry records. A checkpoint carries the levels an audit
-- starts from, so it is never written over levels the journal does not
-- explain (Checkpoint also audits the journal up to here first).

local h = redis.call('HMGET', KEYS[1], 'available', 'reserved', 'sold', 'refunded', 'supply')
if not h[1] then return false end
local last = redis.call('XREVRANGE', KEYS[2], '+', '-', 'COUNT', '1')
if #last == 0 then return redis.error_reply('DRIFT the journal is empty') end
local e = {}
local f = last[1][2]
for i = 1, #f, 2 do e[f[i]] = f[i + 1] end
if e.avail ~= h[1] or e.res ~= h[2] or e.sold ~= h[3] or e.ref ~= h[4] or e.supply ~= h[5] then
  return redis.error_reply('DRIFT the levels differ from the journal\'s last entry ' .. last[1][1])
end
local id = redis.call('XADD', KEYS[2], '*', 'op', '', 'kind', 'checkpoint', 'sku', ARGV[1],
  'avail', h[1], 'res', h[2], 'sold', h[3], 'ref', h[4], 'supply', h[5])
redis.call('HSET', KEYS[1], 'ckpt', id)
return id
