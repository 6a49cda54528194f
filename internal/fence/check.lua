-- Fence check for resources that are not Lua scripts (lock.CheckFence, fence.Check).
-- The chunk in fence.lua is prepended.
-- KEYS[1]  fence key
-- ARGV[1]  token (decimal)
-- Reply    1 when the token is current (and is now recorded), 0 when stale.
if redkit_fence(KEYS[1], ARGV[1]) then return 1 end
return 0
