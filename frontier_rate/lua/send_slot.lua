-- send_slot.lua: reserve the next send to a host for whichever process asks, so that no two
-- requests to the host leave closer than its delay (frontier_rate/store/send_slot.py).
-- KEYS[1]: hash host -> "<time>,<delay>" of the host's last reserved send (seconds on Redis's
-- clock: the caller passes its estimate of Redis's TIME, so processes on machines with
-- different clocks agree) and the delay its sender asked for; an older value (one number, the
-- next free time) is read as such. KEYS[2]: zset process id -> when it last reserved.
-- ARGV: host, delay (seconds >= 0), now (Redis's clock, seconds), the caller's process id,
-- window (seconds a process counts as sending after its last reservation), settle (seconds
-- a process must have been sending before it counts in the turns of an outage), and
-- optionally "late": the caller's request left late, at ``now`` (recorded if after the last
-- send), then optionally the time the caller had reserved (see below); or "turn", then the
-- earliest time the caller may send (its own last send, unseen here, plus the delay), the
-- number of processes taking turns and the caller's place among them: the slot is the
-- start of the caller's first window of one delay at or after the free time (window k is
-- the caller's when k mod count = place; count 1: no turns). A process back from an outage
-- keeps to its turns a while (``crawl.politeness.SendGate``); the slot it sends at is the
-- one recorded here, in the same call, so a process reserving next counts from it.
-- A process id may start with the time it joined, in milliseconds of Redis's clock, and a
-- "/" (``store.send_slot.SendSlots``): ids sort in the order processes joined, and one that
-- joined less than ``settle`` seconds ago is not counted yet (an id without it always is;
-- with ``settle`` 0 every process counts at once).
-- The next send keeps the longer of both delays after the last one: a process that has not
-- read the host's Crawl-delay yet (its robots.txt fetch) never comes closer than it to a
-- send of a process that has, nor the other way round.
-- Returns {seconds the caller waits before sending (0: send now), settled processes seen
-- within the window, the caller's place among them by id (0-based; -1 while the caller
-- itself has not settled), the gap the previous sender asked for after its send (0 when
-- none is stored)}, numbers as strings.
local host, delay, now = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local sender, window = ARGV[4], tonumber(ARGV[5])
if not delay or delay ~= delay or delay < 0 or delay == math.huge then
  return redis.error_reply("send_slot: delay must be a finite number >= 0")
end
if not now or now ~= now or now == math.huge or now == -math.huge then
  return redis.error_reply("send_slot: now must be a finite number")
end
if not sender or sender == "" then
  return redis.error_reply("send_slot: a process id is needed")
end
if not window or window ~= window or window <= 0 or window == math.huge then
  return redis.error_reply("send_slot: window must be a finite number > 0")
end
local settle = tonumber(ARGV[6])
if not settle or settle ~= settle or settle < 0 or settle == math.huge then
  return redis.error_reply("send_slot: settle must be a finite number >= 0")
end
local stored = redis.call("HGET", KEYS[1], host)
if ARGV[7] == "late" then
  -- the caller's request leaves at ``now``, later than its slot (ARGV[8], when given: the
  -- time it had reserved). While no later send was reserved, the next one counts from now
  -- and the caller sends now; once one was (another request took the slot after the
  -- caller's, and would follow it closer than the delay), the caller takes the next free
  -- slot below, as a new reservation.
  local last = tonumber(string.match(stored or "", "^([^,]+),") or "")
  local mine = tonumber(ARGV[8] or "")
  if not (mine and last and last > mine + 0.001) then
    if last and last < now then
      redis.call("HSET", KEYS[1], host, string.format("%.6f,%.6f", now, delay))
    end
    return {"0", "1", "0", "0"}
  end
end
local at = now
local prior = 0
if stored then
  local last, before = string.match(stored, "^([^,]+),([^,]+)$")
  local free
  if last then
    last, before = tonumber(last), tonumber(before)
    if last and before and before == before and before >= 0 and before < math.huge then
      free = last + math.max(before, delay)
      prior = before
    end
  else
    free = tonumber(stored)
  end
  -- a time over an hour ahead (Redis's clock stepped back) is forgotten
  if free and free == free and free <= now + 2 * delay + 3600 then at = math.max(now, free) end
end
if ARGV[7] == "turn" then
  local earliest, count, place = tonumber(ARGV[8]), tonumber(ARGV[9]), tonumber(ARGV[10])
  if not earliest or earliest ~= earliest or earliest == math.huge
      or not count or count < 1 or count ~= math.floor(count)
      or not place or place < 0 or place >= count or place ~= math.floor(place) then
    return redis.error_reply("send_slot: turn needs a finite earliest time, a count >= 1 and "
                             .. "a place in [0, count)")
  end
  if earliest > at and earliest <= now + 2 * delay * count + 3600 then at = earliest end
  if count > 1 and delay > 0 then
    local period = count * delay
    at = math.ceil((at - place * delay) / period - 1e-9) * period + place * delay
  end
end
redis.call("HSET", KEYS[1], host, string.format("%.6f,%.6f", at, delay))
redis.call("ZADD", KEYS[2], now, sender)
redis.call("ZREMRANGEBYSCORE", KEYS[2], "-inf", "(" .. string.format("%.6f", now - window))
local seen = redis.call("ZRANGE", KEYS[2], 0, -1)
table.sort(seen)
local settled, place = 0, -1
for _, name in ipairs(seen) do
  local joined = tonumber(string.match(name, "^(%d+)/"))
  if not joined or settle == 0 or joined / 1000 <= now - settle then
    if name == sender then place = settled end
    settled = settled + 1
  end
end
return {string.format("%.6f", at - now), tostring(settled), tostring(place),
        string.format("%.6f", prior)}
