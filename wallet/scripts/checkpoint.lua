-- checkpoint: append a checkpoint entry carrying the account's balances and
-- running totals, and trim the journal behind it. Runs after lib.lua.
--
-- KEYS[1] account hash  <prefix>:wallet:v2:{<group>}:acct:<account>
-- KEYS[2] journal       <prefix>:wallet:v2:{<group>}:journal:<account>
-- ARGV[1] the journal's last entry ID that the caller verified the
--         account against; a checkpoint is only written over a journal
--         that was proved to match, or it would launder drift
--
-- The entry carries seq (see below) next to the balances and totals.
--
-- Reply: {entry_id, trimmed}, {"not_found", 0}, or {"moved", 0} when the
-- account's last entry is no longer ARGV[1] (nothing written).

local a = account(KEYS[1])
if not a then return {'not_found', 0} end
local last = redis.call('HGET', KEYS[1], 'last')
local tail = redis.call('XREVRANGE', KEYS[2], '+', '-', 'COUNT', '1')
if last ~= ARGV[1] or not tail[1] or tail[1][1] ~= last then return {'moved', 0} end
-- The totals are copied as stored: they pass 2^53, where a Lua number
-- would round them.
local t = redis.call('HMGET', KEYS[1], 'cr', 'db', 'tin', 'tout')
local args = {'XADD', KEYS[2], '*', 'tx', '', 'kind', 'checkpoint', 'delta', '0', 'hdelta', '0',
              'posted', str(a.posted), 'held', str(a.held), 'cr', t[1] or '0', 'db', t[2] or '0',
              'tin', t[3] or '0', 'tout', t[4] or '0'}
-- seq: how many entries the journal was ever given, this one included
-- (the stream's entries-added counter, which XDEL and XTRIM do not lower).
-- Verify counts the entries from here on against it, so an entry removed
-- after the checkpoint shows. Left out where the server does not report
-- the counter.
local info = redis.pcall('XINFO', 'STREAM', KEYS[2])
if type(info) == 'table' and not info.err then
  for i = 1, #info - 1, 2 do
    if info[i] == 'entries-added' then
      args[#args + 1] = 'seq'
      args[#args + 1] = str(info[i + 1] + 1)
    end
  end
end
local e = redis.call(unpack(args))
local trimmed = redis.call('XTRIM', KEYS[2], 'MINID', e)
redis.call('HSET', KEYS[1], 'ck', e, 'last', e)
return {e, trimmed}
