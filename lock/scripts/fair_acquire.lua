-- Acquire a mutex in fair (FIFO) mode.
-- KEYS[1]  lock key (string "<owner>:<token>", always with a TTL)
-- KEYS[2]  fence counter of the name (permanent integer)
-- KEYS[3]  queue: sorted set of waiting owner IDs by arrival (server time, µs)
-- KEYS[4]  heartbeats: sorted set of waiting owner IDs by eviction deadline (ms)
-- ARGV[1]  owner ID, 32 hex characters
-- ARGV[2]  TTL in milliseconds, 10..86400000
-- ARGV[3]  heartbeat timeout in milliseconds: a waiter not heard from for
--          this long is evicted from the queue
-- ARGV[4]  'true' when the caller will wait: it joins the queue (or, if
--          already queued, renews its heartbeat)
-- Reply    {1, token}  acquired: the lock was free and the caller is the
--                      head of the queue (or the queue is empty); also for a
--                      re-sent acquire of this owner ID
--          {0, wait}   not its turn; wait = the holder's remaining ms, or
--                      -1 when the lock is free but another waiter is first
local owner, ttl, hb = ARGV[1], redkit_ttl(ARGV[2]), redkit_ttl(ARGV[3])
if not redkit_valid_owner(owner) or not ttl or not hb then
  return redis.error_reply('ERR lock: bad fair acquire arguments')
end
local now, t = redkit_now()
local cur, mine = redkit_lock_get(KEYS[1], owner)
if mine then
  redis.call('PEXPIRE', KEYS[1], redkit_int(ttl))
  return {1, redkit_token(cur)}
end
local dead = redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', redkit_int(now), 'LIMIT', '0', '100')
for _, d in ipairs(dead) do
  if d ~= owner then
    redis.call('ZREM', KEYS[3], d)
    redis.call('ZREM', KEYS[4], d)
  end
end
local head = redis.call('ZRANGE', KEYS[3], '0', '0')[1]
if not cur and (not head or head == owner) then
  redis.call('ZREM', KEYS[3], owner)
  redis.call('ZREM', KEYS[4], owner)
  local token = redis.call('INCR', KEYS[2])
  redis.call('SET', KEYS[1], owner .. ':' .. redkit_int(token), 'PX', redkit_int(ttl))
  return {1, token}
end
if ARGV[4] == 'true' then
  -- Arrival in µs as digits: as a Lua number it would exceed 2^53.
  redis.call('ZADD', KEYS[3], 'NX', t[1] .. string.format('%06d', tonumber(t[2])), owner)
  redis.call('ZADD', KEYS[4], redkit_int(now + hb), owner)
end
if cur then return {0, redis.call('PTTL', KEYS[1])} end
return {0, -1}
