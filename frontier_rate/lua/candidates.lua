-- candidates.lua: give expired leases back, then list dispatch candidates.
-- ARGV after the header: window (ready hosts to look at), look (due pages per host).
-- For each host that may dispatch now and has a due page, returns the due page
-- with the highest index among its `look` earliest-due ones: host, id, index.
-- Read-only apart from the lease reclaim and quarantining corrupt pages;
-- lease.lua re-checks everything.
-- Returns {flat host, id, index triples, QUARANTINED (url, reason pairs)}.
local window, look = tonumber(ARGV[H + 1]), tonumber(ARGV[H + 2])
local now = C.now
reclaim(now, 1000)
finish(nil)  -- re-score the hosts of reclaimed pages before looking at them
local out = {}
local hosts = redis.call("ZRANGEBYSCORE", READY, "-inf", us(now), "LIMIT", 0, window)
for _, host in ipairs(hosts) do
  local due = redis.call("ZRANGEBYSCORE", qkey(host), "-inf", us(now), "LIMIT", 0, look)
  local best, best_index = nil, -1
  for _, id in ipairs(due) do
    local s = load_queued(id, host)
    if s then
      local g = index(s, now)
      if g > best_index then best, best_index = id, g end
    end
  end
  if best then
    out[#out + 1] = host
    out[#out + 1] = best
    out[#out + 1] = fmt(best_index)
  end
end
return finish({out, QUARANTINED})
