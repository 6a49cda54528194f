-- Leases a free Snowflake node ID (0..1023) of a service. Runs after lease_common.lua.
-- KEYS[1]  the node table (see lease_common.lua)
-- ARGV[1..4] owner, TTL (> 0), the caller's clock in Snowflake ms, retention
-- ARGV[5]  the node to look at first, 0..1023 (random): nodes are scanned from
--          it, wrapping around
-- Reply:   {node, start}: the caller may issue IDs with timestamps > start only;
--          {-1, 0} when every node is leased.
-- A free node whose high-water is below the caller's clock is preferred (the
-- first such node from ARGV[5] on); else the free node with the lowest
-- high-water. A retry by the same owner returns the node it already took.
-- Starting at a random node keeps processes that start while the table has
-- lost entries of running holders from all taking the lowest free node.
if ttl == 0 then
  return redis.error_reply('ERR idgen: bad TTL')
end
local first = tonumber(ARGV[5])
if not first or first % 1 ~= 0 or first < 0 or first > 1023 then
  return redis.error_reply('ERR idgen: bad first node')
end
local srv = server_ms()
local slots = {}
local raw = redis.call('HGETALL', KEYS[1])
for i = 1, #raw, 2 do
  slots[tonumber(raw[i])] = raw[i + 1]
end

local best, bestHw = -1, 0
for i = 0, 1023 do
  local n = (first + i) % 1024
  local v = slots[n]
  local o, exp, hw, start = '', 0, 0, 0
  if v then
    o, exp, hw, start = parse(v) -- o is nil when unreadable: never hand it out
  end
  if o == owner then
    return {n, start}
  end
  if o and exp <= srv then
    if hw < now then
      if best < 0 or bestHw >= now then
        best, bestHw = n, hw
      end
    elseif best < 0 or hw < bestHw then
      best, bestHw = n, hw
    end
  end
end
if best < 0 then
  return {-1, 0}
end
local hw = now + ttl
if bestHw > hw then hw = bestHw end
redis.call('HSET', KEYS[1], string.format('%d', best), encode(owner, srv + ttl, hw, bestHw))
redis.call('PEXPIRE', KEYS[1], string.format('%d', keep))
return {best, bestHw}
