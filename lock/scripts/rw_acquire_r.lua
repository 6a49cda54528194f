-- Acquire an RWMutex for reading.
-- KEYS[1]  readers key: sorted set of owner ID -> expiry (server time, ms)
-- KEYS[2]  writer key
-- KEYS[3]  waiting-writer mark
-- ARGV[1]  owner ID, 32 hex characters
-- ARGV[2]  TTL in milliseconds, 10..86400000
-- Reply    {1, 0}     acquired (also for a re-sent acquire of this owner ID)
--          {0, wait}  a writer holds it or waits for it; wait = ms until
--                     the writer (or its mark) expires
local owner, ttl = ARGV[1], redkit_ttl(ARGV[2])
if not redkit_valid_owner(owner) or not ttl then
  return redis.error_reply('ERR lock: bad acquire arguments')
end
local now, t = redkit_now()
local held = redis.call('ZSCORE', KEYS[1], owner)
if not held or tonumber(held) <= now then
  local wait = redis.call('PTTL', KEYS[2])
  if wait < 0 then wait = redis.call('PTTL', KEYS[3]) end
  if wait >= 0 then return {0, wait} end
end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', redkit_int(now))
redis.call('ZADD', KEYS[1], redkit_int(now + ttl), owner)
if redis.call('PTTL', KEYS[1]) < ttl then redis.call('PEXPIRE', KEYS[1], redkit_int(ttl)) end
return {1, 0}
