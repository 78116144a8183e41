-- take_tokens.lua: the namespace's shared token bucket (not a shard script,
-- no header). KEYS[1]: hash {tokens, ts}. ARGV: now, rate (budget per second),
-- burst (bucket size), want (tokens to take), give_back (unused tokens of an
-- earlier grant, returned first). Returns the number of whole tokens granted.
local now, rate, burst, want = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]),
  tonumber(ARGV[4])
local give_back = tonumber(ARGV[5])
local state = redis.call("HMGET", KEYS[1], "tokens", "ts")
local tokens, ts = tonumber(state[1]), tonumber(state[2])
if not tokens then tokens, ts = burst, now end
if now > ts then
  tokens = math.min(burst, tokens + (now - ts) * rate)
  ts = now
end
tokens = math.min(burst, tokens + give_back)
local granted = math.max(0, math.min(want, math.floor(tokens)))
tokens = tokens - granted
redis.call("HSET", KEYS[1], "tokens", string.format("%.17g", tokens),
  "ts", string.format("%.17g", ts))
return granted
