-- stats.lua: one shard's counters. ARGV after the header: max hosts to scan for
-- "due now". Returns flat pairs name, value (leased: leases not past their end).
local now = C.now
local limit = tonumber(ARGV[H + 1])
local due_now = 0
local hosts = redis.call("ZRANGEBYSCORE", READY, "-inf", "+inf", "LIMIT", 0, limit)
for _, host in ipairs(hosts) do
  due_now = due_now + redis.call("ZCOUNT", qkey(host), "-inf", lib.us(now))
end
local out = redis.call("HGETALL", CNT)
-- a lease past its end is no longer held: its page is due (the next lease call takes it
-- back, lib.reclaim), so it counts as due now, not as leased (issue 60)
local expired = redis.call("ZCOUNT", LEASES, "-inf", lib.us(now))
due_now = due_now + expired
out[#out + 1] = "leased"
out[#out + 1] = redis.call("ZCARD", LEASES) - expired
out[#out + 1] = "leases_expired"
out[#out + 1] = expired
out[#out + 1] = "due_now"
out[#out + 1] = due_now
out[#out + 1] = "hosts_queued"
out[#out + 1] = redis.call("ZCARD", READY)
return lib.finish(out)
