-- stats.lua: one shard's counters. ARGV after the header: max hosts to scan for
-- "due now". Returns flat pairs name, value.
local now = C.now
local limit = tonumber(ARGV[H + 1])
local due_now = 0
local hosts = redis.call("ZRANGEBYSCORE", READY, "-inf", "+inf", "LIMIT", 0, limit)
for _, host in ipairs(hosts) do
  due_now = due_now + redis.call("ZCOUNT", qkey(host), "-inf", lib.us(now))
end
local out = redis.call("HGETALL", CNT)
out[#out + 1] = "due_now"
out[#out + 1] = due_now
out[#out + 1] = "leased"
out[#out + 1] = redis.call("ZCARD", LEASES)
out[#out + 1] = "hosts_queued"
out[#out + 1] = redis.call("ZCARD", READY)
return lib.finish(out)
