-- Release an RWMutex held for writing, or withdraw a waiting writer.
-- KEYS[1]  writer key
-- KEYS[2]  fence counter of the lock's hash slot
-- KEYS[3]  waiting writers (see rw_acquire_w.lua)
-- ARGV[1]  owner ID
-- ARGV[2]  wake-up channel (same hash tag as the keys)
-- ARGV[3]  'PUBLISH', or 'SPUBLISH' on Cluster
-- ARGV[4]  the lease's token (decimal), '0' for a withdrawal
-- Reply    as release.lua: 1 released now, 0 not held (expired, or only
--          waiting), 2 held by another writer, 3 and 5 the same with the
--          acquisition lost by Redis (see redkit_lost in common.lua)
local owner = ARGV[1]
local cur = redis.call('GET', KEYS[1])
local mine = cur and string.sub(cur, 1, 32) == owner
local marked = redis.call('ZSCORE', KEYS[3], owner) ~= false
if mine and not marked then
  -- The fast path, before common.lua's functions.
  redis.call('DEL', KEYS[1])
  if string.byte(cur, 33) == 33 then redis.call(ARGV[3], ARGV[2], 'r') end -- marked
  return 1
end
-- @common
local status = 0
if not mine then
  if cur then status = 2 end
  if redkit_lost(KEYS[2], ARGV[4], cur) then status = status + 3 end
end
if marked then redis.call('ZREM', KEYS[3], owner) end
if mine then
  redis.call('DEL', KEYS[1])
  if redkit_marked(cur) then redis.call(ARGV[3], ARGV[2], 'r') end
  return 1
end
-- A waiting writer withdrew: readers it held back may enter (unless
-- another writer waits; they are refused again then).
if marked then redis.call(ARGV[3], ARGV[2], 'w') end
return status
