-- Release a mutex (also a Redlock master's lock, without a token).
-- KEYS[1]  lock key
-- KEYS[2]  fence counter of the lock's hash slot
-- ARGV[1]  owner ID
-- ARGV[2]  wake-up channel (same hash tag as the keys)
-- ARGV[3]  'PUBLISH', or 'SPUBLISH' on Cluster
-- ARGV[4]  the lease's token (decimal), '0' when it has none
-- Reply    1 released now (a waiter is told when the lock was marked)
--          0 nobody holds it           2 another owner holds it
--          3, 5: as 0, 2, and Redis lost the acquisition (the holder's token
--          is not above the lease's, or nobody holds it and the fence counter
--          is below it), so an earlier send cannot have released it
-- Whether a re-sent release had already taken effect is decided in Go
-- (doc.go, "Retries are safe"); nothing is written per release.
-- Written out without common.lua's functions (see acquire.lua).
local cur = redis.call('GET', KEYS[1])
if cur and string.sub(cur, 1, 32) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  if string.byte(cur, 33) == 33 then redis.call(ARGV[3], ARGV[2], 'r') end -- marked
  return 1
end
local status = 0
if cur then status = 2 end
if ARGV[4] ~= '0' then -- as redkit_lost in common.lua
  local tok = tonumber(ARGV[4])
  if cur then
    if tonumber(string.sub(cur, 34)) <= tok then status = 5 end
  elseif (tonumber(redis.call('GET', KEYS[2])) or 0) < tok then
    status = 3
  end
end
return status
