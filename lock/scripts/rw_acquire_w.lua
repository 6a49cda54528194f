-- Acquire an RWMutex for writing (writer-preferring).
-- KEYS[1]  writer key ("<owner>:<token>" as a mutex, always with a TTL)
-- KEYS[2]  readers key: sorted set of owner ID -> expiry (server time, ms)
-- KEYS[3]  waiting writers: sorted set of owner ID -> expiry (server time,
--          ms); while a member is live new readers are refused
-- KEYS[4]  fence counter of the lock's hash slot, shared with the Mutex of
--          that name (permanent integer)
-- ARGV[1]  owner ID
-- ARGV[2]  TTL in milliseconds (decimal string)
-- ARGV[3]  mode ('0', '1', '2' as in acquire.lua): unless '0', a refused
--          caller sets the waiting-writer mark and marks a writer's lock
-- Reply    {1, token}  acquired (also for a re-sent acquire of this owner ID)
--          {0, wait}   held by a writer or by readers; wait = ms until the
--                      first of them expires
local owner, ttl = ARGV[1], ARGV[2]
local cur = redis.call('GET', KEYS[1])
local readers = not cur and redis.call('EXISTS', KEYS[2]) == 1
local mark = redis.call('EXISTS', KEYS[3]) == 1
if not cur and not readers and not mark then
  -- Free and nobody waits: the fast path, before common.lua's functions.
  -- Lua numbers are doubles: past 2^53-1 two tokens could be equal.
  if (tonumber(redis.call('GET', KEYS[4])) or 0) >= 9007199254740991 then
    return redis.error_reply('ERR redkit lock: the fence counter is at 2^53-1, the largest exact token; no token is left')
  end
  local token = redis.call('INCR', KEYS[4])
  local sep = ':'
  if ARGV[3] == '2' then sep = '!' end
  redis.call('SET', KEYS[1], owner .. sep .. string.format('%d', token), 'PX', ttl)
  return {1, token}
end
-- @common
local mine = cur and string.sub(cur, 1, 32) == owner
if mine then
  redis.call('PEXPIRE', KEYS[1], ttl)
  return {1, redkit_token(cur)}
end
local now
local wait = -1
if cur then
  wait = redis.call('PTTL', KEYS[1])
elseif readers then
  now = redkit_now()
  local first = redis.call('ZRANGEBYSCORE', KEYS[2], '(' .. redkit_int(now), '+inf', 'WITHSCORES', 'LIMIT', '0', '1')
  if #first > 0 then wait = tonumber(first[2]) - now end
end
if wait >= 0 then
  if ARGV[3] ~= '0' then
    if cur then redkit_mark(KEYS[1], cur) end
    -- Every waiting writer has its own entry, so one that takes the lock
    -- or gives up leaves the others' in place. An entry outlives the
    -- writer's next attempt, which comes when the holders it waits for end
    -- (wait), whatever their TTLs; a writer that crashed stops new readers
    -- for at most 2 of its TTLs after that.
    if not now then now = redkit_now() end
    redkit_zhold(KEYS[3], owner, now, wait + 2 * tonumber(ttl))
  end
  return {0, wait}
end
-- Lua numbers are doubles: past 2^53-1 two tokens could be equal.
if (tonumber(redis.call('GET', KEYS[4])) or 0) >= 9007199254740991 then
  return redis.error_reply('ERR redkit lock: the fence counter is at 2^53-1, the largest exact token; no token is left')
end
local mode = ARGV[3]
if mark and redis.call('ZREM', KEYS[3], owner) == 1 then
  -- Readers refused by this writer's mark may be waiting: its release
  -- must wake them.
  mode = '2'
end
if now then redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', redkit_int(now)) end
local token = redis.call('INCR', KEYS[4])
redis.call('SET', KEYS[1], redkit_lock_value(owner, token, mode), 'PX', ttl)
return {1, token}
