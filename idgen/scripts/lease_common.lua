-- Prelude of lease_acquire.lua and lease_renew.lua, prepended to each.
-- The node table is a hash: field = node ID (0..1023), value = "owner|expires|hw|start"
--   owner    lease owner (random hex), empty once released
--   expires  server time (Unix ms) when the lease ends; 0 once released
--   hw       high-water: no ID of this node carries a later timestamp (Snowflake ms)
--   start    the hw the current owner found when it took the node
-- ARGV[1]  owner: 16..64 hex characters, new for every lease
-- ARGV[2]  TTL in ms, 1000..3600000 (0: release, lease_renew.lua only)
-- ARGV[3]  a time in Snowflake ms (ms since the Snowflake epoch), see each script
-- ARGV[4]  retention of the table in ms after its last write (>= TTL)
local owner = ARGV[1]
local ttl = tonumber(ARGV[2])
local now = tonumber(ARGV[3])
local keep = tonumber(ARGV[4])
if not string.match(owner, '^%x+$') or #owner < 16 or #owner > 64 then
  return redis.error_reply('ERR idgen: bad owner')
end
if not ttl or ttl % 1 ~= 0 or (ttl ~= 0 and (ttl < 1000 or ttl > 3600000)) then
  return redis.error_reply('ERR idgen: bad TTL')
end
if not now or now % 1 ~= 0 or now < 0 or now > 2199023255551 then
  return redis.error_reply('ERR idgen: bad clock')
end
if not keep or keep % 1 ~= 0 or keep < ttl then
  return redis.error_reply('ERR idgen: bad retention')
end

-- parse returns owner, expires, hw, start of a table value, or nil.
local function parse(v)
  local o, exp, hw, start = string.match(v, '^(%x*)|(%d+)|(%d+)|(%d+)$')
  if not o then
    return nil
  end
  return o, tonumber(exp), tonumber(hw), tonumber(start)
end

local function encode(o, exp, hw, start)
  return o .. '|' .. string.format('%d', exp) .. '|' .. string.format('%d', hw) .. '|' ..
    string.format('%d', start)
end

local function server_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
