-- Extend one or more leases; never re-creates a lapsed lock.
-- KEYS[i]      lock key of lease i (all in one slot)
-- ARGV[2i-1]   owner ID of lease i
-- ARGV[2i]     new TTL of lease i in milliseconds, 10..86400000
-- Reply        array, element i: 1 extended, 0 expired (no key), 2 held by another owner
local n = #KEYS
if #ARGV ~= 2 * n then return redis.error_reply('ERR lock: bad extend arguments') end
for i = 1, n do
  if not redkit_valid_owner(ARGV[2 * i - 1]) or not redkit_ttl(ARGV[2 * i]) then
    return redis.error_reply('ERR lock: bad extend arguments')
  end
end
local res = {}
for i = 1, n do
  local cur, mine = redkit_lock_get(KEYS[i], ARGV[2 * i - 1])
  if not cur then
    res[i] = 0
  elseif not mine then
    res[i] = 2
  else
    redis.call('PEXPIRE', KEYS[i], redkit_int(redkit_ttl(ARGV[2 * i])))
    res[i] = 1
  end
end
return res
