-- Release a mutex.
-- KEYS[1]  lock key
-- KEYS[2]  release tombstone of this owner (short-lived)
-- ARGV[1]  owner ID, 32 hex characters
-- ARGV[2]  tombstone TTL in milliseconds
-- ARGV[3]  wake-up channel (same hash tag as the keys)
-- ARGV[4]  '1': publish with SPUBLISH (Cluster), else PUBLISH
-- Reply    1 released (now, or by an earlier call that left the tombstone),
--          0 already expired, 2 held by another owner
local owner = ARGV[1]
local tombttl = redkit_ttl(ARGV[2])
if not redkit_valid_owner(owner) or not tombttl then
  return redis.error_reply('ERR lock: bad release arguments')
end
local publish = redkit_publisher(ARGV[4])
local cur, mine = redkit_lock_get(KEYS[1], owner)
if mine then
  redkit_unlock(KEYS[1], KEYS[2], tombttl, publish, ARGV[3], 'r')
  return 1
end
if redis.call('EXISTS', KEYS[2]) == 1 then return 1 end
if cur then return 2 end
-- Expired: nobody holds it, so a waiter may take it now.
redis.call(publish, ARGV[3], 'e')
return 0
