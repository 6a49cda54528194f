-- Functions shared by the lock scripts; this chunk is prepended to each.

-- redkit_now: server time in milliseconds, and the raw TIME reply.
local function redkit_now()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000), t
end

-- redkit_valid_owner: an owner ID is 32 hex characters.
local function redkit_valid_owner(owner)
  return type(owner) == 'string' and string.len(owner) == 32
end

-- redkit_ttl: a lock TTL in whole milliseconds, 10..86400000, or nil.
local function redkit_ttl(v)
  local ttl = tonumber(v)
  if ttl == nil or ttl < 10 or ttl > 86400000 or ttl ~= math.floor(ttl) then return nil end
  return ttl
end

-- redkit_int: an integer as a decimal string. Every number a script passes
-- to redis.call or puts in a value goes through it: Lua's own formatting
-- keeps 14 digits ('%.14g'), and how Redis formats a Lua number differs
-- between versions (an exponent, or a shortest form).
local function redkit_int(n)
  return string.format('%d', n)
end

-- redkit_publisher: the publish command for the wake-up channel ('1':
-- sharded pub/sub, on Cluster).
local function redkit_publisher(flag)
  if flag == '1' then return 'SPUBLISH' end
  return 'PUBLISH'
end

-- redkit_lock_get: the value of a lock key ("<owner>:<token>", or false)
-- and whether it belongs to owner.
local function redkit_lock_get(key, owner)
  local cur = redis.call('GET', key)
  return cur, cur and string.sub(cur, 1, 32) == owner
end

-- redkit_token: the fencing token in a lock value.
local function redkit_token(cur)
  return tonumber(string.sub(cur, 34))
end

-- redkit_unlock: delete a lock, leave the release tombstone and publish the
-- wake-up.
local function redkit_unlock(key, tomb, tombttl, publish, channel, msg)
  redis.call('DEL', key)
  redis.call('SET', tomb, '1', 'PX', redkit_int(tombttl))
  if msg then redis.call(publish, channel, msg) end
end
