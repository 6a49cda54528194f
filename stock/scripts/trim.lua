-- trim.lua: delete journal entries older than the last checkpoint, keeping
-- every entry that a consumer group has not yet delivered or acknowledged.
--
-- KEYS[1]  SKU hash        <p>:stock:v1:{g}:sku:<sku>
-- KEYS[2]  journal stream  <p>:stock:v1:{g}:journal:<sku>
--
-- Reply: the number of entries deleted (0 when there is no checkpoint).

local ckpt = redis.call('HGET', KEYS[1], 'ckpt')
if not ckpt then return 0 end

local function parse(id)
  local ms, seq = string.match(id, '^(%d+)-(%d+)$')
  return tonumber(ms), tonumber(seq)
end
local function less(x, y)
  local xm, xs = parse(x)
  local ym, ys = parse(y)
  return xm < ym or (xm == ym and xs < ys)
end

local bound = ckpt
for _, g in ipairs(redis.call('XINFO', 'GROUPS', KEYS[2])) do
  local name, last
  for i = 1, #g, 2 do
    if g[i] == 'name' then name = g[i + 1] end
    if g[i] == 'last-delivered-id' then last = g[i + 1] end
  end
  if less(last, bound) then bound = last end
  local p = redis.call('XPENDING', KEYS[2], name)
  if p[2] and less(p[2], bound) then bound = p[2] end
end
return redis.call('XTRIM', KEYS[2], 'MINID', bound)
