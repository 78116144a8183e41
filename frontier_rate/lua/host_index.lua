-- host_index.lua: build the host page index (HOST_PAGES, HOST_SWEEP in lib.lua) from
-- the host cells, once per shard: a shard from before the index, or one that has not
-- been re-solved yet. Later scripts keep it. Returns 1 when it was built now, else 0.
if HOST_INDEX then return lib.finish(0) end
redis.call("DEL", HOST_PAGES, HOST_SWEEP)
local pages = {}
local cells = redis.call("HGETALL", HOST_AGG)
for i = 1, #cells, 2 do
  local host, raw = string.match(cells[i], "^[^:]*:(.+)$"), cells[i + 1]
  if host and #raw == 24 then
    local n = struct.unpack(HOST_AGG_FORMAT, raw)
    if n == n then pages[host] = (pages[host] or 0) + n end
  end
end
for host, n in pairs(pages) do
  if n >= 0.5 then
    redis.call("ZADD", HOST_PAGES, lib.fmt(n), host)
    lib.index_sweep(host, n)
  end
end
redis.call("HSET", CNT, "hi", "1")
return lib.finish(1)
