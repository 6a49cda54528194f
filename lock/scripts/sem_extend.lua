-- Extend one or more semaphore permits; never re-creates a lapsed permit.
-- KEYS[i]      semaphore key of permit i (all in one slot)
-- ARGV[2i-1]   owner ID of permit i
-- ARGV[2i]     new TTL of permit i in milliseconds, 10..86400000
-- Reply        array, element i: 1 extended, 0 expired
local n = #KEYS
if #ARGV ~= 2 * n then return redis.error_reply('ERR lock: bad semaphore extend arguments') end
for i = 1, n do
  if not redkit_valid_owner(ARGV[2 * i - 1]) or not redkit_ttl(ARGV[2 * i]) then
    return redis.error_reply('ERR lock: bad semaphore extend arguments')
  end
end
local now, t = redkit_now()
local res = {}
for i = 1, n do
  local owner, ttl = ARGV[2 * i - 1], redkit_ttl(ARGV[2 * i])
  local score = redis.call('ZSCORE', KEYS[i], owner)
  if not score then
    res[i] = 0
  elseif tonumber(score) <= now then
    redis.call('ZREM', KEYS[i], owner)
    res[i] = 0
  else
    redis.call('ZADD', KEYS[i], redkit_int(now + ttl), owner)
    if redis.call('PTTL', KEYS[i]) < ttl then redis.call('PEXPIRE', KEYS[i], redkit_int(ttl)) end
    res[i] = 1
  end
end
return res
