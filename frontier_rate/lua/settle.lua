-- settle.lua: the crawler is done with the copies of these fetches (observed with
-- wire.SETTLE_LATER: their output went through its pipelines), so the pages' next fetches
-- are conditional again. ARGV after the header: triples id, host, token.
-- F_UNSETTLED is cleared only while `token`'s copy is the page's latest: the lease observed
-- last (F_APPLIED), or the one before the lease now open (the page fell due before the
-- settle came: that fetch went without validators, but its answer is not reported changed
-- for it). A later fetch's copy is settled by its own call. Returns the number settled.
local settled = 0
for i = H + 1, #ARGV, 3 do
  local id, host, token = ARGV[i], ARGV[i + 1], tonumber(ARGV[i + 2])
  local s = lib.load_checked(id, host)
  local leased = s and lib.has(s.flags, F_LEASED)
  if s and lib.has(s.flags, F_UNSETTLED) and (
      (s.leases == token and lib.has(s.flags, F_APPLIED) and not leased)
      or (leased and s.leases == (token + 1) % 65536)) then
    s.flags = lib.set(s.flags, F_UNSETTLED, false)
    lib.save(id, s)
    settled = settled + 1
  end
end
return lib.finish(settled)
