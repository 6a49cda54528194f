-- consume.lua: hand the next entries of a journal to one consumer of a
-- consumer group, so that the group's consumers see the journal in order:
-- no consumer is handed an entry while an older one is pending for (held
-- by) another. Deciding and handing out are one step, so two consumers can
-- never both pass the check.
--
-- The group's pending entries come first, oldest first: the longest run of
-- them, from the oldest, that this consumer holds already (it failed or
-- restarted before acknowledging them) or that another consumer has left
-- idle for at least the given time (it crashed or stalled), is claimed by
-- this consumer (XCLAIM) and handed out. An older entry held, and not
-- idle, by another ends the run; when the oldest pending entry is such
-- one, nothing is handed out. Only with nothing pending are new entries
-- read (XREADGROUP >). A pending entry the journal no longer holds (Trim
-- past the holdback) is acknowledged, not handed out.
--
-- KEYS[1]  journal stream  <p>:stock:v1:{g}:journal:<sku>
-- ARGV[1]  consumer group
-- ARGV[2]  consumer
-- ARGV[3]  the most entries to hand out, 1..1000
-- ARGV[4]  idle time in milliseconds after which another consumer's
--          pending entry is taken over, 1..2^53-1
--
-- Reply: {dropped, entry...}: dropped is the number of pending entries
-- acknowledged because the journal no longer holds them; each entry is
-- {id, {field, value, ...}}, oldest first.

local batch, idle = tonumber(ARGV[3]), tonumber(ARGV[4])
if not batch or batch ~= math.floor(batch) or batch < 1 or batch > 1000 then
  return redis.error_reply('ERR batch')
end
if not idle or idle ~= math.floor(idle) or idle < 1 or idle > 9007199254740991 then
  return redis.error_reply('ERR idle')
end

local pending = redis.call('XPENDING', KEYS[1], ARGV[1], '-', '+', batch)
if #pending == 0 then
  local out = {0}
  local r = redis.call('XREADGROUP', 'GROUP', ARGV[1], ARGV[2], 'COUNT', batch, 'STREAMS', KEYS[1], '>')
  if r and r[1] then
    for _, e in ipairs(r[1][2]) do out[#out + 1] = e end
  end
  return out
end

local ids = {}
for _, p in ipairs(pending) do
  if p[2] ~= ARGV[2] and p[3] < idle then break end
  ids[#ids + 1] = p[1]
end
if #ids == 0 then return {0} end

local out, have = {0}, {}
for _, e in ipairs(redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[2], 0, unpack(ids))) do
  if e then
    have[e[1]] = true
    out[#out + 1] = e
  end
end
-- Redis 7 drops a claimed entry the stream no longer holds from the
-- pending list by itself; other servers keep it there.
local gone = {}
for _, id in ipairs(ids) do
  if not have[id] then gone[#gone + 1] = id end
end
if #gone > 0 then
  redis.call('XACK', KEYS[1], ARGV[1], unpack(gone))
  out[1] = #gone
end
return out
