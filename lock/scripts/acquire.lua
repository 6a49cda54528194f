-- Acquire a mutex.
-- KEYS[1]  lock key (string "<owner>:<token>", always with a TTL)
-- KEYS[2]  fence counter of the lock name (permanent integer)
-- ARGV[1]  owner ID, 32 hex characters
-- ARGV[2]  TTL in milliseconds, 10..86400000
-- Reply    {1, token}  acquired; also when the key already holds this owner ID
--                      (a re-sent acquire): same token, TTL set again
--          {0, pttl}   held by another owner; pttl = its remaining milliseconds
local owner, ttl = ARGV[1], redkit_ttl(ARGV[2])
if not redkit_valid_owner(owner) or not ttl then
  return redis.error_reply('ERR lock: bad acquire arguments')
end
local cur, mine = redkit_lock_get(KEYS[1], owner)
if mine then
  redis.call('PEXPIRE', KEYS[1], redkit_int(ttl))
  return {1, redkit_token(cur)}
end
if cur then return {0, redis.call('PTTL', KEYS[1])} end
local token = redis.call('INCR', KEYS[2])
redis.call('SET', KEYS[1], owner .. ':' .. redkit_int(token), 'PX', redkit_int(ttl))
return {1, token}
