-- Acquire a mutex in fair (FIFO) mode.
-- KEYS[1]  lock key ("<owner>:<token>", always with a TTL)
-- KEYS[2]  fence counter of the lock's hash slot (permanent integer)
-- KEYS[3]  queue: sorted set of waiting owner IDs by arrival (server time, µs)
-- KEYS[4]  heartbeats: sorted set of waiting owner IDs by eviction deadline (ms)
-- ARGV[1]  owner ID
-- ARGV[2]  TTL in milliseconds (decimal string)
-- ARGV[3]  heartbeat timeout in milliseconds (decimal string): a waiter not
--          heard from for this long is evicted from the queue
-- ARGV[4]  mode ('0', '1', '2' as in acquire.lua): unless '0', a refused
--          caller joins the queue (or, if already queued, renews its
--          heartbeat)
-- Reply    {1, token}  acquired: the lock was free and the caller is the
--                      head of the queue (or the queue is empty); also for a
--                      re-sent acquire of this owner ID
--          {0, wait}   not its turn; wait = the holder's remaining ms, or
--                      -1 when the lock is free but another waiter is first
--
-- Both sorted sets expire one heartbeat timeout after the last join or
-- heartbeat: every deadline in them is earlier, so when every waiter has
-- gone silent (crashed) the sets disappear by themselves, even if nobody
-- touches the name again.
local owner, ttl = ARGV[1], ARGV[2]
local cur = redis.call('GET', KEYS[1])
local queued = redis.call('EXISTS', KEYS[3]) == 1
-- Lua numbers are doubles: past 2^53-1 two tokens could be equal.
if not cur and (tonumber(redis.call('GET', KEYS[2])) or 0) >= 9007199254740991 then
  return redis.error_reply('ERR redkit lock: the fence counter is at 2^53-1, the largest exact token; no token is left')
end
if not cur and not queued then
  -- Free and nobody waits: the fast path, before common.lua's functions.
  local token = redis.call('INCR', KEYS[2])
  redis.call('SET', KEYS[1], owner .. ':' .. string.format('%d', token), 'PX', ttl)
  return {1, token}
end
-- @common
if cur and string.sub(cur, 1, 32) == owner then
  redis.call('PEXPIRE', KEYS[1], ttl)
  return {1, redkit_token(cur)}
end
local now, t
if queued then
  now, t = redkit_now()
  local dead = redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', redkit_int(now), 'LIMIT', '0', '100')
  for _, d in ipairs(dead) do
    if d ~= owner then
      redis.call('ZREM', KEYS[3], d)
      redis.call('ZREM', KEYS[4], d)
    end
  end
end
local head = queued and redis.call('ZRANGE', KEYS[3], '0', '0')[1]
if not cur and (not head or head == owner) then
  if head then
    redis.call('ZREM', KEYS[3], owner)
    redis.call('ZREM', KEYS[4], owner)
  end
  local token = redis.call('INCR', KEYS[2])
  redis.call('SET', KEYS[1], owner .. ':' .. redkit_int(token), 'PX', ttl)
  return {1, token}
end
if ARGV[4] ~= '0' then
  if not now then now, t = redkit_now() end
  -- Arrival in µs as digits: as a Lua number it would exceed 2^53.
  redis.call('ZADD', KEYS[3], 'NX', t[1] .. string.format('%06d', tonumber(t[2])), owner)
  redis.call('ZADD', KEYS[4], redkit_int(now + tonumber(ARGV[3])), owner)
  redis.call('PEXPIRE', KEYS[3], ARGV[3])
  redis.call('PEXPIRE', KEYS[4], ARGV[3])
end
if cur then return {0, redis.call('PTTL', KEYS[1])} end
return {0, -1}
