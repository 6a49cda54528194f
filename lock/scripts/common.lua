-- Functions shared by the lock scripts; this chunk is prepended to each.
--
-- Go validates every argument before it reaches Redis (owner IDs are 32 hex
-- characters it made, TTLs are decimal strings of 10..86400000 ms, the
-- publish command is PUBLISH or SPUBLISH), so the scripts do not check them
-- again.
--
-- A lock value is "<owner>:<token>": the 32-character owner ID, one
-- separator byte and the fencing token in decimal. The separator is ':' (58)
-- until a waiter marks the lock, then '!' (33): a release publishes a
-- wake-up only for a marked lock. The mark lives in the lock key, so it
-- never outlives the lock and costs no key of its own.

-- redkit_now: server time in milliseconds, and the raw TIME reply.
local function redkit_now()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000), t
end

-- redkit_int: an integer as a decimal string. Every number a script computes
-- and passes to redis.call or puts in a value goes through it: Lua's own
-- formatting keeps 14 digits ('%.14g'), and how Redis formats a Lua number
-- differs between versions (an exponent, or a shortest form).
local function redkit_int(n)
  return string.format('%d', n)
end

-- redkit_zhold: give owner an entry expiring at now + ttl (ms, a number) in
-- a sorted set of owner ID -> expiry (server time, ms), dropping the
-- entries already expired; the key lives at least as long as the new entry.
local function redkit_zhold(key, owner, now, ttl)
  redis.call('ZREMRANGEBYSCORE', key, '-inf', redkit_int(now))
  redis.call('ZADD', key, redkit_int(now + ttl), owner)
  if redis.call('PTTL', key) < ttl then redis.call('PEXPIRE', key, redkit_int(ttl)) end
end

-- redkit_lock_get: the value of a lock key (or false) and whether it
-- belongs to owner.
local function redkit_lock_get(key, owner)
  local cur = redis.call('GET', key)
  return cur, cur and string.sub(cur, 1, 32) == owner
end

-- redkit_token: the fencing token in a lock value.
local function redkit_token(cur)
  return tonumber(string.sub(cur, 34))
end

-- redkit_lock_value: the value of a new lock; marked when the new holder
-- waited for it (mode '2'), since others may still wait behind it.
local function redkit_lock_value(owner, token, mode)
  if mode == '2' then return owner .. '!' .. redkit_int(token) end
  return owner .. ':' .. redkit_int(token)
end

-- redkit_mark: mark a lock held by another owner as waited for, once.
local function redkit_mark(key, cur)
  if string.byte(cur, 33) == 58 then redis.call('SETRANGE', key, 32, '!') end
end

-- redkit_marked: whether a lock value carries the waited-for mark.
local function redkit_marked(cur)
  return string.byte(cur, 33) == 33
end

-- redkit_lost: whether Redis no longer has the acquisition that issued
-- token (a decimal string, '0' for a lease without a fence; cur is the lock
-- value found, held by another owner, or false): every acquisition after
-- it drew a larger token from the counter, so a holder whose token is not
-- larger, or a counter below it with nobody holding the lock, means the
-- counter went back (a restart without persistence, a failover that lost
-- it). A release must not then be reported as done by an earlier send.
local function redkit_lost(counter, token, cur)
  if token == '0' then return false end
  if cur then return redkit_token(cur) <= tonumber(token) end
  return (tonumber(redis.call('GET', counter)) or 0) < tonumber(token)
end
