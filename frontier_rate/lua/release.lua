-- release.lua: hand back leases that were never sent (a crawler closing with
-- dispatches still in its buffer), so the pages need not wait for the lease
-- deadline. ARGV after the header: triples id, host, token, due.
-- A lease is released only while it is the page's open lease (same token, not
-- yet observed or failed): the page goes back to its host queue at its old due
-- time. The host's next dispatch time stays where the lease put it, so a
-- release never makes a host's next fetch come sooner. Returns the number released.
local released = 0
for i = H + 1, #ARGV, 4 do
  local id, host, token, due = ARGV[i], ARGV[i + 1], tonumber(ARGV[i + 2]), tonumber(ARGV[i + 3])
  local s = lib.load_checked(id, host)
  if s and s.leases == token and lib.has(s.flags, F_LEASED) then
    redis.call("ZREM", LEASES, id .. host)
    s.flags = lib.set(lib.set(s.flags, F_LEASED, false), F_APPLIED, false)
    lib.save(id, s)
    lib.enqueue(host, id, due)
    released = released + 1
  end
end
return lib.finish(released)
