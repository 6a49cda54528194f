-- Raise a Redlock master's fence counter to a lease's token: the second
-- round of a Redlock acquire whose granting masters drew different
-- counters (doc.go, "Redlock's fencing token").
-- KEYS[1]  Redlock lock key on this master ("<owner>:<counter at grant>")
-- KEYS[2]  fence counter of the lock's hash slot on this master
-- ARGV[1]  owner ID
-- ARGV[2]  the lease's token (decimal, at most 2^53-1: it came from INCR)
-- Reply    1 the lock is this owner's   0 nobody holds it
--          2 another owner holds it
-- The counter is set to the token when it is below, whatever the reply:
-- raising a counter never breaks an order (it only grows), and a master
-- brought up to date spares later acquires this round. A re-send does the
-- same again. Written out without common.lua's functions (see acquire.lua).
local cur = redis.call('GET', KEYS[1])
if (tonumber(redis.call('GET', KEYS[2])) or 0) < tonumber(ARGV[2]) then
  redis.call('SET', KEYS[2], ARGV[2])
end
if not cur then return 0 end
if string.sub(cur, 1, 32) == ARGV[1] then return 1 end
return 2
