-- config.lua: a namespace's configuration hash (frontier_rate/store/namespace.py); not a
-- shard script, no header. KEYS[1]: fr:{ns}:cfg, KEYS[2]: fr:{ns}:nu (same slot).
-- cfg "explicit" lists the shared settings some process or the CLI asked for
-- (",budget,lease_timeout,"); the others hold the defaults of the process that created
-- the namespace.
-- ARGV[1] "create", then field, value pairs: write them all unless the hash
--   exists already (two processes creating one namespace at once: the first wins,
--   the second gets its values). Returns the hash as flat field, value pairs.
-- ARGV[1] "set", then setting, value pairs: change shared settings for every
--   process of the namespace and mark them explicit; count the change in nu
--   "settings" (processes read nu on every lease call and reload the settings when
--   it moved). Returns {the change count, the hash as flat field, value pairs}.
-- ARGV[1] "adopt", then setting, value pairs: the same for the settings that are
--   not explicit yet (a process asking for a value where the namespace holds a
--   default); the others stay, and the caller compares. Returns as "set" does.
local CFG, NU = KEYS[1], KEYS[2]
local mode = ARGV[1]
if mode == "create" then
  if redis.call("EXISTS", CFG) == 0 then
    redis.call("HSET", CFG, unpack(ARGV, 2))
  end
  return redis.call("HGETALL", CFG)
end
local explicit = redis.call("HGET", CFG, "explicit") or ","
local writes = {}
for i = 2, #ARGV, 2 do
  local field = ARGV[i]
  local marked = string.find(explicit, "," .. field .. ",", 1, true)
  if mode == "set" or not marked then
    writes[#writes + 1] = field
    writes[#writes + 1] = ARGV[i + 1]
    if not marked then explicit = explicit .. field .. "," end
  end
end
if #writes > 0 then
  redis.call("HSET", CFG, "explicit", explicit, unpack(writes))
  redis.call("HINCRBY", NU, "settings", 1)
end
return {redis.call("HGET", NU, "settings") or "0", redis.call("HGETALL", CFG)}
