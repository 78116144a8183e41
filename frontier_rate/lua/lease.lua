-- lease.lua: lease chosen candidates. ARGV after the header: early ("1": pages
-- not due yet may be leased, to use budget no due page can), then pairs host, id.
-- A candidate is leased only if it is still queued and due (or early), its
-- host may dispatch now, and it is not leased: then it leaves its host queue for the
-- lease zset (deadline now + lease_timeout), its lease counter (the token)
-- goes up, and the host's next dispatch moves to now + host delay.
-- A queued candidate with a corrupt state (or one marked leased or gone), no
-- URL or malformed extras is quarantined instead. A page marked F_UNSETTLED is leased
-- without its validators (lua/unsettle.lua).
-- Returns {one string of packed leases, each "<dI2BI2I2I2I2I4" due, token, first (1: the
-- page was never fetched), lengths of host, url, etag, last_modified, meta, then the
-- 8-byte id and those five strings
-- (wire.leases); NEWLY_QUARANTINED (url, reason pairs); the shard's earliest time with
-- work (lib.lua earliest)}.
local now = C.now
local early = ARGV[H + 1] == "1"
local out = {}
-- host -> {next_allowed, stored delay} of the hosts leased from in this call: a host's
-- record and ready score are written once at the end, however many of its pages (a
-- host with delay 0) were leased
local leased_hosts = {}
-- lease set members and the ids leaving each host queue, written with one ZADD and one
-- ZREM per host at the end (taken: ids leased in this call, still in their queue until then)
local deadline, lease_members, dequeued, taken = lib.us(now + C.lease_timeout), {}, {}, {}
for i = H + 2, #ARGV, 2 do
  local host, id = ARGV[i], ARGV[i + 1]
  local next_allowed, stored_delay
  local held = leased_hosts[host]
  if held then
    next_allowed, stored_delay = held[1], held[2]
  else
    next_allowed, stored_delay = lib.host_get(host)
  end
  local due = not taken[id] and redis.call("ZSCORE", qkey(host), id)
  local s = nil
  if due then
    due = lib.seconds(due)
    s = lib.load_queued(id, host)
  end
  local url = s and redis.call("HGET", ukey(id), id)
  local etag, last_modified, meta = "", "", ""
  if s and url then etag, last_modified, meta = lib.xget(id) end
  if s and not url then
    lib.quarantine(id, host, "URL missing", redis.call("HGET", skey(id), id), false)
  elseif s and etag == nil then
    lib.quarantine(id, host, "extras are malformed", redis.call("HGET", xkey(id), id), true)
  elseif next_allowed <= now and due and (due <= now or early) and s then
    lib.push(dequeued, host, id)
    taken[id] = true
    lease_members[#lease_members + 1] = deadline
    lease_members[#lease_members + 1] = id .. host
    s.leases = (s.leases + 1) % 65536
    s.flags = lib.set(lib.set(s.flags, F_LEASED, true), F_APPLIED, false)
    lib.save(id, s)
    local delay = stored_delay
    if delay < 0 then delay = C.min_host_delay end
    leased_hosts[host] = {now + delay, stored_delay}
    local first = 0
    if s.fetches == 0 then first = 1 end
    -- the last fetch's output never got through the crawler (unsettle.lua): no validators
    if lib.has(s.flags, F_UNSETTLED) then etag, last_modified = "", "" end
    out[#out + 1] = struct.pack(LEASE_FORMAT, due, s.leases, first, #host, #url, #etag,
      #last_modified, #meta) .. id .. host .. url .. etag .. last_modified .. meta
  end
end
for i = 1, #lease_members, 1000 do
  redis.call("ZADD", LEASES, unpack(lease_members, i, math.min(i + 999, #lease_members)))
end
for host, h in pairs(leased_hosts) do
  redis.call("ZREM", qkey(host), unpack(dequeued[host]))
  lib.host_set(host, h[1], h[2])
  lib.host_rescore(host, h[1])
end
local result = lib.finish({table.concat(out), NEWLY_QUARANTINED})
result[3] = lib.earliest()
return result
