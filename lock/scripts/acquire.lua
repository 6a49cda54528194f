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
-- The hot path of every lock: written out without common.lua's functions,
-- whose closures Redis would build on every call.
local cur = redis.call('GET', KEYS[1])
if cur then
  if string.sub(cur, 1, 32) == ARGV[1] then
    redis.call('PEXPIRE', KEYS[1], ARGV[2])
    return {1, tonumber(string.sub(cur, 34))}
  end
  if ARGV[3] ~= '0' and string.byte(cur, 33) == 58 then
    redis.call('SETRANGE', KEYS[1], 32, '!') -- marked: see common.lua
  end
  return {0, redis.call('PTTL', KEYS[1])}
end
-- Lua numbers are doubles: past 2^53-1 two tokens could be equal.
if (tonumber(redis.call('GET', KEYS[2])) or 0) >= 9007199254740991 then
  return redis.error_reply('ERR redkit lock: the fence counter is at 2^53-1, the largest exact token; no token is left')
end
local token = redis.call('INCR', KEYS[2])
local sep = ':'
if ARGV[3] == '2' then sep = '!' end
redis.call('SET', KEYS[1], ARGV[1] .. sep .. string.format('%d', token), 'PX', ARGV[2])
return {1, token}
