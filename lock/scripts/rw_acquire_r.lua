-- Acquire an RWMutex for reading.
-- KEYS[1]  readers key: sorted set of owner ID -> expiry (server time, ms)
-- KEYS[2]  writer key
-- KEYS[3]  waiting writers (see rw_acquire_w.lua)
-- ARGV[1]  owner ID
-- ARGV[2]  TTL in milliseconds (decimal string)
-- ARGV[3]  mode ('0', '1', '2' as in acquire.lua): unless '0', a reader
--          refused by a writer's lock marks it, so its release wakes readers
-- Reply    {1, 0}     acquired (also for a re-sent acquire of this owner ID)
--          {0, wait}  a writer holds it or waits for it; wait = ms until
--                     the writer (or the first waiting writer's entry)
--                     expires
local owner, ttl = ARGV[1], ARGV[2]
if redis.call('EXISTS', KEYS[1], KEYS[2], KEYS[3]) == 0 then
  -- No reader, no writer, none waiting: the fast path, before common.lua's
  -- functions.
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
  local w = redis.call('GET', KEYS[2])
  local wait
  if w then
    wait = redis.call('PTTL', KEYS[2])
  else
    wait = -1
    local first = redis.call('ZRANGEBYSCORE', KEYS[3], '(' .. redkit_int(now), '+inf', 'WITHSCORES', 'LIMIT', '0', '1')
    if #first > 0 then wait = tonumber(first[2]) - now end
  end
  if wait >= 0 then
    if w and ARGV[3] ~= '0' then redkit_mark(KEYS[2], w) end
    return {0, wait}
  end
end
redkit_zhold(KEYS[1], owner, now, tonumber(ttl))
return {1, 0}
