-- forget.lua: remove the consumers of a journal's consumer group that have
-- no pending entry and were idle for at least a given time, so a group does
-- not keep every consumer name ever used. Reading and removing are one
-- atomic step: a consumer that read entries since it was seen idle keeps
-- them (XGROUP DELCONSUMER would drop its pending entries).
--
-- KEYS[1]  journal stream  <p>:stock:v1:{g}:journal:<sku>
-- ARGV[1]  consumer group
-- ARGV[2]  the calling consumer, never removed
-- ARGV[3]  idle time in milliseconds, 1..2^53-1
--
-- Reply: the number of consumers removed (0 when there is no such group).

local idle = tonumber(ARGV[3])
if not idle or idle ~= math.floor(idle) or idle < 1 or idle > 9007199254740991 then
  return redis.error_reply('ERR idle')
end
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
local found = false
for _, g in ipairs(redis.call('XINFO', 'GROUPS', KEYS[1])) do
  for i = 1, #g, 2 do
    if g[i] == 'name' and g[i + 1] == ARGV[1] then found = true end
  end
end
if not found then return 0 end
local removed = 0
for _, c in ipairs(redis.call('XINFO', 'CONSUMERS', KEYS[1], ARGV[1])) do
  local name, pending, ms
  for i = 1, #c, 2 do
    if c[i] == 'name' then name = c[i + 1] end
    if c[i] == 'pending' then pending = c[i + 1] end
    if c[i] == 'idle' then ms = c[i + 1] end
  end
  if name ~= ARGV[2] and pending == 0 and ms >= idle then
    redis.call('XGROUP', 'DELCONSUMER', KEYS[1], ARGV[1], name)
    removed = removed + 1
  end
end
return removed
