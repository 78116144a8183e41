-- take_tokens.lua: the namespace's shared token bucket (not a shard script,
-- no header). KEYS[1]: hash {tokens, ts}. ARGV: now, rate (budget per second),
-- burst (bucket size), want (tokens to take; negative = give back).
-- Returns the number of whole tokens granted.
local now, rate, burst, want = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]),
  tonumber(ARGV[4])
local state = redis.call("HMGET", KEYS[1], "tokens", "ts")
local tokens, ts = tonumber(state[1]), tonumber(state[2])
if not tokens then tokens, ts = burst, now end
if now > ts then
  tokens = math.min(burst, tokens + (now - ts) * rate)
  ts = now
end
local granted = 0
if want < 0 then
  tokens = math.min(burst, tokens - want)
else
  granted = math.min(want, math.floor(tokens))
  tokens = tokens - granted
end
redis.call("HSET", KEYS[1], "tokens", string.format("%.17g", tokens),
  "ts", string.format("%.17g", ts))
return granted
