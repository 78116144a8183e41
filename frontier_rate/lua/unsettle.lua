-- unsettle.lua: pages whose last fetch the crawler could not finish with (it stopped by
-- force while the fetch's output was still in its pipelines: docs/SCRAPY.md), so that
-- the next fetch redoes it. ARGV after the header: triples id, host, token.
-- Only the lease `token` is acted on, and only while it is the page's latest: still open
-- (the answer never reached Redis: the lease is closed as release.lua closes it) or
-- observed with this token (F_APPLIED). The page gets F_UNSETTLED (its next lease sends no
-- validators, its next observation is reported changed; observe.lua clears the flag) and
-- is queued due now. The host's next dispatch time is not moved. A page leased again,
-- observed with a later token or gone is left alone. Returns the number marked.
local marked = 0
for i = H + 1, #ARGV, 3 do
  local id, host, token = ARGV[i], ARGV[i + 1], tonumber(ARGV[i + 2])
  local s = lib.load_checked(id, host)
  if s and s.leases == token and not lib.has(s.flags, F_GONE)
      and (lib.has(s.flags, F_LEASED) or lib.has(s.flags, F_APPLIED)) then
    if lib.has(s.flags, F_LEASED) then
      redis.call("ZREM", LEASES, id .. host)
      s.flags = lib.set(s.flags, F_LEASED, false)
    end
    s.flags = lib.set(s.flags, F_UNSETTLED, true)
    lib.save(id, s)
    lib.enqueue(host, id, C.now)
    marked = marked + 1
  end
end
return lib.finish(marked)
