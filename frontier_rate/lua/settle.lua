-- settle.lua: the crawler is done with the copies of these fetches (observed with
-- wire.SETTLE_LATER: their output went through its pipelines), so the pages' next fetches
-- are conditional again. ARGV after the header: triples id, host, token.
-- F_UNSETTLED is cleared only while `token` is the page's latest observed lease (F_APPLIED,
-- not leased again): a later fetch's copy is settled by its own call. Returns the number
-- settled.
local settled = 0
for i = H + 1, #ARGV, 3 do
  local id, host, token = ARGV[i], ARGV[i + 1], tonumber(ARGV[i + 2])
  local s = lib.load_checked(id, host)
  if s and s.leases == token and lib.has(s.flags, F_APPLIED)
      and not lib.has(s.flags, F_LEASED) and lib.has(s.flags, F_UNSETTLED) then
    s.flags = lib.set(s.flags, F_UNSETTLED, false)
    lib.save(id, s)
    settled = settled + 1
  end
end
return lib.finish(settled)
