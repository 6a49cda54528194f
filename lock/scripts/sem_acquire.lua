-- Acquire a semaphore permit.
-- KEYS[1]  semaphore key: sorted set of owner ID -> permit expiry (server time, ms)
-- KEYS[2]  waited-for mark: set by a refused waiter, it makes releases
--          publish; it expires with the permits held when it was set
-- ARGV[1]  owner ID
-- ARGV[2]  TTL in milliseconds (decimal string)
-- ARGV[3]  number of permits (Go checked 1..1000000)
-- ARGV[4]  mode ('0', '1', '2' as in acquire.lua): unless '0', a refusal
--          sets the mark
-- Reply    {1, 0}     acquired; also when this owner ID already holds a permit
--                     (a re-sent acquire): its expiry is set again
--          {0, wait}  every permit is held; wait = ms until the first expires
local owner, ttl = ARGV[1], ARGV[2]
if redis.call('EXISTS', KEYS[1]) == 0 then
  -- No permit held: the fast path, before common.lua's functions.
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  redis.call('ZADD', KEYS[1], string.format('%d', now + tonumber(ttl)), owner)
  redis.call('PEXPIRE', KEYS[1], ttl)
  return {1, 0}
end
-- @common
local now = redkit_now()
local held = redis.call('ZSCORE', KEYS[1], owner)
if not held or tonumber(held) <= now then
  local live = redis.call('ZCOUNT', KEYS[1], '(' .. redkit_int(now), '+inf')
  if live >= tonumber(ARGV[3]) then
    local first = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. redkit_int(now), '+inf', 'WITHSCORES', 'LIMIT', '0', '1')
    if ARGV[4] ~= '0' then
      redis.call('SET', KEYS[2], '1', 'PX', redkit_int(math.max(redis.call('PTTL', KEYS[1]), 1)))
    end
    return {0, tonumber(first[2]) - now}
  end
end
redkit_zhold(KEYS[1], owner, now, tonumber(ttl))
return {1, 0}
