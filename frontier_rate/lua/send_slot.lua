-- send_slot.lua: reserve the next send to a host for whichever process asks, so that no two
-- requests to the host leave closer than its delay (frontier_rate/store/send_slot.py).
-- KEYS[1]: hash host -> earliest time of the host's next send (seconds, Redis's own clock,
-- so processes on machines with different clocks agree). ARGV: host, delay (seconds >= 0).
-- Returns the seconds the caller waits before sending (0: send now), as a string.
if redis.replicate_commands then pcall(redis.replicate_commands) end  -- Redis < 5: TIME
local t = redis.call("TIME")
local now = tonumber(t[1]) + tonumber(t[2]) / 1e6
local host, delay = ARGV[1], tonumber(ARGV[2])
if not delay or delay ~= delay or delay < 0 or delay == math.huge then
  return redis.error_reply("send_slot: delay must be a finite number >= 0")
end
local taken = tonumber(redis.call("HGET", KEYS[1], host) or "")
-- a stored time over an hour ahead (Redis's clock stepped back) is forgotten
if not taken or taken ~= taken or taken > now + 2 * delay + 3600 then taken = 0 end
local at = math.max(now, taken)
redis.call("HSET", KEYS[1], host, string.format("%.6f", at + delay))
return string.format("%.6f", at - now)
