-- head: read an account's stored balances and running totals together with
-- the ID of its journal's newest entry, how many entries the journal was
-- ever given, and what its open holds and transfers in flight add up to,
-- in one atomic step, for Verify. Writes nothing. Runs after lib.lua.
--
-- KEYS[1] account hash     <prefix>:wallet:v2:{<group>}:acct:<account>
-- KEYS[2] journal          <prefix>:wallet:v2:{<group>}:journal:<account>
-- KEYS[3] holds hash       <prefix>:wallet:v2:{<group>}:holds:<account>
-- KEYS[4] in-flight index  <prefix>:wallet:v2:{<group>}:xpend
-- KEYS[5..] the transfer record of each ID of the in-flight index, as the
--         caller read it (ARGV[2..], in the index's order)
-- ARGV[1] account ID
-- ARGV[2..] the in-flight index's IDs
--
-- Reply: {"not_found"}; {"moved"} when the in-flight index holds an ID
-- not in ARGV[2..] (the caller reads it again); or {"ok", posted, held, cr,
-- db, tin, tout, ck, last, tail, added, open}: last is the account's record
-- of its newest entry, tail the journal's (they differ when either was
-- rolled back or appended to behind the scripts' back); added is the
-- stream's entries-added counter (every entry ever appended, which XDEL and
-- XTRIM do not lower; "" where the server does not report it); open is the
-- sum of the account's open holds and of the transfers across groups it
-- has in flight (both counted in held).

local v = redis.call('HMGET', KEYS[1], 'cur', 'posted', 'held', 'cr', 'db', 'tin', 'tout', 'ck', 'last')
if not v[1] then return {'not_found'} end
-- A transfer that left the index since the caller read it is finished (no
-- longer held); one that joined it is not among KEYS: read again.
local passed = {}
for i = 2, #ARGV do passed[ARGV[i]] = true end
for _, id in ipairs(redis.call('ZRANGE', KEYS[4], '0', '-1')) do
  if not passed[id] then return {'moved'} end
end
local tail = redis.call('XREVRANGE', KEYS[2], '+', '-', 'COUNT', '1')
local t = ''
if tail[1] then t = tail[1][1] end
local added = ''
local info = redis.pcall('XINFO', 'STREAM', KEYS[2])
if type(info) == 'table' and not info.err then
  for i = 1, #info - 1, 2 do
    if info[i] == 'entries-added' then added = str(info[i + 1]) end
  end
end
local open = 0
for _, raw in ipairs(redis.call('HVALS', KEYS[3])) do
  local h = cjson.decode(raw)
  if h.s == 'open' then open = open + tonumber(h.n) end
end
for i = 5, #KEYS do
  local x = redis.call('HMGET', KEYS[i], 'k', 's', 'a', 'n')
  if x[1] == 'xtransfer' and x[2] == 'pending' and x[3] == ARGV[1] then open = open + tonumber(x[4]) end
end
return {'ok', v[2] or '', v[3] or '', v[4] or '', v[5] or '', v[6] or '', v[7] or '', v[8] or '', v[9] or '', t,
        added, str(open)}
