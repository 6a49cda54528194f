-- trim.lua: delete journal entries older than the last checkpoint, keeping
-- every entry that a consumer group has not yet delivered or acknowledged,
-- for at most the holdback: a group cannot keep entries older than that.
--
-- KEYS[1]  SKU hash        <p>:stock:v1:{g}:sku:<sku>
-- KEYS[2]  journal stream  <p>:stock:v1:{g}:journal:<sku>
-- ARGV[1]  optional: SKU (unused; as checkpoint.lua and close.lua take it)
-- ARGV[2]  optional: holdback in milliseconds, 1..2^53-1 (WithJournalHoldback);
--          without it, groups hold back the trim for as long as they lag
--
-- Reply: {deleted, overrun}: the number of entries deleted (0 when there is
-- no checkpoint) and the number of groups that lost entries they had not
-- acknowledged (or not read) because those were older than the holdback.

local function parse(id)
  local ms, seq = string.match(id, '^(%d+)-(%d+)$')
  return tonumber(ms), tonumber(seq)
end
local function less(x, y)
  local xm, xs = parse(x)
  local ym, ys = parse(y)
  return xm < ym or (xm == ym and xs < ys)
end

local holdback = tonumber(ARGV[2])
if ARGV[2] and (not holdback or holdback ~= math.floor(holdback) or holdback < 1 or holdback > 9007199254740991) then
  return redis.error_reply('ERR holdback')
end
local ckpt = redis.call('HGET', KEYS[1], 'ckpt')
if not ckpt then return {0, 0} end

-- Entry IDs are the server's clock in milliseconds when they were added, so
-- the holdback is a bound on entry IDs.
local floor
if ARGV[2] then
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  floor = string.format('%d', math.max(now - holdback, 0)) .. '-0'
end

local bound, overrun = ckpt, 0
for _, g in ipairs(redis.call('XINFO', 'GROUPS', KEYS[2])) do
  local name, last
  for i = 1, #g, 2 do
    if g[i] == 'name' then name = g[i + 1] end
    if g[i] == 'last-delivered-id' then last = g[i + 1] end
  end
  local keep = last
  local p = redis.call('XPENDING', KEYS[2], name)
  if p[2] and less(p[2], keep) then keep = p[2] end
  -- The group needs entries from keep on (keep itself, when pending).
  if floor and less(keep, floor) and less(keep, ckpt) then
    -- Lagging past the holdback: its entries before floor go. Count it only
    -- when it loses an entry it has not acknowledged or not read.
    local lost = p[2] and less(p[2], floor)
    if not lost and less(last, floor) then
      lost = #redis.call('XRANGE', KEYS[2], '(' .. last, '(' .. floor, 'COUNT', '1') > 0
    end
    if lost then overrun = overrun + 1 end
    keep = floor
  end
  if less(keep, bound) then bound = keep end
end
return {redis.call('XTRIM', KEYS[2], 'MINID', bound), overrun}
