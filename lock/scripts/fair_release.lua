-- Release a fair-mode mutex, or withdraw a waiter from its queue, and wake
-- the head of the queue if the lock is free.
-- KEYS[1]  lock key
-- KEYS[2]  release tombstone of this owner (short-lived)
-- KEYS[3]  queue (see fair_acquire.lua)
-- KEYS[4]  heartbeats
-- ARGV[1]  owner ID, 32 hex characters
-- ARGV[2]  tombstone TTL in milliseconds
-- ARGV[3]  wake-up channel (same hash tag as the keys); the message is the
--          head's owner ID, so only that waiter is woken
-- ARGV[4]  '1': publish with SPUBLISH (Cluster), else PUBLISH
-- Reply    1 released (now, or by an earlier call that left the tombstone),
--          0 not held (expired, or only waiting), 2 held by another owner
local owner = ARGV[1]
local tombttl = redkit_ttl(ARGV[2])
if not redkit_valid_owner(owner) or not tombttl then
  return redis.error_reply('ERR lock: bad release arguments')
end
local publish = redkit_publisher(ARGV[4])
local now, t = redkit_now()
local cur, mine = redkit_lock_get(KEYS[1], owner)
local tomb = redis.call('EXISTS', KEYS[2])
local status = 0
if mine then
  status = 1
elseif tomb == 1 then
  status = 1
elseif cur then
  status = 2
end
redis.call('ZREM', KEYS[3], owner)
redis.call('ZREM', KEYS[4], owner)
local dead = redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', redkit_int(now), 'LIMIT', '0', '100')
for _, d in ipairs(dead) do
  redis.call('ZREM', KEYS[3], d)
  redis.call('ZREM', KEYS[4], d)
end
if mine then
  redkit_unlock(KEYS[1], KEYS[2], tombttl, publish, ARGV[3], nil) -- the head is woken below
  cur = false
end
if not cur then
  local head = redis.call('ZRANGE', KEYS[3], '0', '0')[1]
  if head then redis.call(publish, ARGV[3], head) end
end
return status
