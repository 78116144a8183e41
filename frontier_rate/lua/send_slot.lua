-- send_slot.lua: reserve the next send to a host for whichever process asks, so that no two
-- requests to the host leave closer than its delay (frontier_rate/store/send_slot.py).
-- KEYS[1]: hash host -> earliest time of the host's next send (seconds on Redis's clock:
-- the caller passes its estimate of Redis's TIME, so processes on machines with different
-- clocks agree). ARGV: host, delay (seconds >= 0), now (Redis's clock, seconds).
-- Returns the seconds the caller waits before sending (0: send now), as a string.
local host, delay, now = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
if not delay or delay ~= delay or delay < 0 or delay == math.huge then
  return redis.error_reply("send_slot: delay must be a finite number >= 0")
end
if not now or now ~= now or now == math.huge or now == -math.huge then
  return redis.error_reply("send_slot: now must be a finite number")
end
local state = redis.call("HMGET", KEYS[1], host)
local taken = tonumber(state[1] or "")
-- a stored time over an hour ahead (Redis's clock stepped back) is forgotten
if not taken or taken ~= taken or taken > now + 2 * delay + 3600 then taken = 0 end
local at = math.max(now, taken)
redis.call("HSET", KEYS[1], host, string.format("%.6f", at + delay))
return string.format("%.6f", at - now)
