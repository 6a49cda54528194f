-- fast: what post.lua and transfer.lua need on their common path. The Go
-- side builds them as fence.Lua, the head of lib.lua (down to its line
-- "-- @fast": constants, fmt, now_ms, invalid), the rest of lib.lua wrapped
-- in the function redkit_lib (so its closures are only made on the paths
-- that use them: markers kept as hashes, holds due), this chunk, then the
-- body.

-- sweep_fast releases the account's due holds (lib.lua's sweep_held) and
-- returns the held balance after, and whether it stopped at its limit
-- (more may be due: see swept_all); nothing due costs one command and no
-- closure.
local function sweep_fast(ak, jk, hk, ik, posted, held, now_s, now, window)
  local due = redis.call('ZRANGEBYSCORE', ik, '-inf', now_s, 'LIMIT', '0', '64')
  if #due == 0 then return held, false end
  return redkit_lib().sweep_due(ak, jk, hk, ik, posted, held, due, now, window), #due == 64
end

-- due_left: lib.lua's.
local function due_left(ik, now_s)
  return #redis.call('ZRANGEBYSCORE', ik, '-inf', now_s, 'LIMIT', '0', '1') > 0
end

-- swept_all reports whether a sweep_fast that stopped at its limit (full)
-- left nothing due. An accepted posting replies with the balance right
-- after it, which must not count an expired hold: when some are left the
-- script answers "again" before it writes the posting, and the Go side
-- sweeps the rest and sends the call again.
local function swept_all(full, ik, now_s)
  return not full or not due_left(ik, now_s)
end

-- set_posted writes an account's posted balance (posted_s) and last entry,
-- and adds the posting's amount n (amount_s) to its running total field,
-- now at total: in the same HSET while a Lua number holds the sum exactly
-- (below 2^53, so always in practice); past that, HINCRBY adds exactly.
local function set_posted(key, posted_s, entry, field, total, n, amount_s)
  if total + n < MAX then
    redis.call('HSET', key, 'posted', posted_s, 'last', entry, field, fmt(total + n))
  else
    redis.call('HSET', key, 'posted', posted_s, 'last', entry)
    redis.call('HINCRBY', key, field, amount_s)
  end
end
