-- xstale: list the transfers across groups from the account's slot group
-- that have been in flight for at least a grace period (their caller most
-- likely died), so that the Go side finishes them; and once none is left
-- that began no later than the account's last one, drop the account's
-- mark (xt) so that its calls stop asking. Runs after lib.lua.
--
-- KEYS[1] account hash    <prefix>:wallet:v2:{<group>}:acct:<account>
-- KEYS[2] in-flight index <prefix>:wallet:v2:{<group>}:xpend
-- ARGV[1] grace in milliseconds
-- ARGV[2] the most IDs to return
--
-- Reply: the IDs of transfers begun at least the grace ago, oldest first.

local now = now_ms()
local stale = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', str(now - tonumber(ARGV[1])), 'LIMIT', '0', ARGV[2])
if #stale > 0 then return stale end
local xt = redis.call('HGET', KEYS[1], 'xt')
if xt and #redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', xt, 'LIMIT', '0', '1') == 0 then
  -- Every transfer the account began is finished (the index holds none
  -- begun at or before its last): a later one sets xt again.
  redis.call('HDEL', KEYS[1], 'xt')
end
return stale
