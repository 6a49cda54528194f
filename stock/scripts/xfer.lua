-- xfer.lua: move available units between two buckets of a SKU split into
-- buckets (WithBuckets). A transfer is "out" on the giving bucket, then "in"
-- on the receiving one, then its out-record is deleted (HDEL). Between
-- "out" and "in" its units are in flight and counted by Audit.
--
-- Transfers from one bucket to another are numbered 1, 2, ... by the giving
-- bucket, and the receiving bucket applies them strictly in that order,
-- remembering the last number applied from each giver. So a transfer is
-- credited exactly once however often, however late and by however many
-- callers it is finished, and no per-transfer state outlives it.
--
-- action "out", on the giving bucket k:
--   KEYS[1] SKU hash, KEYS[2] journal, KEYS[3] out-records hash
--           <p>:stock:v1:{g#k}:transfers:<sku> (transfer ID -> "qty to seq";
--           "next:<to>" -> last number given to bucket <to>)
--   ARGV    "out", SKU, transfer ID, units wanted (1..2^53-1), receiving
--           bucket, and the most units the receiving bucket can take
--           (0..2^53-1: 2^53-1 minus its supply, read by the caller); moves
--           the units wanted or half of what the bucket has, whichever is
--           more, as far as it has them and the receiver can take them
--   reply   {units, seq}: units moved out (0: none available, no record)
--           and the transfer's number; a repeated call returns the same
-- action "in", on the receiving bucket:
--   KEYS[1] SKU hash, KEYS[2] journal
--   ARGV    "in", SKU, transfer ID, units, giving bucket, seq
--   reply   {units credited}: 0 when it was credited before, -1 when an
--           earlier transfer from the same bucket must be credited first

local MAX = 9007199254740991
local action, sku, id, q = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4])
if not q or q ~= math.floor(q) or q < 1 or q > MAX then return redis.error_reply('ERR quantity') end
local function fmt(x) return string.format('%d', x) end

local h = redis.call('HMGET', KEYS[1], 'available', 'reserved', 'sold', 'refunded', 'supply', 'moved')
if not h[1] then return redis.error_reply('ERR no such bucket') end
local a, supply, moved = tonumber(h[1]), tonumber(h[5]), tonumber(h[6] or '0')
local kind, x, reply

if action == 'out' then
  local to, room = ARGV[5], tonumber(ARGV[6])
  if not room or room ~= math.floor(room) or room < 0 or room > MAX then return redis.error_reply('ERR room') end
  if not string.match(to, '^%d+$') then return redis.error_reply('ERR bucket') end
  local done = redis.call('HGET', KEYS[3], id)
  if done then
    local dq, _, dseq = string.match(done, '^(%d+) (%d+) (%d+)$')
    return {tonumber(dq), tonumber(dseq)}
  end
  -- At least what is wanted, up to half of what this bucket has, so a busy
  -- bucket does not come back for every order.
  x = math.min(a, math.max(q, math.ceil(a / 2)), room)
  if x == 0 then return {0, 0} end
  local seq = redis.call('HINCRBY', KEYS[3], 'next:' .. to, '1')
  redis.call('HSET', KEYS[3], id, fmt(x) .. ' ' .. to .. ' ' .. fmt(seq))
  -- Two statements: Lua implementations differ in whether a multiple
  -- assignment reads x before or after assigning it.
  reply = {x, seq}
  kind, x = 'transfer_out', -x
elseif action == 'in' then
  local from, seq = ARGV[5], tonumber(ARGV[6])
  if not seq or seq ~= math.floor(seq) or seq < 1 or seq > MAX then return redis.error_reply('ERR seq') end
  local last = tonumber(redis.call('HGET', KEYS[1], 'in:' .. from) or '0')
  if seq <= last then return {0} end
  if seq > last + 1 then return {-1} end
  if a + q > MAX or supply + q > MAX then return redis.error_reply('ERR overflow') end
  redis.call('HSET', KEYS[1], 'in:' .. from, fmt(seq))
  kind, x, reply = 'transfer_in', q, {q}
else
  return redis.error_reply('ERR action')
end
a, supply, moved = a + x, supply + x, moved + x
redis.call('HSET', KEYS[1], 'available', fmt(a), 'supply', fmt(supply), 'moved', fmt(moved))
redis.call('XADD', KEYS[2], '*', 'op', id, 'kind', kind, 'sku', sku, 'd_avail', fmt(x), 'd_supply', fmt(x),
  'avail', fmt(a), 'res', h[2], 'sold', h[3], 'ref', h[4], 'supply', fmt(supply))
return reply
