-- jit.prof.pprof, the pprof (.pb.gz) writer: the encoder and gzip against
-- fixed vectors, our own output decoded here (gunzip of stored blocks and
-- a minimal protobuf reader), `go tool pprof` as the oracle on a real
-- recording of a deterministic workload, and the fields fleet tools read:
-- protoc --decode against the pprof schema (tests/profile.proto) for
-- time_nanos, duration_nanos, period, sample types, functions with file
-- and first line, and labels; go tool pprof -tags and -tagfocus on a
-- workload with two endpoints; two functions named run kept apart in -top
-- (and in folded, SVG and speedscope labels, only where the name is
-- ambiguous). Without `go` or `protoc` the test fails.
local t = require("t")
local ljprof = require("ljprof")
local model = require("jit.prof.model")
local pprof = require("jit.prof.pprof")
local bit = require("bit")

local function hex(s)
  return (s:gsub(".", function(c) return string.format("%02x", c:byte()) end))
end

local read = t.read

local write = t.write

-- A private temporary directory (HOME and PPROF_TMPDIR of go tool pprof).
local tmpdir = os.tmpname()
os.remove(tmpdir)
assert(os.execute("mkdir -p '" .. tmpdir .. "'") == 0, "mkdir " .. tmpdir)

-- Run a shell command; returns its output (stdout and stderr) and success.
local function sh(cmd)
  local out = tmpdir .. "/out.txt"
  local rc = os.execute(cmd .. " > '" .. out .. "' 2>&1")
  local text = read(out) or ""
  os.remove(out)
  return text, rc == 0 or rc == true
end

----------------------------------------------------------------------------
-- Decoding our own output.

-- gunzip of a stream whose DEFLATE data is stored blocks (what the
-- fallback writes); checks the header, CRC-32 and ISIZE.
local function gunzip_stored(gz)
  local id1, id2, cm, flg = gz:byte(1, 4)
  if id1 ~= 0x1f or id2 ~= 0x8b or cm ~= 8 then return nil, "not a gzip header" end
  if flg ~= 0 then return nil, "header flags " .. flg end
  local pos, out = 11, {}
  while true do
    local h = gz:byte(pos)
    if not h then return nil, "truncated" end
    if bit.band(h, 6) ~= 0 then return nil, "not a stored block" end
    local len = gz:byte(pos + 1) + 256 * gz:byte(pos + 2)
    local nlen = gz:byte(pos + 3) + 256 * gz:byte(pos + 4)
    if len + nlen ~= 65535 then return nil, "LEN/NLEN mismatch" end
    out[#out + 1] = gz:sub(pos + 5, pos + 4 + len)
    pos = pos + 5 + len
    if bit.band(h, 1) == 1 then break end
  end
  local data = table.concat(out)
  local function u32(i) local a, b, c, d = gz:byte(i, i + 3); return a + 256 * (b + 256 * (c + 256 * d)) end
  if pos + 7 ~= #gz then return nil, "trailing bytes or truncated trailer" end
  if u32(pos) ~= pprof.crc32(data) then return nil, "CRC-32 mismatch" end
  if u32(pos + 4) ~= #data % 4294967296 then return nil, "ISIZE mismatch" end
  return data
end

-- Minimal protobuf reader: a message as a list of {field, value}, value a
-- number (varint, non-negative here) or a string (length-delimited).
local function pb_varint(s, pos)
  local n, mul = 0, 1
  while true do
    local b = s:byte(pos)
    assert(b, "truncated varint")
    pos = pos + 1
    n = n + (b % 128) * mul
    mul = mul * 128
    if b < 128 then return n, pos end
  end
end

local function pb_fields(s)
  local r, pos = {}, 1
  while pos <= #s do
    local k
    k, pos = pb_varint(s, pos)
    local field, wt = math.floor(k / 8), k % 8
    if wt == 0 then
      local v
      v, pos = pb_varint(s, pos)
      r[#r + 1] = {field, v}
    elseif wt == 2 then
      local len
      len, pos = pb_varint(s, pos)
      assert(pos + len - 1 <= #s, "length past the end")
      r[#r + 1] = {field, s:sub(pos, pos + len - 1)}
      pos = pos + len
    else
      error("unexpected wire type " .. wt)
    end
  end
  return r
end

local function packed(s)
  local r, pos = {}, 1
  while pos <= #s do r[#r + 1], pos = pb_varint(s, pos) end
  return r
end

-- A message as {[field] = {values...}}.
local function pb_map(s)
  local m = setmetatable({}, {__index = function() return {} end})
  for _, f in ipairs(pb_fields(s)) do
    local l = rawget(m, f[1]) or {}
    m[f[1]] = l
    l[#l + 1] = f[2]
  end
  return m
end

-- Decode a Profile into plain tables.
local function decode(data)
  local m = pb_map(data)
  local P = {strings = {}, functions = {}, locations = {}, samples = {}, types = {}}
  for i, s in ipairs(m[6]) do P.strings[i - 1] = s end
  local S = P.strings
  local function vt(s) local v = pb_map(s); return {S[v[1][1] or 0], S[v[2][1] or 0]} end
  for _, s in ipairs(m[1]) do P.types[#P.types + 1] = vt(s) end
  P.period_type = m[11][1] and vt(m[11][1])
  P.period = m[12][1]
  P.duration = m[10][1]
  P.mappings = #m[3]
  P.time_nanos = m[9][1]
  P.default_type = m[14][1] and P.strings[m[14][1]]
  for _, s in ipairs(m[5]) do
    local f = pb_map(s)
    local id = f[1][1]
    assert(not P.functions[id], "duplicate function id " .. tostring(id))
    P.functions[id] = {name = S[f[2][1] or 0], system_name = S[f[3][1] or 0],
                       filename = S[f[4][1] or 0], start_line = f[5][1] or 0}
  end
  for _, s in ipairs(m[4]) do
    local l = pb_map(s)
    local id = l[1][1]
    assert(not P.locations[id], "duplicate location id " .. tostring(id))
    local lines = {}
    for _, ls in ipairs(l[4]) do
      local ln = pb_map(ls)
      lines[#lines + 1] = {function_id = ln[1][1] or 0, line = ln[2][1] or 0}
    end
    P.locations[id] = {mapping_id = l[2][1] or 0, lines = lines}
  end
  for _, s in ipairs(m[2]) do
    local sm = pb_map(s)
    local locs, vals = {}, {}
    for _, p in ipairs(sm[1]) do for _, v in ipairs(packed(p)) do locs[#locs + 1] = v end end
    for _, p in ipairs(sm[2]) do for _, v in ipairs(packed(p)) do vals[#vals + 1] = v end end
    local labels = {}
    for _, ls in ipairs(sm[3]) do
      local l = pb_map(ls)
      if l[3][1] then labels[S[l[1][1] or 0]] = l[3][1]     -- num
      else labels[S[l[1][1] or 0]] = S[l[2][1] or 0] end
    end
    P.samples[#P.samples + 1] = {locs = locs, values = vals, labels = labels}
  end
  return P
end

-- Check a decoded profile against p, the profile it was rendered from.
local function check_decoded(P, p, clock_type, period, meta)
  meta = meta or {}
  t.eq(P.strings[0], "", "string_table[0]")
  t.eq(#P.types, 2, "two sample types")
  t.eq(P.types[1] and P.types[1][1], "samples", "sample_type[0].type")
  t.eq(P.types[1] and P.types[1][2], "count", "sample_type[0].unit")
  t.eq(P.types[2] and P.types[2][1], clock_type, "sample_type[1].type")
  t.eq(P.types[2] and P.types[2][2], "nanoseconds", "sample_type[1].unit")
  t.eq(P.period_type and P.period_type[1], clock_type, "period_type.type")
  t.eq(P.period, period, "period (ns)")
  t.eq(#P.samples, #p.samples, "one Sample per aggregated entry")
  local total = 0
  for i, s in ipairs(p.samples) do
    local S = P.samples[i]
    if not S then break end
    t.eq(S.values[1], s.count, "value[0] = count")
    t.eq(S.values[2], s.count * period, "value[1] = count * period")
    total = total + (S.values[1] or 0)
    t.eq(S.labels.vmstate, model.VMNAMES[s.vmstate] or s.vmstate, "vmstate label")
    t.eq(S.labels.thread, meta.thread or "main", "thread label")
    t.eq(S.labels.zone, s.zone ~= "" and s.zone or nil, "zone label")
    for k, v in pairs(s.labels or {}) do t.eq(S.labels[k], v, "user label " .. k) end
    if #s.stack == 0 then
      -- Without a stack: one pseudo-location "[<VM state>]".
      local loc = P.locations[S.locs[1]]
      local fn = loc and P.functions[loc.lines[1].function_id]
      t.eq(#S.locs, 1, "stackless sample: one pseudo-location")
      t.eq(fn and fn.name, "[" .. (model.VMNAMES[s.vmstate] or s.vmstate) .. "]",
           "stackless sample: its function")
      t.eq(fn and fn.filename, "", "stackless sample: no file")
    else
      t.eq(#S.locs, #s.stack, "one location per frame")
    end
    for k, lid in ipairs(#s.stack > 0 and S.locs or {}) do
      -- Leaf first: location k is frame #stack - k + 1 of p's outermost-first stack.
      local fr = p.frames[s.stack[#s.stack - k + 1]]
      local loc = P.locations[lid]
      if not t.ok(loc and #loc.lines == 1, "location " .. lid .. " with one line") then break end
      t.eq(loc.mapping_id, 1, "location's mapping")
      local fn = P.functions[loc.lines[1].function_id]
      if not t.ok(fn, "function of location " .. lid) then break end
      t.eq(fn.name, model.pprof_name(fr), "frame " .. k .. " from the leaf: function name")
      t.eq(fn.system_name, model.label(fr, "f"), "system_name: the bare name")
      t.eq(fn.filename, fr.lua and fr.file or "", "function filename")
      t.eq(loc.lines[1].line, fr.lua and math.max(0, fr.line) or 0, "line")
      if fr.lua and fr.linedefined then t.eq(fn.start_line, fr.linedefined, "start_line") end
    end
  end
  t.eq(total, p.total, "sum of samples/count")
end

----------------------------------------------------------------------------
-- go tool pprof, the oracle.

local go
do
  local out, ok = sh("command -v go")
  go = ok and out:match("^(%S+)") or nil
end

local function need_go()
  if go then return true end
  t.ok(false, "`go` is not installed: go tool pprof is this test's oracle for the pprof " ..
    "writer; install it (apt-get install -y golang-go) and run again")
  return false
end

-- `go tool pprof -symbolize=none <args> file`, from the temporary directory,
-- with HOME and PPROF_TMPDIR there (pprof may save or cache files) and no
-- toolchain download. Returns output and success.
local function go_pprof(args, file)
  return sh(string.format("cd '%s' && HOME='%s' PPROF_TMPDIR='%s' GOTOOLCHAIN=local " ..
    "GOFLAGS= '%s' tool pprof -symbolize=none %s '%s'", tmpdir, tmpdir, tmpdir, go, args, file))
end

-- Function names of `-top` in order, and the total of the report.
local function top(file, args)
  local text, ok = go_pprof("-top -nodecount=50 " .. (args or ""), file)
  local names, started = {}, false
  for l in text:gmatch("[^\n]+") do
    if started then
      local name = l:match("^%s*%S+%s+%S+%s+%S+%s+%S+%s+%S+%s+(.+)$")
      if name then names[#names + 1] = name end
    elseif l:match("^%s*flat%s+flat%%") then
      started = true
    end
  end
  local total = text:match("of (%S+) total")
  return names, total, text, ok
end

-- The sum of samples/count over `-raw`'s samples.
local function raw_total(file)
  local text, ok = go_pprof("-raw", file)
  local sum, inside = 0, false
  for l in text:gmatch("[^\n]+") do
    if l:match("^samples/count ") then inside = true
    elseif l:match("^Locations") then inside = false
    elseif inside then
      local c = l:match("^%s*(%d+)%s+%d+:")
      if c then sum = sum + tonumber(c) end
    end
  end
  return sum, text, ok
end

----------------------------------------------------------------------------

t.case("varint: fixed vectors, int64 as two's complement", function()
  local v = {
    {0, "00"}, {1, "01"}, {127, "7f"}, {128, "8001"}, {300, "ac02"},
    {16383, "ff7f"}, {16384, "808001"}, {2 ^ 31, "8080808008"},
    {2 ^ 32, "8080808010"}, {2 ^ 32 + 1, "8180808010"},
    {2 ^ 53 - 1, "ffffffffffffff0f"}, {1e15, "80809aa6eaafe301"},
    {-1, "ffffffffffffffffff01"}, {-2, "feffffffffffffffff01"},
    {-2 ^ 31, "80808080f8ffffffff01"}, {-2 ^ 32, "80808080f0ffffffff01"},
  }
  for _, c in ipairs(v) do
    t.eq(hex(pprof.varint(c[1])), c[2], "varint(" .. string.format("%.0f", c[1]) .. ")")
  end
  for _, n in ipairs({0, 1, 127, 128, 300, 65535, 2 ^ 32 + 7, 123456789012345}) do
    t.eq(pb_varint(pprof.varint(n), 1), n, "round trip " .. n)
  end
  -- Nanoseconds since 1970 are above 2^53: written exactly all the same.
  t.eq(hex(pprof.varint_ns(1700000000)), "8080a8b1e39fe7cb17", "varint_ns(1700000000)")
  t.eq(hex(pprof.varint_ns(1700000000.5)), "80cadd9fe59fe7cb17", "varint_ns(1700000000.5)")
  t.eq(hex(pprof.varint_ns(4294967295.5)), "80b6ca91febfb2cd3b", "varint_ns(2^32 - 0.5)")
  t.eq(hex(pprof.varint_ns(0)), "00", "varint_ns(0)")
  t.raises(function() pprof.varint(1.5) end, "not an integer", "fractions rejected")
  t.raises(function() pprof.varint(2 ^ 60) end, "not an integer", "beyond 2^53 rejected")
end)

t.case("CRC-32 and gzip stored blocks (fallback)", function()
  t.eq(pprof.crc32(""), 0, "crc32 of nothing")
  t.eq(pprof.crc32("123456789"), 0xCBF43926, "crc32 check value")
  t.eq(pprof.crc32("The quick brown fox jumps over the lazy dog"), 0x414FA339, "crc32 fox")
  local big = {}
  for i = 1, 40000 do big[i] = string.char(i % 251, (i * 7) % 256, 65 + i % 26) end
  big = table.concat(big)                         -- 120000 bytes: two stored blocks
  for _, data in ipairs({"", "a", "hello pprof\n", string.rep("z", 65535), big}) do
    local gz, method = pprof.gzip(data, true)
    t.eq(method, "stored", "forced stored blocks")
    local back, err = gunzip_stored(gz)
    t.eq(back, data, "stored round trip of " .. #data .. " bytes (" .. tostring(err) .. ")")
    t.eq(#gz, 10 + 8 + #data + 5 * math.max(1, math.ceil(#data / 65535)), "stored size")
  end
  -- Without zlib (a copy of the module that sees an FFI whose load fails),
  -- render() falls back to stored blocks.
  local real_ffi = package.loaded.ffi
  package.loaded.ffi = {cdef = function() end, load = function() error("no libz here") end}
  package.loaded["jit.prof.pprof"] = nil
  local ok, nozlib = pcall(require, "jit.prof.pprof")
  local avail = ok and nozlib.zlib_available()
  package.loaded.ffi, package.loaded["jit.prof.pprof"] = real_ffi, pprof
  if t.ok(ok, "second copy of the module") then
    t.eq(avail, false, "zlib unavailable through a failing FFI")
    local gz, method = nozlib.gzip(big)
    t.eq(method, "stored", "fallback method")
    t.eq(gunzip_stored(gz), big, "fallback stream decodes")
  end
  -- The other path: zlib when it loads (reported), checked by gzip(1) when present.
  local gz, method = pprof.gzip(big)
  print("  zlib through the FFI: " .. (pprof.zlib_available() and "yes" or "no") ..
        ", method " .. method .. ", " .. #big .. " -> " .. #gz .. " bytes")
  t.eq(method, pprof.zlib_available() and "deflate" or "stored", "method follows zlib")
  local _, has_gzip = sh("command -v gzip")
  if has_gzip then
    local f = tmpdir .. "/big.gz"
    write(f, gz)
    local _, ok = sh("gzip -t '" .. f .. "'")
    t.ok(ok, "gzip -t accepts our stream")
    write(tmpdir .. "/big", big)
    local _, ok2 = sh("gzip -dc '" .. f .. "' | cmp - '" .. tmpdir .. "/big'")
    t.ok(ok2, "gzip -dc gives the data back")
  end
end)

-- A synthetic profile with every kind of frame: named and anonymous Lua
-- functions, a C function, a builtin, a sample without stack, a zone.
local synthetic = {
  frames = {
    {id = 1, lua = true, file = "/app/main.lua", line = 0, linedefined = 0},
    {id = 2, lua = true, file = "/app/main.lua", line = 12, name = "driver"},
    {id = 3, lua = true, file = "/app/lib.lua", line = 40, name = "work"},
    {id = 4, lua = true, file = "/app/lib.lua", line = 41, name = "work"},
    {id = 5, lua = false, name = "string.rep"},
    {id = 6, lua = true, file = "/app/lib.lua", line = 77, linedefined = 75},
    {id = 7, lua = false, name = "@0x1234"},
  },
  samples = {
    {stack = {7, 1, 2, 3}, vmstate = "I", zone = "", count = 30},
    {stack = {7, 1, 2, 4}, vmstate = "N", zone = "db", count = 12},
    {stack = {7, 1, 2, 3, 5}, vmstate = "C", zone = "", count = 5},
    {stack = {7, 1, 6}, vmstate = "I", zone = "", count = 2},
    {stack = {}, vmstate = "G", zone = "", count = 1},
  },
  total = 50,
}

t.case("synthetic profile: decoded here, leaf first, string_table[0] == \"\"", function()
  local meta = {clock = "cpu", interval_us = 10000, program = "app.lua", samples = 50, dropped = 0,
                created = 1700000000}
  local data = pprof.encode(synthetic, meta)
  local P = decode(data)
  check_decoded(P, synthetic, "cpu", 10000000)
  t.eq(P.duration, 50 * 10000000, "duration estimated from the ticks")
  t.eq(P.mappings, 1, "one mapping")
  local n = 0
  for _ in pairs(P.functions) do n = n + 1 end
  t.eq(n, 7, "functions: work's two lines share one; [Garbage Collector]")
  n = 0
  for _ in pairs(P.locations) do n = n + 1 end
  t.eq(n, 8, "locations: one per (function, line); [Garbage Collector]")
  -- render() is gzip(encode()); the stored form decodes here.
  local rendered = pprof.render(synthetic, meta)
  local stored = pprof.gzip(data, true)
  t.eq(gunzip_stored(stored), data, "stored gzip of the profile")
  if not pprof.zlib_available() then t.eq(rendered, stored, "render without zlib") end
  for _, clock in ipairs({"itimer", "wall", "thread"}) do
    local Q = decode(pprof.encode(synthetic, {clock = clock, interval_us = 1000}))
    t.eq(Q.types[2][1], (clock == "itimer") and "cpu" or "wall", "time type of clock " .. clock)
  end
  t.raises(function() pprof.encode(synthetic, {clock = "cpu"}) end, "interval_us",
    "the interval is required")

  if not need_go() then return end
  for _, v in ipairs({{"render", rendered}, {"stored", stored}}) do
    local f = tmpdir .. "/synthetic-" .. v[1] .. ".pb.gz"
    write(f, v[2])
    local names, total, text, ok = top(f, "-sample_index=samples")
    t.ok(ok, v[1] .. ": go tool pprof -top succeeds:\n" .. text)
    t.eq(total, "50", v[1] .. ": total samples/count:\n" .. text)
    t.eq(names[1], "work (/app/lib.lua)", v[1] .. ": hottest function, qualified:\n" .. text)
    t.ok(text:find("\nTime: Nov 1[45], 2023") ~= nil, v[1] .. ": time_nanos from meta.created:\n" .. text)
    t.ok(text:find("^File: app.lua\n") ~= nil, v[1] .. ": the program as main file:\n" .. text)
    local sum, rtext, rok = raw_total(f)
    t.ok(rok, v[1] .. ": go tool pprof -raw succeeds:\n" .. rtext)
    t.eq(sum, 50, v[1] .. ": -raw samples add up:\n" .. rtext)
  end
end)

-- The real thing: a recording of a deterministic workload.
jit.off()
local function heavy(n) local s = 0 for i = 1, n do s = s + i % 7 end return s end
local function light(n) local s = 0 for i = 1, n do s = s + i % 5 end return s end
local function crep(n) local s = 0 for _ = 1, n do s = s + #string.rep("abcd", 50000) end return s end
local function driver(rounds)
  local r = 0
  for _ = 1, rounds do r = r + heavy(300000) + light(120000) + crep(1) end
  return r
end

-- A function's name in pprof: "name (dir/file.lua:firstline)".
local function qname(name, f)
  local info = debug.getinfo(f, "S")
  return model.pprof_name({lua = true, file = info.source:sub(2),
                           linedefined = info.linedefined, name = name})
end

t.case("recorded workload: go tool pprof -top, -traces, -raw", function()
  ljprof.record({clock = "wall", interval = 1, depth = -model.MAX_DEPTH})
  driver(270)                                 -- about 0.5 s; never timed
  ljprof.stop()
  local st = ljprof.stats()
  local p = model.from_profile(ljprof.profile())
  print(string.format("  %d ticks, %d completed, %d dropped, %d stacks", st.ticks,
                      st.completed, st.dropped, #p.samples))
  t.ok(p.total > 50, "enough samples: " .. p.total)
  t.eq(p.total, st.completed, "summary counts = completed ticks")
  t.eq(p.total, st.ticks - st.dropped, "summary counts = ticks - dropped")
  local meta = {clock = "wall", interval_us = 1000, program = "test_pprof.lua",
                samples = st.ticks, dropped = st.dropped}
  local data = pprof.encode(p, meta)
  check_decoded(decode(data), p, "wall", 1000000)
  local file = tmpdir .. "/workload.pb.gz"
  write(file, pprof.render(p, meta))

  if not need_go() then return end
  local names, total, text, ok = top(file, "-sample_index=samples")
  t.ok(ok, "go tool pprof -top succeeds:\n" .. text)
  t.eq(tonumber(total), p.total, "pprof total samples/count = ticks:\n" .. text)
  t.eq(names[1], qname("heavy", heavy), "hottest function, with file and line:\n" .. text)
  t.eq(names[2], qname("light", light), "second hottest:\n" .. text)
  local seen = {}
  for _, n in ipairs(names) do seen[n] = true end
  t.ok(seen["string.rep"], "the C function string.rep is listed:\n" .. text)
  t.ok(seen[qname("driver", driver)], "the caller driver is listed (cumulative):\n" .. text)
  -- Time view: the total in ms is the ticks at 1 ms.
  local _, ttotal, ttext = top(file)
  -- (pprof rounds seconds to three significant digits: 3167 ticks "3.17s")
  t.ok(ttotal == p.total .. "ms" or ttotal == string.format("%gs", p.total / 1000) or
       ttotal == string.format("%.3gs", p.total / 1000),
    "pprof total time = ticks * 1 ms (" .. tostring(ttotal) .. "):\n" .. ttext)
  -- Leaf first: in -traces every stack with heavy starts at heavy, then driver.
  local tr, tok = go_pprof("-traces", file)
  t.ok(tok, "go tool pprof -traces succeeds:\n" .. tr)
  t.ok(tr:find("\n%s+%S+%s+heavy %([^\n]*%)\n%s+driver %(") ~= nil,
       "trace: heavy, then its caller driver:\n" .. tr)
  t.ok(tr:find("vmstate:%s+Interpreted") ~= nil, "vmstate label shown:\n" .. tr)
  t.ok(tr:find("thread:%s+main") ~= nil, "thread label shown:\n" .. tr)
  local sum, rtext, rok = raw_total(file)
  t.ok(rok, "go tool pprof -raw succeeds:\n" .. rtext)
  t.eq(sum, p.total, "-raw samples/count add up to the ticks")
end)
jit.on()

----------------------------------------------------------------------------
-- A real run through -jprof (the pprof file has the run's own time,
-- duration and thread): two endpoints under labels, and two functions
-- named run in two modules (chunks luacheck/main.lua, luacheck/check.lua).

local T = require("t")
local FLEET = [[
local label = require("ljprof").label
local main = assert(loadstring("local M = {}\nfunction M.run(n) local s = 0 for i = 1, n do " ..
  "s = s + i % 7 end return s end\nreturn M", "@luacheck/main.lua"))()
local check = assert(loadstring("local M = {}\nfunction M.run(n) local s = 0 for i = 1, n do " ..
  "s = s + i % 5 end return s end\nreturn M", "@luacheck/check.lua"))()
local function serve_a() local r = main.run(20000) return r end
local function serve_b() local r = check.run(10000) return r end
jit.off()
local A, B = label.set{endpoint = "/a"}, label.set{endpoint = "/b", method = "POST"}
local r = 0
for _ = 1, tonumber(arg[1]) do
  label(A); r = r + serve_a(); label()
  label(B); r = r + serve_b(); label()
end
print(r > 0)
]]
local fleet = {}
do
  write(tmpdir .. "/fleet.lua", FLEET)
  fleet.pb = tmpdir .. "/fleet.pb.gz"
  fleet.folded = tmpdir .. "/fleet.folded"
  fleet.svg = tmpdir .. "/fleet.svg"
  fleet.ss = tmpdir .. "/fleet.speedscope.json"
  fleet.t0 = os.time()
  fleet.out, fleet.ok = sh(string.format("cd '%s' && %s %s -jprof=/clock=wall/rate=1000,%s,%s,%s,%s fleet.lua 2000",
    tmpdir, T.CHILD_ENV, T.LUAJIT, fleet.pb, fleet.folded, fleet.svg, fleet.ss))
  fleet.t1 = os.time()
end

-- protoc's text format as nested tables: each field a list of values
-- (numbers, strings or messages), in order.
local function parse_text(text)
  local root, stack = {}, {}
  local cur = root
  local function add(m, k, v)
    m[k] = m[k] or {}
    table.insert(m[k], v)
  end
  for line in text:gmatch("[^\n]+") do
    line = line:match("^%s*(.-)%s*$")
    local name = line:match("^([%w_]+) {$")
    if name then
      local m = {}
      add(cur, name, m)
      stack[#stack + 1] = cur
      cur = m
    elseif line == "}" then
      cur = table.remove(stack)
    else
      local k, v = line:match("^([%w_]+): (.*)$")
      if k then
        if v:sub(1, 1) == '"' then
          v = v:sub(2, -2):gsub("\\(%d%d%d)", function(o) return string.char(tonumber(o, 8)) end)
                          :gsub("\\(.)", "%1")
        elseif v == "true" or v == "false" then
          v = v == "true"
        else
          v = tonumber(v)
        end
        add(cur, k, v)
      end
    end
  end
  return root
end

local protoc
do
  local out, ok = sh("command -v protoc")
  protoc = ok and out:match("^(%S+)") or nil
end

t.case("fleet fields: protoc --decode against the pprof schema", function()
  t.ok(fleet.ok, "the labelled workload ran under -jprof:\n" .. fleet.out)
  if not protoc then
    t.ok(false, "`protoc` is not installed: protoc --decode with the pprof schema " ..
      "(tests/profile.proto) is this test's oracle for the fields; install it " ..
      "(apt-get install -y protobuf-compiler) and run again")
    return
  end
  local proto_dir = (os.getenv("LJPROF_SRC") or ".") .. "/tests"
  local text, ok = sh(string.format("gzip -dc '%s' | '%s' --decode=perftools.profiles.Profile " ..
    "--proto_path='%s' '%s/profile.proto'", fleet.pb, protoc, proto_dir, proto_dir))
  if not t.ok(ok, "protoc --decode succeeds:\n" .. text) then return end
  local P = parse_text(text)
  local S = {}
  for i, str in ipairs(P.string_table or {}) do S[i - 1] = str end
  local function vt(m) return S[(m.type or {0})[1]] .. "/" .. S[(m.unit or {0})[1]] end
  t.eq(S[0], "", "string_table[0]")
  t.eq(#P.sample_type, 2, "two sample types")
  t.eq(vt(P.sample_type[1]), "samples/count", "sample_type[0]: samples/count")
  t.eq(vt(P.sample_type[2]), "wall/nanoseconds", "sample_type[1]: wall/nanoseconds by the clock")
  t.eq(vt(P.period_type[1]), "wall/nanoseconds", "period_type")
  t.eq(P.period[1], 1000000, "period: 1 ms in ns")
  t.eq(S[P.default_sample_type[1]], "wall", "default_sample_type")
  local tn = P.time_nanos and P.time_nanos[1] or 0
  t.ok(tn >= (fleet.t0 - 1) * 1e9 and tn <= (fleet.t1 + 1) * 1e9,
       string.format("time_nanos %.0f: the run's start, between %d and %d s", tn, fleet.t0, fleet.t1))
  local dn = P.duration_nanos and P.duration_nanos[1] or 0
  local total = 0
  for _, smp in ipairs(P.sample) do total = total + smp.value[1] end
  t.ok(dn > 0 and dn <= (fleet.t1 - fleet.t0 + 1) * 1e9,
       string.format("duration_nanos %.0f: the run's wall time", dn))
  t.ok(dn >= total * 1e6 * 0.5, string.format("duration_nanos %.0f covers most of %d ticks of 1 ms",
       dn, total))
  -- Functions: name with file and first line, the bare name as system_name.
  local runs = {}
  for _, f in ipairs(P["function"]) do
    if S[f.system_name[1]] == "run" then
      runs[#runs + 1] = {name = S[f.name[1]], file = S[f.filename[1]], start = f.start_line[1]}
    end
  end
  table.sort(runs, function(a, b) return a.name < b.name end)
  t.eq(#runs, 2, "two Functions with system_name run")
  t.eq(runs[1] and runs[1].name, "run (luacheck/check.lua:2)", "name qualified: check.lua's run")
  t.eq(runs[1] and runs[1].file, "luacheck/check.lua", "its filename")
  t.eq(runs[1] and runs[1].start, 2, "its start_line")
  t.eq(runs[2] and runs[2].name, "run (luacheck/main.lua:2)", "name qualified: main.lua's run")
  -- Labels: vmstate, thread, state, thread_id (num), and the user's.
  local seen = {}
  for _, smp in ipairs(P.sample) do
    for _, l in ipairs(smp.label or {}) do
      local k = S[l.key[1]]
      local v = l.str and S[l.str[1]] or (l.num and ("#" .. l.num[1]))
      seen[k] = seen[k] or {}
      seen[k][v] = (seen[k][v] or 0) + smp.value[1]
    end
  end
  t.ok(seen.vmstate and seen.vmstate.Interpreted, "vmstate label")
  t.ok(seen.thread and seen.thread.luajit, "thread label: the thread's name")
  t.ok(seen.state and seen.state["#1"], "state label, a number: the first Lua state")
  local tid = seen.thread_id and next(seen.thread_id)
  t.ok(tid and tid:match("^#%d+$"), "thread_id, a number label: " .. tostring(tid))
  t.ok(seen.endpoint and seen.endpoint["/a"] and seen.endpoint["/b"], "endpoint labels /a and /b")
  t.ok(seen.method and seen.method.POST, "method label of /b")
  t.eq(seen.method and seen.method.POST, seen.endpoint and seen.endpoint["/b"],
       "/b's samples carry both of its labels")
end)

t.case("go tool pprof -tags and -tagfocus slice the profile by endpoint", function()
  if not need_go() then return end
  local tags, ok = go_pprof("-tags", fleet.pb)
  t.ok(ok, "go tool pprof -tags succeeds:\n" .. tags)
  t.ok(tags:find("endpoint: Total") ~= nil, "-tags lists endpoint:\n" .. tags)
  t.ok(tags:find("%(%s*[%d.]+%%%): /a\n") ~= nil and tags:find("%(%s*[%d.]+%%%): /b\n") ~= nil,
       "-tags: /a and /b with their shares:\n" .. tags)
  t.ok(tags:find("method: Total") ~= nil and tags:find(": POST") ~= nil, "-tags: method POST")
  t.ok(tags:find("vmstate: Total") ~= nil, "-tags: vmstate")
  local a, _, atext = top(fleet.pb, "-sample_index=samples -tagfocus=endpoint=/a")
  local b, _, btext = top(fleet.pb, "-sample_index=samples -tagfocus=endpoint=/b")
  local function has(list, name) for _, n in ipairs(list) do if n == name then return true end end end
  t.ok(has(a, "run (luacheck/main.lua:2)") and has(a, "serve_a (fleet.lua:6)"),
       "-tagfocus=endpoint=/a: /a's functions:\n" .. atext)
  t.ok(not has(a, "run (luacheck/check.lua:2)") and not has(a, "serve_b (fleet.lua:7)"),
       "-tagfocus=endpoint=/a: none of /b's:\n" .. atext)
  t.ok(has(b, "run (luacheck/check.lua:2)") and not has(b, "run (luacheck/main.lua:2)"),
       "-tagfocus=endpoint=/b: only /b's run:\n" .. btext)
  -- state is a number label: =1 is state 1 (a string "1" matched nothing)
  local st1, _, s1text = top(fleet.pb, "-sample_index=samples -tagfocus=state=1")
  t.ok(has(st1, "serve_a (fleet.lua:6)"), "-tagfocus=state=1: the first state's functions:\n" .. s1text)
  local st2 = top(fleet.pb, "-sample_index=samples -tagfocus=state=2")
  t.eq(#st2, 0, "-tagfocus=state=2: nothing (one state)")
  local n, _, ntext = top(fleet.pb, "-sample_index=samples -tagfocus=endpoint=/nowhere")
  t.eq(#n, 0, "-tagfocus on no endpoint: nothing:\n" .. ntext)
end)

t.case("two functions named run: apart in -top; qualified in folded, SVG, speedscope", function()
  if need_go() then
    local names, _, text = top(fleet.pb, "-sample_index=samples")
    local found = {}
    for _, n in ipairs(names) do found[n] = true end
    t.ok(found["run (luacheck/main.lua:2)"] and found["run (luacheck/check.lua:2)"],
         "go tool pprof -top: two rows for run:\n" .. text)
  end
  -- Folded: only an ambiguous name is qualified, with the shortest path
  -- end that tells the two apart.
  local folded = read(fleet.folded) or ""
  t.ok(folded:find(";serve_a;run %(main%.lua:2%) %d+\n") ~= nil,
       "folded: main.lua's run qualified, serve_a bare:\n" .. folded)
  t.ok(folded:find(";serve_b;run %(check%.lua:2%) %d+\n") ~= nil,
       "folded: check.lua's run qualified:\n" .. folded)
  t.ok(not folded:find(";run %d") and not folded:find(";run;"), "no bare run left:\n" .. folded)
  -- SVG labels are -jp's F view (chunk:name): those differ already.
  local svg = read(fleet.svg) or ""
  t.ok(svg:find("<title>main%.lua:run\n") and svg:find("<title>check%.lua:run\n"),
       "SVG: both runs labelled apart")
  local ss = read(fleet.ss) or ""
  t.ok(ss:find('"name":"run (main.lua:2)"', 1, true) and ss:find('"name":"run (check.lua:2)"', 1, true),
       "speedscope: two frames named apart")
  -- model.names, directly: the shortest path end that tells files apart.
  local p = {frames = {
    {id = 1, lua = true, file = "/a/x/init.lua", line = 5, linedefined = 3, name = "new"},
    {id = 2, lua = true, file = "/a/y/init.lua", line = 9, linedefined = 3, name = "new"},
    {id = 3, lua = true, file = "/a/y/init.lua", line = 20, linedefined = 18, name = "new"},
    {id = 4, lua = true, file = "/a/y/init.lua", line = 21, linedefined = 18, name = "new"},
    {id = 5, lua = true, file = "/a/y/util.lua", line = 2, linedefined = 1, name = "once"},
    {id = 6, lua = false, name = "string.rep"},
  }}
  local n = model.names(p, "f")
  t.eq(n[1], "new (x/init.lua:3)", "two directories: a parent directory")
  t.eq(n[2], "new (y/init.lua:3)", "the other one")
  t.eq(n[3], "new (init.lua:18)", "the same file: its first line tells it apart")
  t.eq(n[4], n[3], "two lines of one function: one name")
  t.eq(n[5], "once", "a name used once stays bare")
  t.eq(n[6], "string.rep", "C functions by name")
  t.eq(model.names(p, "l")[1], "init.lua:5", "line labels unchanged")
  local F = model.names(p, "F")
  t.eq(F[1], "new (x/init.lua:3)", "F labels (init.lua:new twice) qualified the same way")
  t.eq(F[5], "util.lua:once", "an F label used once stays as it is")
end)

os.execute("rm -rf '" .. tmpdir .. "'")
t.done()
