-- Renews a node lease, or releases it. Runs after lease_common.lua.
-- KEYS[1]  the node table (see lease_common.lua)
-- ARGV[1..4] owner; TTL, or 0 to release; time in Snowflake ms: renewal, the
--          caller's clock; release, the highest timestamp it issued (0 if
--          none); retention
-- ARGV[5]  node ID, 0..1023
-- ARGV[6]  renewal only: 1 when the caller's lease cannot have expired yet
--          (it may write a lost entry back), else 0
-- Reply:   1 when the owner held the node (renewed or released), 0 when it did not,
--          2 when the node's entry was missing (the table, or its latest
--          writes, were lost) and has been written back for this owner.
-- A lease that expired but was taken by nobody is renewed: no one else can
-- have issued IDs on the node since. Release sets the high-water mark to the
-- caller's highest issued timestamp (never below the mark it started above).
-- A missing entry was not taken by anyone since it was lost; while the
-- caller's lease had not expired when it was lost, nobody else held the node
-- either, so the caller keeps it and the table knows it again.
local node = tonumber(ARGV[5])
if not node or node % 1 ~= 0 or node < 0 or node > 1023 then
  return redis.error_reply('ERR idgen: bad node')
end
local rewrite = ARGV[6]
if rewrite ~= '0' and rewrite ~= '1' then
  return redis.error_reply('ERR idgen: bad rewrite flag')
end
local field = string.format('%d', node)
local v = redis.call('HGET', KEYS[1], field)
if not v then
  if ttl == 0 or rewrite ~= '1' then
    return 0
  end
  redis.call('HSET', KEYS[1], field, encode(owner, server_ms() + ttl, now + ttl, 0))
  redis.call('PEXPIRE', KEYS[1], string.format('%d', keep))
  return 2
end
local o, exp, hw, start = parse(v)
if o ~= owner then
  return 0
end
if ttl == 0 then
  if start > now then now = start end
  redis.call('HSET', KEYS[1], field, encode('', 0, now, now))
else
  if now + ttl > hw then hw = now + ttl end
  redis.call('HSET', KEYS[1], field, encode(owner, server_ms() + ttl, hw, start))
end
redis.call('PEXPIRE', KEYS[1], string.format('%d', keep))
return 1
