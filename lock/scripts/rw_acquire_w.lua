-- Acquire an RWMutex for writing (writer-preferring).
-- KEYS[1]  writer key (string "<owner>:<token>", always with a TTL)
-- KEYS[2]  readers key: sorted set of owner ID -> expiry (server time, ms)
-- KEYS[3]  waiting-writer mark: while it exists new readers are refused
-- KEYS[4]  fence counter of the name, shared with the Mutex of that name
--          (permanent integer)
-- ARGV[1]  owner ID, 32 hex characters
-- ARGV[2]  TTL in milliseconds, 10..86400000
-- ARGV[3]  'true' when the caller will wait: it then sets the mark
-- Reply    {1, token}  acquired (also for a re-sent acquire of this owner ID)
--          {0, wait}   held by a writer or by readers; wait = ms until the
--                      first of them expires
local owner, ttl = ARGV[1], redkit_ttl(ARGV[2])
if not redkit_valid_owner(owner) or not ttl then
  return redis.error_reply('ERR lock: bad acquire arguments')
end
local now, t = redkit_now()
local cur, mine = redkit_lock_get(KEYS[1], owner)
if mine then
  redis.call('PEXPIRE', KEYS[1], redkit_int(ttl))
  return {1, redkit_token(cur)}
end
local wait = -1
if cur then
  wait = redis.call('PTTL', KEYS[1])
else
  local first = redis.call('ZRANGEBYSCORE', KEYS[2], '(' .. redkit_int(now), '+inf', 'WITHSCORES', 'LIMIT', '0', '1')
  if #first > 0 then wait = tonumber(first[2]) - now end
end
local mark = redis.call('GET', KEYS[3])
if wait >= 0 then
  if ARGV[3] == 'true' and (not mark or mark == owner) then
    -- The mark outlives the writer's next attempt, which comes when the
    -- holders it waits for end (wait), whatever their TTLs; a writer that
    -- crashed stops new readers for at most 2 of its TTLs after that.
    redis.call('SET', KEYS[3], owner, 'PX', redkit_int(wait + 2 * ttl))
  end
  return {0, wait}
end
if mark == owner then redis.call('DEL', KEYS[3]) end
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', redkit_int(now))
local token = redis.call('INCR', KEYS[4])
redis.call('SET', KEYS[1], owner .. ':' .. redkit_int(token), 'PX', redkit_int(ttl))
return {1, token}
