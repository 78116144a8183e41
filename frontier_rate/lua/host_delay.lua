-- host_delay.lua: set a host's minimum delay between dispatches (seconds;
-- negative = back to the default). ARGV after the header: host, delay.
local host, delay = ARGV[H + 1], tonumber(ARGV[H + 2])
local next_allowed = lib.host_get(host)
lib.host_set(host, next_allowed, delay)
if HOST_INDEX then lib.index_sweep(host, tonumber(redis.call("ZSCORE", HOST_PAGES, host)) or 0) end
return lib.finish(1)
