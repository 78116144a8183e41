-- due.lua: the namespace's earliest-due summary, so that a next_requests call
-- with nothing due reads one hash instead of asking every shard (not a shard
-- script, no header). KEYS[1]: hash, field "<s>" -> the earliest time shard s
-- may have work (µs: its first ready host or first lease deadline; "inf" when
-- it has none), "v<s>" -> the field's version.
-- ARGV[1] "lower": then pairs shard, t: a writer (add, observe, fail, release,
--   host delay) that may have queued work due at t; t replaces a later or
--   absent value, and the version goes up either way.
-- ARGV[1] "set": then triples shard, t, version: the earliest a shard script
--   found; it replaces the value only while the version is still the one read
--   before that script ran (no writer lowered it in between), so a summary is
--   never later than the truth except after a writer died between its shard
--   script and its "lower" (the engine rescans every shard once a second).
-- Returns the number of fields written.
local SUMMARY = KEYS[1]
local mode, written = ARGV[1], 0
if mode == "lower" then
  for i = 2, #ARGV, 2 do
    local shard, t = ARGV[i], tonumber(ARGV[i + 1])
    local old = tonumber(redis.call("HGET", SUMMARY, shard) or "")
    if not old or old ~= old or t < old then
      redis.call("HSET", SUMMARY, shard, ARGV[i + 1])
      written = written + 1
    end
    redis.call("HINCRBY", SUMMARY, "v" .. shard, 1)
  end
elseif mode == "set" then
  for i = 2, #ARGV, 3 do
    local shard, version = ARGV[i], ARGV[i + 2]
    if (redis.call("HGET", SUMMARY, "v" .. shard) or "0") == version then
      redis.call("HSET", SUMMARY, shard, ARGV[i + 1])
      written = written + 1
    end
  end
end
return written
