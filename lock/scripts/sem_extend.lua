-- Extend one or more semaphore permits; never re-creates a lapsed permit.
-- KEYS[i]      semaphore key of permit i (all in one slot)
-- ARGV[2i-1]   owner ID of permit i
-- ARGV[2i]     new TTL of permit i in milliseconds (decimal string)
-- Reply        array, element i: 1 extended, 0 expired
local now = redkit_now()
local res = {}
for i = 1, #KEYS do
  local owner, ttl = ARGV[2 * i - 1], tonumber(ARGV[2 * i])
  local score = redis.call('ZSCORE', KEYS[i], owner)
  if not score then
    res[i] = 0
  elseif tonumber(score) <= now then
    redis.call('ZREM', KEYS[i], owner)
    res[i] = 0
  else
    redis.call('ZADD', KEYS[i], redkit_int(now + ttl), owner)
    if redis.call('PTTL', KEYS[i]) < ttl then redis.call('PEXPIRE', KEYS[i], ARGV[2 * i]) end
    res[i] = 1
  end
end
return res
