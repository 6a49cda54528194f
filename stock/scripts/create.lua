-- create.lua: create a SKU with its initial stock, once.
--
-- KEYS[1]  SKU hash        <p>:stock:v1:{g}:sku:<sku>
-- KEYS[2]  journal stream  <p>:stock:v1:{g}:journal:<sku>
-- ARGV[1]  SKU
-- ARGV[2]  initial stock, 0..2^53-1
-- ARGV[3]  per-buyer limit in units, 0 = none
-- ARGV[4]  number of buckets the SKU is split into, 1..64 (see WithBuckets)
-- ARGV[5]  this bucket's index, 0..ARGV[4]-1; KEYS are the bucket's keys
--
-- Reply: {code, detail}
--   "created"                     the SKU was created
--   "exists"                      it already existed with the same settings;
--                                 nothing changed (a retried Create)
--   "conflict", field             it exists with another "initial", "limit"
--                                 or "buckets"
--   "invalid", reason
--
-- The SKU hash holds: initial, restocked, written_off, supply (= initial +
-- restocked - written_off), available, reserved, sold, refunded, limit,
-- closed (0/1), buckets, bucket, moved (units moved in from other buckets
-- minus units moved out: supply = initial + restocked - written_off +
-- moved), ckpt (journal ID of the last checkpoint, absent at first).

local MAX = 9007199254740991
local sku, initial, limit = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local buckets, bucket = tonumber(ARGV[4]), tonumber(ARGV[5])
local function count(x) return x and x == math.floor(x) and x >= 0 and x <= MAX end
if not count(initial) then return {'invalid', 'initial'} end
if not count(limit) then return {'invalid', 'limit'} end
if not count(buckets) or buckets < 1 or buckets > 64 then return {'invalid', 'buckets'} end
if not count(bucket) or bucket >= buckets then return {'invalid', 'bucket'} end

local h = redis.call('HMGET', KEYS[1], 'initial', 'limit', 'buckets')
if h[1] then
  if tonumber(h[3] or '1') ~= buckets then return {'conflict', 'buckets'} end
  if tonumber(h[1]) ~= initial then return {'conflict', 'initial'} end
  if tonumber(h[2]) ~= limit then return {'conflict', 'limit'} end
  return {'exists', ''}
end

local i = string.format('%d', initial)
redis.call('HSET', KEYS[1], 'initial', i, 'restocked', '0', 'written_off', '0', 'supply', i,
  'available', i, 'reserved', '0', 'sold', '0', 'refunded', '0',
  'limit', string.format('%d', limit), 'closed', '0',
  'buckets', string.format('%d', buckets), 'bucket', string.format('%d', bucket), 'moved', '0')
redis.call('XADD', KEYS[2], '*', 'op', '', 'kind', 'create', 'sku', sku,
  'd_avail', i, 'd_supply', i, 'avail', i, 'res', '0', 'sold', '0', 'ref', '0', 'supply', i)
return {'created', ''}
