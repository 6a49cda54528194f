-- redkit_fence(key, token): the fencing check for a resource protected by a
-- lock.Lease. Prepend this chunk (lock.FenceLua) to a script and call it
-- before the script's first write:
--
--   if not redkit_fence(KEYS[2], ARGV[5]) then return redis.error_reply('STALE') end
--
-- key    the fence key in the protected resource's slot
--        (<prefix>:fence:v1:{<protected tag>}:<lock name>, see lock.FenceKey)
-- token  the lease's fencing token, a decimal string or a Lua number,
--        1..2^53-1
--
-- Returns true and records the token when it is >= the highest token seen at
-- key (an equal token is the same lease writing again), false otherwise. A
-- malformed token is refused (false), never recorded. The key is permanent.
local function redkit_fence(key, token)
  local t
  if type(token) == 'string' then
    if not string.find(token, '^[0-9]+$') or string.len(token) > 16 then return false end
    t = tonumber(token)
  elseif type(token) == 'number' then
    t = token
  else
    return false
  end
  if t == nil or t < 1 or t > 9007199254740991 or t ~= math.floor(t) then return false end
  local seen = tonumber(redis.call('GET', key) or '0') or 0
  if t < seen then return false end
  if t > seen then redis.call('SET', key, string.format('%.0f', t)) end
  return true
end
