-- Release a semaphore permit (also an RWMutex read lease).
-- KEYS[1]  semaphore key (readers key)
-- KEYS[2]  waited-for mark (semaphore: see sem_acquire.lua; RWMutex: the
--          waiting-writer mark): a release publishes only while it exists
-- ARGV[1]  owner ID
-- ARGV[2]  wake-up channel (same hash tag as the keys)
-- ARGV[3]  'PUBLISH', or 'SPUBLISH' on Cluster
-- ARGV[4]  unused (permits carry no token)
-- Reply    1 released now, 0 not held (expired, or released before),
--          3 held no more: the permit is there, expired, so no earlier send
--          of this release can have released it
local now = redkit_now()
local score = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not score then return 0 end
local waited = redis.call('EXISTS', KEYS[2]) == 1
redis.call('ZREM', KEYS[1], ARGV[1])
if tonumber(score) <= now then return 3 end
if waited then redis.call(ARGV[3], ARGV[2], 'r') end
return 1
