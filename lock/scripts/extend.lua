-- Extend one or more leases; never re-creates a lapsed lock.
-- KEYS[i]      lock key of lease i (all in one slot)
-- ARGV[2i-1]   owner ID of lease i
-- ARGV[2i]     new TTL of lease i in milliseconds (decimal string)
-- Reply        array, element i: 1 extended, 0 expired (no key), 2 held by another owner
local res = {}
for i = 1, #KEYS do
  local cur = redis.call('GET', KEYS[i])
  if not cur then
    res[i] = 0
  elseif string.sub(cur, 1, 32) ~= ARGV[2 * i - 1] then
    res[i] = 2
  else
    redis.call('PEXPIRE', KEYS[i], ARGV[2 * i])
    res[i] = 1
  end
end
return res
