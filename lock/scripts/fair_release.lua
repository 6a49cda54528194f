-- Release a fair-mode mutex, or withdraw a waiter from its queue, and wake
-- the head of the queue if the lock is free.
-- KEYS[1]  lock key
-- KEYS[2]  fence counter of the lock's hash slot
-- KEYS[3]  queue (see fair_acquire.lua)
-- KEYS[4]  heartbeats
-- ARGV[1]  owner ID
-- ARGV[2]  wake-up channel (same hash tag as the keys); the message is the
--          head's owner ID, so only that waiter is woken
-- ARGV[3]  'PUBLISH', or 'SPUBLISH' on Cluster
-- ARGV[4]  the lease's token (decimal), '0' for a withdrawal
-- Reply    as release.lua: 1 released now, 0 not held (expired, or only
--          waiting), 2 held by another owner, 3 and 5 the same with the
--          acquisition lost by Redis (see redkit_lost in common.lua)
local owner = ARGV[1]
local cur = redis.call('GET', KEYS[1])
local mine = cur and string.sub(cur, 1, 32) == owner
local queued = redis.call('EXISTS', KEYS[3]) == 1
if mine and not queued then
  -- Nobody waits: the fast path, before common.lua's functions.
  redis.call('DEL', KEYS[1])
  return 1
end
-- @common
local status = 0
if mine then
  status = 1
else
  if cur then status = 2 end
  if redkit_lost(KEYS[2], ARGV[4], cur) then status = status + 3 end
end
if queued then
  local now = redkit_now()
  redis.call('ZREM', KEYS[3], owner)
  redis.call('ZREM', KEYS[4], owner)
  local dead = redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', redkit_int(now), 'LIMIT', '0', '100')
  for _, d in ipairs(dead) do
    redis.call('ZREM', KEYS[3], d)
    redis.call('ZREM', KEYS[4], d)
  end
end
if mine then
  redis.call('DEL', KEYS[1])
  cur = false
end
if queued and not cur then
  local head = redis.call('ZRANGE', KEYS[3], '0', '0')[1]
  if head then redis.call(ARGV[3], ARGV[2], head) end
end
return status
