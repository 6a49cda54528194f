-- Acquire a semaphore permit.
-- KEYS[1]  semaphore key: sorted set of owner ID -> permit expiry (server time, ms)
-- ARGV[1]  owner ID, 32 hex characters
-- ARGV[2]  TTL in milliseconds, 10..86400000
-- ARGV[3]  number of permits, 1..1000000
-- Reply    {1, 0}     acquired; also when this owner ID already holds a permit
--                     (a re-sent acquire): its expiry is set again
--          {0, wait}  every permit is held; wait = ms until the first expires
local owner, ttl, permits = ARGV[1], redkit_ttl(ARGV[2]), tonumber(ARGV[3])
if not redkit_valid_owner(owner) or not ttl
  or permits == nil or permits < 1 or permits > 1000000 or permits ~= math.floor(permits) then
  return redis.error_reply('ERR lock: bad semaphore acquire arguments')
end
local now, t = redkit_now()
local held = redis.call('ZSCORE', KEYS[1], owner)
local live = redis.call('ZCOUNT', KEYS[1], '(' .. redkit_int(now), '+inf')
if not held or tonumber(held) <= now then
  if live >= permits then
    local first = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. redkit_int(now), '+inf', 'WITHSCORES', 'LIMIT', '0', '1')
    return {0, tonumber(first[2]) - now}
  end
end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', redkit_int(now))
redis.call('ZADD', KEYS[1], redkit_int(now + ttl), owner)
if redis.call('PTTL', KEYS[1]) < ttl then redis.call('PEXPIRE', KEYS[1], redkit_int(ttl)) end
return {1, 0}
