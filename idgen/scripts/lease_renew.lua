-- Renews a node lease, or releases it. Runs after lease_common.lua.
-- KEYS[1]  the node table (see lease_common.lua)
-- ARGV[1..4] owner; TTL, or 0 to release; time in Snowflake ms: renewal, the
--          caller's clock; release, the highest timestamp it issued (0 if
--          none); retention
-- ARGV[5]  node ID, 0..1023
-- Reply:   1 when the owner held the node (renewed or released), 0 when it did not.
-- A lease that expired but was taken by nobody is renewed: no one else can
-- have issued IDs on the node since. Release sets the high-water mark to the
-- caller's highest issued timestamp (never below the mark it started above).
local node = tonumber(ARGV[5])
if not node or node % 1 ~= 0 or node < 0 or node > 1023 then
  return redis.error_reply('ERR idgen: bad node')
end
local v = redis.call('HGET', KEYS[1], node)
if not v then
  return 0
end
local o, exp, hw, start = parse(v)
if o ~= owner then
  return 0
end
if ttl == 0 then
  if start > now then now = start end
  redis.call('HSET', KEYS[1], node, encode('', 0, now, now))
else
  if now + ttl > hw then hw = now + ttl end
  redis.call('HSET', KEYS[1], node, encode(owner, server_ms() + ttl, hw, start))
end
redis.call('PEXPIRE', KEYS[1], keep)
return 1
