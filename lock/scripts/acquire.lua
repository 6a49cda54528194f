-- Acquire a mutex.
-- KEYS[1]  lock key ("<owner>:<token>", see common.lua; always with a TTL)
-- KEYS[2]  fence counter of the lock's hash slot, shared by every name in
--          that slot (permanent integer)
-- ARGV[1]  owner ID
-- ARGV[2]  TTL in milliseconds (decimal string)
-- ARGV[3]  mode: '0' the caller will not wait; '1' it will wait if refused,
--          so a refusal marks the lock; '2' it has waited, so a refusal
--          marks the lock and a lock it takes starts marked (others may
--          still wait behind it)
-- Reply    {1, token}  acquired; also when the key already holds this owner ID
--                      (a re-sent acquire): same token, TTL set again
--          {0, pttl}   held by another owner; pttl = its remaining milliseconds
local cur = redis.call('GET', KEYS[1])
if cur then
  if string.sub(cur, 1, 32) == ARGV[1] then
    redis.call('PEXPIRE', KEYS[1], ARGV[2])
    return {1, redkit_token(cur)}
  end
  if ARGV[3] ~= '0' then redkit_mark(KEYS[1], cur) end
  return {0, redis.call('PTTL', KEYS[1])}
end
local token = redis.call('INCR', KEYS[2])
redis.call('SET', KEYS[1], redkit_lock_value(ARGV[1], token, ARGV[3]), 'PX', ARGV[2])
return {1, token}
