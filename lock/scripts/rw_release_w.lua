-- Release an RWMutex held for writing, or withdraw a waiting writer.
-- KEYS[1]  writer key
-- KEYS[2]  release tombstone of this owner (short-lived)
-- KEYS[3]  waiting-writer mark
-- ARGV[1]  owner ID, 32 hex characters
-- ARGV[2]  tombstone TTL in milliseconds
-- ARGV[3]  wake-up channel (same hash tag as the keys)
-- ARGV[4]  '1': publish with SPUBLISH (Cluster), else PUBLISH
-- Reply    1 released (now, or by an earlier call that left the tombstone),
--          0 not held (expired, or only waiting), 2 held by another writer
local owner = ARGV[1]
local tombttl = redkit_ttl(ARGV[2])
if not redkit_valid_owner(owner) or not tombttl then
  return redis.error_reply('ERR lock: bad release arguments')
end
local publish = redkit_publisher(ARGV[4])
local cur, mine = redkit_lock_get(KEYS[1], owner)
local marked = redis.call('GET', KEYS[3]) == owner
if marked then redis.call('DEL', KEYS[3]) end
if mine then
  redkit_unlock(KEYS[1], KEYS[2], tombttl, publish, ARGV[3], 'r')
  return 1
end
if redis.call('EXISTS', KEYS[2]) == 1 then return 1 end
if marked then redis.call(publish, ARGV[3], 'w') end
if cur then return 2 end
return 0
