-- lib: definitions shared by every wallet script. The Go side builds each
-- script as lock.FenceLua (which defines redkit_fence), then this chunk,
-- then the script's body; PostingScriptSource returns one such source.
--
-- Data layout (all keys of one call share the slot group's hash tag):
--   account hash  cur od posted held closed cr db tin tout ck last ho xt
--     cur     currency code
--     od      overdraft limit (posted - held may go down to -od)
--     posted  sum of all postings
--     held    sum of open holds
--     closed  "1" once CloseAccount ran
--     cr db   running totals of credits and debits (captures count as debits)
--     tin tout running totals of transfers in and out
--     ck      journal ID of the last checkpoint ("" before the first)
--     last    journal ID of the last entry
--     ho      number of open holds (absent on accounts from before it:
--             open_holds counts them once)
--     xt      server ms when the account last began a transfer across
--             groups; dropped once none it began is in flight (xstale.lua)
--   journal stream  one entry per change: tx kind delta hdelta posted held [peer] [memo]
--   tx marker       a string for postings and same-group transfers (see
--                   post.lua); a hash k a b n c m nonce s t e p h e2 p2 h2
--                   when written by an older version (expires after the
--                   window), or a transfer across groups (xbegin.lua)
--   holds hash      hold ID -> JSON record (all values strings):
--     n amount, ttl, m memo, s state (open captured voided expired refused),
--     x expiry (server ms), nonce, t placed (ms), e entry, p h balances after;
--     once resolved: c captured amount, rn nonce, rt time, re entry, rp rh balances after
--   hold index zset hold ID scored by the time of its next step: an open hold
--     at its expiry, a decided one when it is forgotten (decision + window)
--   With no hold open (ho 0), the holds hash and index expire one window
--   after the newest decision (set_open_holds).

local MAX = 9007199254740991  -- 2^53-1, the largest integer a Lua number holds exactly
-- Running totals are int64 in Redis; stay clear of 2^63. Scripts compare
-- them as Lua numbers, whose spacing near 9e18 is 1024, so a total may end
-- up to about 1024 past TOTAL_MAX, still 2e17 short of 2^63.
local TOTAL_MAX = 9.0e18

-- fmt formats an integer-valued number exactly: tostring (%.14g) where
-- that is exact (the cheaper way), else %.0f.
local function fmt(x)
  if x < 1e14 and x > -1e14 then return tostring(x) end
  return string.format('%.0f', x)
end

-- now_ms is the server's clock in milliseconds.
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- invalid is the error reply for a bad argument or a value out of bounds.
local function invalid(msg)
  return redis.error_reply('ERR wallet: invalid: ' .. msg)
end

-- post.lua and transfer.lua run the lines above on every call, and the
-- rest of this file only on the paths that call redkit_lib (see fast.lua).
-- @fast

local function num(v)
  return tonumber(v) or 0
end

-- str formats an integer-valued number, or a decimal string, exactly
-- (tostring would use %.14g). tonumber first: not every Lua converts a string
-- argument for %f (gopher-lua, in the embedded miniredis, does not).
local function str(x)
  return string.format('%.0f', tonumber(x))
end

-- amount parses a positive amount 1..MAX given as a decimal string.
local function amount(s)
  if type(s) ~= 'string' or not string.find(s, '^[1-9][0-9]*$') or string.len(s) > 16 then
    return nil
  end
  local v = tonumber(s)
  if v == nil or v > MAX then return nil end
  return v
end

-- fence_ok runs the optional fence check: when the call passed a fence key
-- at KEYS[ki], its token is ARGV[ai]; without one there is nothing to check.
local function fence_ok(ki, ai)
  if not KEYS[ki] then return true end
  return redkit_fence(KEYS[ki], ARGV[ai])
end

-- account reads an account hash; nil when the account does not exist.
local function account(key)
  local v = redis.call('HMGET', key, 'cur', 'od', 'posted', 'held', 'closed', 'cr', 'db', 'tin', 'tout')
  if not v[1] then return nil end
  return {cur = v[1], od = num(v[2]), posted = num(v[3]), held = num(v[4]), closed = v[5] == '1',
          cr = num(v[6]), db = num(v[7]), tin = num(v[8]), tout = num(v[9])}
end

-- refusal returns the status for a posting that would take amount out of a
-- (nil when it only adds), or "ok".
local function status_of(a, cur, out)
  if not a then return 'not_found' end
  if a.closed then return 'closed' end
  if cur ~= '' and cur ~= a.cur then return 'currency' end
  if out and a.posted - a.held - out < -a.od then return 'insufficient' end
  return 'ok'
end

-- journal appends an entry and records it as the account's last entry.
local function journal(acct_key, j_key, tx, kind, delta, hdelta, posted, held, peer, memo)
  local args = {'XADD', j_key, '*', 'tx', tx, 'kind', kind, 'delta', delta, 'hdelta', hdelta,
                'posted', str(posted), 'held', str(held)}
  if peer ~= '' then args[#args + 1] = 'peer'; args[#args + 1] = peer end
  if memo ~= '' then args[#args + 1] = 'memo'; args[#args + 1] = memo end
  local id = redis.call(unpack(args))
  redis.call('HSET', acct_key, 'last', id)
  return id
end

local MARK = {'k', 'a', 'b', 'n', 'c', 'm', 'nonce', 's', 't', 'e', 'p', 'h', 'e2', 'p2', 'h2'}

-- marker reads a transaction marker; nil when there is none.
local function marker(key)
  local v = redis.call('HMGET', key, unpack(MARK))
  if not v[1] then return nil end
  local m = {}
  for i, f in ipairs(MARK) do m[f] = v[i] or '' end
  return m
end

-- conflict names the first field in which the stored marker m differs from
-- the call (kind, account/from, to, amount, currency, memo), or nil.
local function conflict(m, kind, a, b, n, c, memo)
  if m.k ~= kind then return 'kind' end
  if m.a ~= a then
    if kind == 'transfer' then return 'from' end
    return 'account'
  end
  if m.b ~= b then return 'to' end
  if m.n ~= n then return 'amount' end
  if m.c ~= c then return 'currency' end
  if m.m ~= memo then return 'memo' end
  return nil
end

-- balance_reply is the part of a reply describing one account.
-- An accepted posting found the account open, so closed is always "0".
local function balance_reply(a, posted, held)
  if not a then return {'', '0', '0', '0', '0'} end
  return {a.cur, str(a.od), str(posted), str(held), '0'}
end

-- reply builds {status, replayed, field, time, entry, cur, od, posted, held,
-- closed [, entry2, cur2, od2, posted2, held2, closed2]}; all strings.
local function reply(status, replayed, field, t, e, bal, e2, bal2)
  local r = {status, replayed and '1' or '0', field or '', t or '', e or ''}
  for _, x in ipairs(bal or balance_reply(nil)) do r[#r + 1] = x end
  if bal2 then
    r[#r + 1] = e2 or ''
    for _, x in ipairs(bal2) do r[#r + 1] = x end
  end
  return r
end

-- replay answers a call whose marker exists: the stored outcome, replayed
-- unless the marker carries this call's nonce (an earlier attempt of it).
local function replay(m, nonce, a, b)
  local replayed = m.nonce ~= nonce
  if m.s ~= 'ok' then return reply(m.s, replayed) end
  local bal2 = nil
  if b then bal2 = balance_reply(b, m.p2, m.h2) end
  return reply('ok', replayed, '', m.t, m.e, balance_reply(a, m.p, m.h), m.e2, bal2)
end

-- remember writes the marker of a decided transaction and sets its expiry.
local function remember(key, window, fields)
  redis.call('HSET', key, unpack(fields))
  redis.call('PEXPIRE', key, window)
end

-- Holds -------------------------------------------------------------------

local SWEEP_LIMIT = 64

local function hold_get(holds_key, id)
  local raw = redis.call('HGET', holds_key, id)
  if not raw then return nil end
  return cjson.decode(raw)
end

local function hold_put(holds_key, idx_key, id, h, next_ms)
  redis.call('HSET', holds_key, id, cjson.encode(h))
  redis.call('ZADD', idx_key, str(next_ms), id)
end

-- open_holds is the account's number of open holds (account field ho).
-- An account from before that field is counted once from its holds hash.
-- Only reads.
local function open_holds(ak, hk)
  local v = redis.call('HGET', ak, 'ho')
  if v then return tonumber(v) end
  local n = 0
  for _, raw in ipairs(redis.call('HVALS', hk)) do
    if cjson.decode(raw).s == 'open' then n = n + 1 end
  end
  return n
end

-- set_open_holds stores the account's number of open holds after a change
-- and sets the retention of its hold records: with none open, the holds
-- hash and index expire one window after now (the newest decision among
-- them), so the decided records of an account nobody calls again are
-- forgotten on time whatever happens to the processes that decided them
-- (a call's sweep forgets each one on time as well); with one open, they
-- keep no expiry (an open hold's record outlives its release). Keys get an
-- expiry only when the count is 0 and lose it when it is 1 again, so with
-- more open they already have none.
local function set_open_holds(ak, hk, ik, n, window)
  redis.call('HSET', ak, 'ho', tostring(n))
  if n == 1 then
    redis.call('PERSIST', hk)
    redis.call('PERSIST', ik)
  elseif n == 0 then
    redis.call('PEXPIRE', hk, window)
    redis.call('PEXPIRE', ik, window)
  end
end

-- sweep_due releases the account's holds listed in due (hold index
-- entries due at now) whose expiry has passed (journal kind "hold_expire")
-- and forgets the decided ones, for an account whose posted and held
-- balances are given. Returns the held balance after.
local function sweep_due(ak, jk, hk, ik, posted, held, due, now, window)
  local open = nil -- read before the first release
  for _, id in ipairs(due) do
    local h = hold_get(hk, id)
    if h and h.s == 'open' then
      if not open then open = open_holds(ak, hk) end
      open = open - 1
      local n = tonumber(h.n)
      redis.call('HINCRBY', ak, 'held', '-' .. h.n)
      held = held - n
      local e = journal(ak, jk, id, 'hold_expire', '0', '-' .. h.n, posted, held, '', h.m)
      h.s, h.rt, h.re, h.rp, h.rh = 'expired', str(now), e, str(posted), str(held)
      hold_put(hk, ik, id, h, now + tonumber(window))
    else
      redis.call('HDEL', hk, id)
      redis.call('ZREM', ik, id)
    end
  end
  if open then set_open_holds(ak, hk, ik, math.max(open, 0), window) end
  return held
end

-- sweep_held is sweep_due for the index entries due at now, at most limit
-- of them. Returns the held balance after, and how many entries it handled.
local function sweep_held(ak, jk, hk, ik, posted, held, now, window, limit)
  local due = redis.call('ZRANGEBYSCORE', ik, '-inf', fmt(now), 'LIMIT', '0', tostring(limit))
  if #due == 0 then return held, 0 end
  return sweep_due(ak, jk, hk, ik, posted, held, due, now, window), #due
end

-- sweep is sweep_held for an account read by account(); a.held follows.
-- Returns how many entries it handled.
local function sweep(ak, jk, hk, ik, a, now, window, limit)
  if not a then return 0 end
  local held, handled = sweep_held(ak, jk, hk, ik, a.posted, a.held, now, window, limit)
  a.held = held
  return handled
end

-- held_over reports whether holding n more would take a.held past MAX,
-- not counting open holds that have expired but were not released yet
-- (a check never counts an expired hold; the check comes before the sweep,
-- which writes). It answers "again" (nil) when more holds are due than it
-- looks at. Only reads; runs only when the stored total is over.
local function held_over(a, hk, ik, n, now)
  if not a or a.held + n <= MAX then return false end
  local due = redis.call('ZRANGEBYSCORE', ik, '-inf', str(now), 'LIMIT', '0', str(SWEEP_LIMIT + 1))
  if #due > SWEEP_LIMIT then return nil end
  local expired = 0
  for _, id in ipairs(due) do
    local h = hold_get(hk, id)
    if h and h.s == 'open' then expired = expired + tonumber(h.n) end
  end
  return a.held - expired + n > MAX
end

-- due_left reports whether the hold index still has entries due at now
-- (a sweep stopped at its limit). Balances then still count holds that
-- have expired, so a refusal for lack of funds would rest on a partial
-- view: scripts answer "again" instead, without storing it, and the Go
-- side sweeps the rest before calling again.
local function due_left(ik, now)
  return #redis.call('ZRANGEBYSCORE', ik, '-inf', str(now), 'LIMIT', '0', '1') > 0
end
