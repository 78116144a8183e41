-- config.lua: a namespace's configuration hash (frontier_rate/namespace.py); not a
-- shard script, no header. KEYS[1]: fr:{ns}:cfg, KEYS[2]: fr:{ns}:nu (same slot).
-- ARGV[1] "create", then field, value pairs: write them all unless the hash
--   exists already (two processes creating one namespace at once: the first wins,
--   the second gets its values). Returns the hash as flat field, value pairs.
-- ARGV[1] "set", then field, value pairs: change shared settings for every
--   process of the namespace: write them, count the change in nu "settings"
--   (processes read nu on every lease call and reload the settings when it moved).
--   Returns the new count.
local CFG, NU = KEYS[1], KEYS[2]
local mode = ARGV[1]
if mode == "create" then
  if redis.call("EXISTS", CFG) == 0 then
    redis.call("HSET", CFG, unpack(ARGV, 2))
  end
  return redis.call("HGETALL", CFG)
end
redis.call("HSET", CFG, unpack(ARGV, 2))
return redis.call("HINCRBY", NU, "settings", 1)
