-- lib.lua: what every shard script shares, prepended to each by store.py (Scripts), with
-- lib_policy.lua, lib_hosts.lua and lib_pages.lua after it (store.LIB_FILES) and the
-- contract's generated prelude before it (frontier_rate/store/contract.py: struct layouts as
-- <NAME>_FORMAT, flags F_*, shared constants).
--
-- Every shard script gets the same KEYS (frontier_rate/store/scripts.py Keys.shard_keys;
-- contract.SHARD_KEYS):
--   KEYS[1] <prefix>ready   zset  host -> time the host may next dispatch (microseconds)
--   KEYS[2] <prefix>hosts   hash  host -> struct "<dd": next_allowed, delay (-1 = default)
--   KEYS[3] <prefix>leases  zset  id..host -> lease deadline (microseconds)
--   KEYS[4] <prefix>agg     hash  "n:c" / "l:c" / "w:c" per policy cell c
--   KEYS[5] <prefix>cnt     hash  pages, gone, fetches, changes, quarantined
-- and derives the per-bucket and per-host keys below from the same prefix
-- (they carry the shard's hash tag, so every key lies in one cluster slot;
-- contract.DERIVED_KEYS, BUCKET_KINDS, QUEUE_KIND, GROUP_KIND; tests/test_scripting.py):
--   <prefix>s:<b>  hash id -> packed page state (STATE below)
--   <prefix>u:<b>  hash id -> url
--   <prefix>x:<b>  hash id -> etag, last_modified and JSON meta (see xget)
--   <prefix>q:<host> zset id -> due time (microseconds)
--   <prefix>cg:<host><template> zset id -> last fetch (microseconds; 0: never), the pages
--                  of a URL group, kept only with C.cochange (lua/signals.lua)
--   <prefix>bad    hash id -> quarantine record (see quarantine)
--   <prefix>m:<b>  hash id -> change pattern of pages with dated changes (PATTERN)
--   <prefix>sg     hash id -> latest claim of a sitemap, feed or push (lua/signals.lua)
--   <prefix>st     hash host|source -> whether that source is believed (lua/signals.lua)
-- ARGV[1..H] is the header (C below); a script's own arguments follow.
-- Every script starts with lib.start() (store.py puts the call in front of its own code).
--
-- Two ways to run (frontier_rate/store/scripting.py):
-- * EVALSHA (Redis < 7): the library's text runs at every call in front of the script,
--   so everything it defines is made anew each time: about 55 closures and a few
--   tables, some 20 µs of a call's set-up (docs/ARCHITECTURE.md, the Lua boundary).
-- * Redis Functions (Redis >= 7): the library is loaded once (FUNCTION LOAD) and its
--   functions stay; only the block between "per call: begin" and "per call: end" below
--   runs at each call. The runner declares that block's locals ahead of it and makes
--   the block the body of a function setup(KEYS, ARGV) (its "local " words dropped, a
--   declaration without a value dropped whole), so the block may hold only assignments
--   (under conditions too) of values derived from KEYS, ARGV and Redis; no function
--   definitions. Its variables then keep their values from call to call: the block
--   works out again only what changed (the keys when KEYS[1] did, the settings when the
--   header did) and reads the bucket layout from Redis every time.
-- The functions are fields of one table, `lib`, so that a script names what it takes
-- from here (lib.finish, ...); the locals they capture are declared in the order that
-- keeps closing over them cheap (the library and the standard functions last). Each
-- function says which Python code it mirrors; frontier_rate/store/wire.py is the Python side
-- of every format.

-- H: the header's length (ARGV[1..H], C below)
local H = 23

-- The last parsed header, kept from call to call by a Functions library (an EVAL script
-- keeps nothing: its LAST_C is nil at every call): a call whose header equals the last one
-- but for `now` (the common case: a process sends the same settings every time) takes the
-- parsed table again, with only `now` read, instead of 18 tonumber calls and a new table,
-- and the cell layout (CELLS) parsed once for its text. The header's last field is a
-- digest of the others, so the test is one comparison of interned strings (a pointer
-- test). C is never written by a script.
local LAST_C, LAST_CELLS_TEXT, LAST_CELLS = nil, nil, nil
local LAST_KEY, LAST_SETTINGS = nil, nil  -- KEYS[1] and C of the last call (below)
local LAST_LAYOUT = {}  -- the last call's bucket layout fields "bl", "bs" and its C (below)
local CELL_NAMES = {}   -- cell -> its decimal name, formatted once (lib.add_to_cell)
-- The per-call tables: made when the library loads (or an EVAL script starts), and in a
-- Functions library made again only after a call that used them (the per-call block, and
-- lib.finish through emptied).
local AGG_DELTA, HOST_DELTA = {}, {}  -- cell -> {n, Σλ, Σw}; "<cell>:<host>" -> {.., host}
local HOST_NU_READ = {}  -- host -> its nu_h, read once per script call
local HOST_POOLS = {}   -- host -> {n, sum, changed}: its pooled prior
local DIRTY_HOSTS = {}  -- hosts whose queue head changed: re-scored once in READY
local QUEUE_HEADS = {}  -- host -> {id, score} of its queue head as this call saw it
-- NEWLY_QUARANTINED collects url, reason of every page quarantined by this call, for
-- the caller to log (every script that may quarantine returns it: wire.quarantined).
local NEWLY_QUARANTINED = {}
-- t itself when it is empty, else a new empty table (no allocation for an unused one).
local function emptied(t)
  if next(t) == nil then return t end
  return {}
end
-- header_again: the last parsed header when this call's digest (ARGV[H], wire.header_digest:
-- a hash of fields 2..H-1 made by the Python side) is the last call's, with `now` read.
local function header_again(argv)
  if not LAST_C or argv[H] ~= LAST_C.digest then return nil end
  LAST_C["now"] = tonumber(argv[1])
  return LAST_C
end

-- per call: begin (what this block may hold: above) ---------------------------
-- What derives from KEYS[1] and from the header is worked out again only when they
-- differ from the last call's (LAST_KEY, and the header table header_again returns):
-- a Functions library keeps these variables from call to call, so a process that sends
-- the same keys and settings every time pays one string test and the header test here.
-- An EVAL script keeps nothing (LAST_KEY and LAST_C stay nil): it works all out each call.
local READY, HOSTS, LEASES, AGG, CNT = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local PREFIX, BAD, HOST_PRIOR, HOST_AGG, HOST_NU
local DATES, HOST_PAGES, HOST_SWEEP, SIGNAL_PAGES, SIGNAL_TRUST, COCHANGE, PROBE, SHARD
-- BUCKET_KEYS: the hash key of bucket b of a kind ("s:", "u:", "x:", "m:"), built once
-- for its prefix (no number formatting and string building per HGET/HSET; bkey).
local BUCKET_KEYS
if KEYS[1] ~= LAST_KEY then
  -- Keys
  PREFIX = string.sub(KEYS[1], 1, -6)
  BAD = PREFIX .. "bad"
  HOST_PRIOR = PREFIX .. "hr"
  HOST_AGG = PREFIX .. "ha"
  HOST_NU = PREFIX .. "hnu"
  DATES = PREFIX .. "lm"
  HOST_PAGES, HOST_SWEEP = PREFIX .. "hp", PREFIX .. "hs"
  SIGNAL_PAGES, SIGNAL_TRUST = PREFIX .. "sg", PREFIX .. "st"
  COCHANGE = PREFIX .. "cc"
  PROBE = PREFIX .. "probe"
  SHARD = string.match(PREFIX, ":(%d+)}:$") or "?"
  BUCKET_KEYS = {}  -- kind -> bucket -> key
  LAST_KEY = KEYS[1]
end

-- The header: ARGV[1..H], the same fields for every shard script, named as
-- frontier_rate/store/wire.py HEADER names them, in the same order (tests/test_store.py
-- checks that the two lists agree).
local C = header_again(ARGV)
if not C then
  C = {
  now = tonumber(ARGV[1]), nu = tonumber(ARGV[2]), objective = ARGV[3], policy = ARGV[4],
  estimator = ARGV[5], min_interval = tonumber(ARGV[6]), max_interval = tonumber(ARGV[7]),
  eta = tonumber(ARGV[8]), beta = tonumber(ARGV[9]), omega = tonumber(ARGV[10]),
  interval_prior_info = tonumber(ARGV[11]), interval_max_step = tonumber(ARGV[12]),
  min_host_delay = tonumber(ARGV[13]), lease_timeout = tonumber(ARGV[14]),
  buckets = tonumber(ARGV[15]), log_prior_rate = tonumber(ARGV[16]), cells = ARGV[17],
  server_clock_rate = tonumber(ARGV[18]), cochange = ARGV[19] == "1",
  group_prior = ARGV[20] == "1", worth_y = tonumber(ARGV[21]), namespace_id = ARGV[22],
  digest = ARGV[23],
  }
  LAST_C = C
end

-- What the settings decide, for the header table C (again only when C is a new table).
-- Page state (contract.STRUCTS STATE, wire.STATE): 48 bytes; 64 for `interval`, still
-- within the default 64-byte limit of the compact hash encoding: weight (float32), est,
-- aux, p (float32, the crawl rate of the pending draw), last_fetch, fetches, changes,
-- leases (uint16, the lease token), fingerprint digest (4 bytes), flags,
-- fails = consecutive failures (low 4 bits) + 16 * consecutive 404/410.
-- est/aux: LLN x_k / S_k, SA y_k / unused, SAM z_k / z_{k-1},
-- interval log-rate / T0 plus x1, x2 = changed score B / curvature H.
-- Policy cell of a page (policy.cell_of): log-spaced bins of weight and rate (CELLS).
-- The bin layout comes from the namespace's configuration (C.cells:
-- "w_log10_min,w_per_decade,w_bins,r_log10_min,r_per_decade,r_bins"), fixed
-- when the namespace was created so that pages leave the cell they entered.
local FRESHNESS, WHITTLE, INTERVAL, STATE, STATE_SIZE, RATE_EST, SUM_AUX, MIN_RATE, CELLS
if C ~= LAST_SETTINGS then
  FRESHNESS = C.objective == "freshness"   -- else "changes"
  WHITTLE = C.policy == "whittle"          -- else "lagrangian"
  INTERVAL = C.estimator == "interval"
  STATE = STATE_FORMAT
  if INTERVAL then STATE = STATE_INTERVAL_FORMAT end
  STATE_SIZE = struct.size(STATE)
  RATE_EST = C.estimator == "lln" or C.estimator == "sa"  -- est is a rate (>= 0)
  SUM_AUX = C.estimator == "lln" or INTERVAL               -- aux is a sum (>= 0)
  -- the lowest rate a page plans with (lib.plan_rate): one change per max_interval for the
  -- estimators whose estimate is 0 after unchanged fetches (lln, sa, sam); the interval
  -- estimator's is a posterior that never reaches 0 and is floored INTERVAL_FLOOR_SPAN times
  -- lower (index.INTERVAL_FLOOR_SPAN, issue 35): at 1/max_interval every page that never
  -- changed planned as if it changed monthly, and took most of a web-like crawl's budget
  MIN_RATE = 1 / C.max_interval
  if INTERVAL then MIN_RATE = MIN_RATE / INTERVAL_FLOOR_SPAN end
  CELLS = LAST_CELLS
  if C.cells ~= LAST_CELLS_TEXT then
    CELLS = {}
    for v in string.gmatch(C.cells, "[^,]+") do CELLS[#CELLS + 1] = tonumber(v) end
    LAST_CELLS_TEXT, LAST_CELLS = C.cells, CELLS
  end
  LAST_SETTINGS = C
end

-- Bucket layout: linear hashing, so the bucket hashes grow online and stay
-- compact (store.bucket_of mirrors it). CNT holds the shard's level "bl" and
-- split pointer "bs": with NB = buckets * 2^level, a page goes to h mod NB, or
-- to h mod 2NB when that is below the split pointer (its bucket was split).
-- A namespace from before the layout grew has neither field: level 0, split 0,
-- exactly its old fixed layout, so old data needs no migration. Read at every call:
-- another call may have split a bucket; worked out again when its two fields or the
-- settings differ from the last call's (LAST_LAYOUT).
local LAYOUT = redis.call("HMGET", CNT, "bl", "bs", "hi", "id")
local LEVEL, SPLIT, NB
if LAYOUT[1] ~= LAST_LAYOUT[1] or LAYOUT[2] ~= LAST_LAYOUT[2] or C ~= LAST_LAYOUT[3] then
  LEVEL, SPLIT = math.floor(tonumber(LAYOUT[1]) or 0), math.floor(tonumber(LAYOUT[2]) or 0)
  if LEVEL < 0 or LEVEL > 24 then LEVEL, SPLIT = 0, 0 end
  NB = C.buckets * 2 ^ LEVEL
  if SPLIT < 0 or SPLIT >= NB then LEVEL, SPLIT, NB = 0, 0, C.buckets end
  LAST_LAYOUT = {LAYOUT[1], LAYOUT[2], C}
end

-- Per-call state, written back by lib.finish(): the tables declared above the block,
-- new ones where the last call left entries (a call that failed half-way, or a table
-- lib.finish does not empty)
if next(AGG_DELTA) then AGG_DELTA = {} end
if next(HOST_DELTA) then HOST_DELTA = {} end
if next(HOST_NU_READ) then HOST_NU_READ = {} end
if next(HOST_POOLS) then HOST_POOLS = {} end
if next(DIRTY_HOSTS) then DIRTY_HOSTS = {} end
if next(QUEUE_HEADS) then QUEUE_HEADS = {} end
if next(NEWLY_QUARANTINED) then NEWLY_QUARANTINED = {} end
local HOST_NU_ANY = nil  -- whether any host has its own threshold (HLEN, once per call)
local HOST_INDEX = LAYOUT[3] == "1"  -- the host page index is kept (HOST_PAGES, HOST_SWEEP)
-- per call: end -------------------------------------------------------------

-- Keys of buckets and host queues ---------------------------------------------
local function bucket_of(id)
  local h = struct.unpack(">I4", id)
  local b = h % NB
  if b < SPLIT then b = h % (2 * NB) end
  return b
end
local function bkey(kind, b)
  local keys = BUCKET_KEYS[kind]
  if not keys then
    keys = {}
    BUCKET_KEYS[kind] = keys
  end
  local key = keys[b]
  if not key then
    key = PREFIX .. kind .. b
    keys[b] = key
  end
  return key
end
local function skey(id) return bkey("s:", bucket_of(id)) end
local function ukey(id) return bkey("u:", bucket_of(id)) end
local function xkey(id) return bkey("x:", bucket_of(id)) end
local function mkey(id) return bkey("m:", bucket_of(id)) end
local function qkey(host) return PREFIX .. "q:" .. host end

-- Constants -----------------------------------------------------------------
-- F(y) = 1 - (1 + y) e^{-y} (lib.index_curve): the coefficients of its Taylor series, cut
-- after the F_TERMS[1 - e] terms that still matter in double precision for y < 2^e
-- (policy._F_TERMS: 18 terms just below 1, 2 from 2^-26 down).
local F_COEF = {0.5, -0.33333333333333331, 0.125, -0.033333333333333333,
  0.0069444444444444441, -0.0011904761904761906, 0.00017361111111111112,
  -2.2045855379188714e-05, 2.4801587301587302e-06, -2.5052108385441718e-07,
  2.296443268665491e-08, -1.9270852604185937e-09, 1.4911969277048643e-10,
  -1.0706029224547743e-11, 7.1692159985810778e-13, -4.498331606952833e-14,
  2.6552651846596585e-15, -1.4797143443923793e-16, 7.8096034842931133e-18,
  -3.9145882126782523e-19, 1.8683261924146203e-20, -8.5099743753875053e-22}
local F_TERMS = {18, 15, 12, 10, 9, 8, 7, 6, 6, 5, 5, 5, 4, 4, 4, 4, 4, 3, 3, 3, 3, 3, 3, 3,
  3, 3, 2}

-- A value's bin (policy._bin): floor((log10 x - log10_min) * per_decade), clamped
-- to [0, n_bins - 1] (as math.min(n_bins - 1, math.max(0, b)) would: 0 for x <= 0).
local function bin(x, log10_min, per_decade, n_bins)
  if x <= 0 then return 0 end
  local b = math.floor((math.log10(x) - log10_min) * per_decade)
  if not (b > 0) then b = 0 end
  if not (b < n_bins - 1) then b = n_bins - 1 end
  return b
end

local PRIOR_PAGES = 2  -- pseudo-pages of the namespace prior in a pool (lib.host_log_prior)
local GROW_LOAD = 48   -- pages per bucket above which a shard splits a bucket (lib.grow)
-- the change pattern (lib.pattern_get and after; DECAY, MIN_WEIGHT, MIN_R, BURST_* come
-- from the prelude: pattern.py)
-- (PATTERN_SIZE: the prelude)
local PATTERN = PATTERN_FORMAT
local PERIODS = {3600, 86400, 604800}
local TWO_PI = 6.283185307179586  -- 2 * math.pi (no math while a Functions library loads)

-- The library, and the standard functions it uses most, declared last: every function
-- below captures them, and a closure finds the upvalues declared last first. Redis 7.0
-- lets a Functions library read no global (math, struct, string) while it loads: the
-- runner makes the block below a function its functions call on their first call.
-- on first call: begin -------------------------------------------------------
local floor, min, max, exp, log, huge = math.floor, math.min, math.max, math.exp, math.log,
  math.huge
local spack, sunpack, sformat = struct.pack, struct.unpack, string.format
-- on first call: end ---------------------------------------------------------

local lib = {}
-- a URL group's pages (lua/signals.lua, co-change): a field, not a local like qkey (a
-- script's main function may hold 200 locals)
function lib.gkey(group) return PREFIX .. "cg:" .. group end

-- Small helpers ---------------------------------------------------------------

function lib.has(flags, bit) return floor(flags / bit) % 2 == 1 end
function lib.set(flags, bit, on)
  if lib.has(flags, bit) == on then return flags end
  if on then return flags + bit end
  return flags - bit
end

function lib.fmt(x) return sformat("%.17g", x) end

-- One check of a trust tally t = {checks, failed checks} (Last-Modified dates per host in
-- observe.lua, sources per host in signals.lua): counts it; a tally is ignored while more
-- than 1 in `ratio` checks failed, and CNT's `counter` counts the tallies now ignored.
-- Returns 1 when this check made it ignored, 2 when it made it trusted again, else 0.
function lib.tally_check(t, good, ratio, counter)
  local before = t[2] * ratio > t[1]
  t[1] = t[1] + 1
  if not good then t[2] = t[2] + 1 end
  local after = t[2] * ratio > t[1]
  if after == before then return 0 end
  redis.call("HINCRBY", CNT, counter, after and 1 or -1)
  return after and 1 or 2
end

-- Append value to the list map[key], made on first use.
function lib.push(map, key, value)
  local list = map[key]
  if not list then
    list = {}
    map[key] = list
  end
  list[#list + 1] = value
end

-- Zset scores (due times, ready times, lease deadlines) are whole microseconds:
-- integers are stored and compared natively in compact zsets (no string scores)
-- (wire.us).
function lib.us(t)
  local x = floor(t * 1e6 + 0.5)
  -- "%d" writes the same digits as "%.17g" below 2^53, at half the cost
  if x > -9007199254740992 and x < 9007199254740992 then return sformat("%d", x) end
  return sformat("%.17g", x)
end
function lib.seconds(score) return tonumber(score) / 1e6 end


-- Validation (mirrors wire.unpack_state, same checks in the same order, same
-- words): a state read from Redis is checked before any script uses it, so one
-- corrupted value can never make a whole batch fail. Returns the state table,
-- or nil and the problem.

function lib.number_problem(name, x, non_negative)
  if x ~= x or x == huge or x == -huge then return name .. " is not a finite number" end
  if non_negative and x < 0 then return name .. " is negative" end
  return nil
end

function lib.validate(raw)
  if #raw ~= STATE_SIZE then
    return nil, "state is " .. #raw .. " bytes, expected " .. STATE_SIZE
  end
  local weight, est, aux, p, last_fetch, fetches, changes, leases, fp, flags, fails, x1, x2 =
    sunpack(STATE, raw)
  -- one constructor: the table is sized once instead of growing field by field
  local s = {weight = weight, est = est, aux = aux, p = p, last_fetch = last_fetch,
    fetches = fetches, changes = changes, leases = leases, fp = fp, flags = flags,
    fails = fails % 16, notfound = floor(fails / 16), x1 = x1, x2 = x2}
  -- x - x == 0: x is finite; the checks below name the problem only when one of these fails
  local problem = nil
  if not (weight >= 0 and weight < huge and est - est == 0 and (est >= 0 or not RATE_EST)
      and aux - aux == 0 and (aux >= 0 or not SUM_AUX) and p >= 0 and p < huge
      and last_fetch - last_fetch == 0) then
    local number_problem = lib.number_problem
    problem = number_problem("weight", s.weight, true)
      or number_problem("estimate", s.est, RATE_EST)
      or number_problem("aux", s.aux, SUM_AUX)
      or number_problem("p", s.p, true)
      or number_problem("last_fetch", s.last_fetch, false)
  end
  if not problem and INTERVAL then
    problem = lib.number_problem("x1", s.x1, true) or lib.number_problem("x2", s.x2, true)
  end
  if problem then return nil, problem end
  if fetches > 0 and p <= 0 then return nil, "p is not positive after a fetch" end
  if changes > fetches then return nil, "changes exceed fetches" end
  if flags >= FLAGS_END then return nil, "flags " .. flags .. " out of range" end
  return s
end

-- The page's state: s; or nil, problem, raw when the stored value is corrupt; nil when absent.
function lib.load_state(id)
  local raw = redis.call("HGET", skey(id), id)
  if not raw then return nil end
  local s, problem = lib.validate(raw)
  return s, problem, raw
end

function lib.save(id, s)
  local fails = min(s.fails, 15) + 16 * min(s.notfound, 15)
  redis.call("HSET", skey(id), id, spack(STATE, s.weight, s.est, s.aux, s.p,
    s.last_fetch, s.fetches, s.changes, s.leases, s.fp, s.flags, fails, s.x1 or 0, s.x2 or 0))
end

