-- xdone: forget a finished transfer across slot groups: drop it from the
-- in-flight index and let its record expire after the window. Runs after
-- the destination's inbound record was given the same expiry.
--
-- KEYS[1] transfer record  <prefix>:wallet:v2:{<from group>}:tx:<tx id>
-- KEYS[2] in-flight index  <prefix>:wallet:v2:{<from group>}:xpend
-- ARGV[1] tx ID
-- ARGV[2] idempotency window in milliseconds
--
-- Reply: 1, or 0 when the transfer is still pending (nothing changed).

if redis.call('HGET', KEYS[1], 's') == 'pending' then return 0 end
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
