-- Leases a free Snowflake node ID (0..1023) of a service. Runs after lease_common.lua.
-- KEYS[1]  the node table (see lease_common.lua)
-- ARGV[1..4] owner, TTL (> 0), the caller's clock in Snowflake ms, retention
-- ARGV[5]  a random integer, 0..2^48-1: picks one of the candidate nodes
-- Reply:   {node, start}: the caller may issue IDs with timestamps > start only;
--          {-1, 0} when every node is leased.
-- The candidates are the free nodes whose high-water is below the caller's
-- clock; when there is none, the free nodes with the lowest high-water. One
-- of them is picked uniformly (ARGV[5] modulo their count): processes that
-- start while the table has lost entries of running holders then take a
-- node such a holder still uses with a chance of k in the number of free
-- nodes for k such holders, whatever the holders' places in the table. A
-- retry by the same owner returns the node it already took.
if ttl == 0 then
  return redis.error_reply('ERR idgen: bad TTL')
end
local pick = tonumber(ARGV[5])
if not pick or pick % 1 ~= 0 or pick < 0 or pick > 281474976710655 then
  return redis.error_reply('ERR idgen: bad pick')
end
local srv = server_ms()
local raw = redis.call('HGETALL', KEYS[1])
local slots = {}
for i = 1, #raw, 2 do
  slots[tonumber(raw[i])] = raw[i + 1]
end

-- below: free nodes with high-water < now; lowest: free nodes with the
-- lowest high-water (lowHw), used only when below is empty.
local below, lowest, lowHw = {}, {}, 0
for n = 0, 1023 do
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
      below[#below + 1] = n
    elseif #lowest == 0 or hw < lowHw then
      lowest, lowHw = {n}, hw
    elseif hw == lowHw then
      lowest[#lowest + 1] = n
    end
  end
end
local cands = below
if #cands == 0 then
  cands = lowest
end
if #cands == 0 then
  return {-1, 0}
end
local best = cands[(pick % #cands) + 1]
local bestHw = 0
if slots[best] then
  local _, _, h = parse(slots[best])
  bestHw = h
end
local hw = now + ttl
if bestHw > hw then hw = bestHw end
redis.call('HSET', KEYS[1], string.format('%d', best), encode(owner, srv + ttl, hw, bestHw))
redis.call('PEXPIRE', KEYS[1], string.format('%d', keep))
return {best, bestHw}
