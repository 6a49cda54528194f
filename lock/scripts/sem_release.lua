-- Release a semaphore permit.
-- KEYS[1]  semaphore key
-- KEYS[2]  release tombstone of this owner (short-lived)
-- ARGV[1]  owner ID, 32 hex characters
-- ARGV[2]  tombstone TTL in milliseconds
-- ARGV[3]  wake-up channel (same hash tag as the keys)
-- ARGV[4]  '1': publish with SPUBLISH (Cluster), else PUBLISH
-- Reply    1 released (now, or by an earlier call that left the tombstone),
--          0 already expired
local owner = ARGV[1]
local tombttl = redkit_ttl(ARGV[2])
if not redkit_valid_owner(owner) or not tombttl then
  return redis.error_reply('ERR lock: bad semaphore release arguments')
end
local publish = redkit_publisher(ARGV[4])
local now, t = redkit_now()
local score = redis.call('ZSCORE', KEYS[1], owner)
local tomb = redis.call('EXISTS', KEYS[2])
if score then redis.call('ZREM', KEYS[1], owner) end
if score and tonumber(score) > now then
  redis.call('SET', KEYS[2], '1', 'PX', redkit_int(tombttl))
  redis.call(publish, ARGV[3], 'r')
  return 1
end
if tomb == 1 then return 1 end
-- Expired: its permit is free, so a waiter may take it now.
redis.call(publish, ARGV[3], 'e')
return 0
