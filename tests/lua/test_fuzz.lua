-- Fuzzing the inputs users and files give ljprof: a deterministic mutation
-- loop (fixed seed; LJPROF_FUZZ_CASES multiplies the counts) over
--   * the raw profile reader, then every format rendered from whatever it
--     accepts: each case must end in one line "<file>:<line>: expected
--     ..." or in output of every format; a Lua error anywhere else, an
--     error of another shape or a render failure is a finding, saved under
--     the build directory for reproduction;
--   * the -jprof option parser (jit.prof.parse_options): a run description
--     or one line "jit.prof: ...";
--   * the LJPROF parser (jit.prof.auto.parse, shared by -l ljprof.auto and
--     LD_PRELOAD): a run description, nil (off) or one line "ljprof:
--     LJPROF: ...; not profiling", within a second;
--   * ljprof.record{...} option tables: a run (stopped at once) or one line
--     "ljprof: ...".
-- Then a few mutated files through the real `ljprof report` command: one
-- line on stderr, exit status 2, no traceback. Fixed inputs that once
-- broke the reader are checked first, by name.
local t = require "t"
local raw = require "jit.prof.raw"
local output = require "jit.prof.output"
local model = require "jit.prof.model"
local prof = require "jit.prof"
local ljprof = require "ljprof"

local LUAJIT, BUILD, ENV = t.LUAJIT, t.BUILD, t.CHILD_ENV
local SCALE = tonumber(os.getenv("LJPROF_FUZZ_CASES") or "") or 1
local FINDINGS = BUILD .. "/fuzz-findings"

local function q(s) return "'" .. s:gsub("'", "'\\''") .. "'" end

-- xorshift32, fixed seed: the same cases on every run and machine
local seed = 2463534242
local function rnd(n)
  seed = bit.bxor(seed, bit.lshift(seed, 13))
  seed = bit.bxor(seed, bit.rshift(seed, 17))
  seed = bit.bxor(seed, bit.lshift(seed, 5))
  return (seed % n + n) % n + 1
end
local function pick(list) return list[rnd(#list)] end

local saved = 0
os.execute("rm -rf " .. q(FINDINGS))
local function save(kind, input, why)
  saved = saved + 1
  if saved <= 20 then
    os.execute("mkdir -p " .. q(FINDINGS))
    local path = string.format("%s/%s-%d.txt", FINDINGS, kind, saved)
    local f = io.open(path, "wb")
    if f then
      f:write(input)
      f:close()
    end
    io.stderr:write("  finding (", kind, "): ", tostring(why):match("^[^\n]*"), " -> ", path, "\n")
  end
end

-- -- Seed profiles: real runs ----------------------------------------------

local dir = os.tmpname()
os.remove(dir)
assert(os.execute("mkdir -p " .. q(dir)) == 0)
local seeds = {}
local progs = {
  {"zones, calls", [[
local zone = require("jit.zone")
local function leaf(n) local s = 0 for i = 1, n do s = s + i % 7 end return s end
local function mid(n) return leaf(n) + #tostring(n) end
for k = 1, 300 do zone("A") mid(2e4) zone() zone("B") leaf(1e4) zone() end
]], "/calls=on"},
  {"native frames, aborts", [[
local ffi = require("ffi")
ffi.cdef("double sin(double);")
local function f(n) local s = 0 for i = 1, n do s = s + ffi.C.sin(i) + #string.rep("x", i % 5) end return s end
local function g(n) local s = 0 for i = 1, n do local h = function() return i end s = s + h() end return s end
for k = 1, 100 do f(2e4) g(2e3) end
]], ""},
  {"labels (raw version 4), two functions of one name", [[
local label = require("ljprof").label
local a = loadstring("local M = {} function M.run(n) local s = 0 for i = 1, n do " ..
  "s = s + i % 7 end return s end return M", "@x/init.lua")()
local b = loadstring("local M = {} function M.run(n) local s = 0 for i = 1, n do " ..
  "s = s + i % 5 end return s end return M", "@y/init.lua")()
for k = 1, 300 do
  label({endpoint = "/a", tab = "t\tb"}, a.run, 2e4)
  label{endpoint = "/b"} b.run(1e4) label()
end
]], ""},
}
for i, pr in ipairs(progs) do
  local script, out = dir .. "/seed" .. i .. ".lua", dir .. "/seed" .. i .. ".ljprof"
  local f = assert(io.open(script, "w"))
  f:write(pr[2])
  f:close()
  os.execute(ENV .. LUAJIT .. " -jprof=/format=raw/clock=wall/rate=2000" .. pr[3] .. "," ..
             q(out) .. " " .. q(script) .. " >/dev/null 2>&1")
  local g = io.open(out, "rb")
  local data = g and g:read("*a")
  if g then g:close() end
  t.ok(data and raw.parse(data, "seed"), "seed profile " .. pr[1] .. " was written and reads back")
  if data then seeds[#seeds + 1] = data end
end
assert(#seeds > 0, "no seed profiles")

-- -- The raw reader, then every format -----------------------------------------

local FORMATS = model.FORMATS
local VIEWS = {"f", "Fl", "zf", "vf", "G", "-3", "pl", "a", "F"}

-- Check one raw input; returns "error", "ok", or nil and why (a finding).
local function check_raw(data, formats)
  local okp, p, meta = pcall(raw.parse, data, "fuzz.ljprof")
  if not okp then return nil, "the reader raised: " .. tostring(p) end
  if not p then
    local msg = tostring(meta)
    if msg:find("\n") or not msg:match("^fuzz%.ljprof:%d+: expected .+, got '.*'$") then
      return nil, "not one line of the expected shape: " .. msg
    end
    return "error"
  end
  for _, fmt in ipairs(formats or FORMATS) do
    local okr, out, err = pcall(output.render, p, meta, fmt,
                                {view = pick(VIEWS), zones = rnd(2) == 1})
    if not okr then return nil, fmt .. " raised: " .. tostring(out) end
    if type(out) ~= "string" then return nil, fmt .. " failed: " .. tostring(err) end
  end
  return "ok"
end

local NUMS = {"0", "-1", "1e308", "inf", "-inf", "nan", "9007199254740993", "18446744073709551616",
              "0x10", "1.5", "", "-", "  3", "3 ", "99999999999999999999", "2147483648"}
local WORDS = {"meta", "frame", "sample", "call", "function", "abort", "end", "L", "C", "native",
               "N", "I", "C", "G", "J", "X", "interval_us", "clock", "samples", "\\", "\\t", "\\x"}

local function lines_of(s)
  local t, pos = {}, 1
  while true do
    local e = s:find("\n", pos, true)
    if not e then break end
    t[#t + 1] = s:sub(pos, e - 1)
    pos = e + 1
  end
  return t
end

local function mutate(data)
  local ls = lines_of(data)
  if #ls == 0 or #data == 0 then return data .. pick(WORDS) .. "\t" .. pick(NUMS) .. "\n" end
  local k = rnd(12)
  if k == 1 then              -- flip bytes
    for _ = 1, rnd(4) do
      local i = rnd(#data)
      data = data:sub(1, i - 1) .. string.char(rnd(256) - 1) .. data:sub(i + 1)
    end
    return data
  elseif k == 2 then          -- delete a line
    table.remove(ls, rnd(#ls))
  elseif k == 3 then          -- duplicate a line
    local i = rnd(#ls)
    table.insert(ls, rnd(#ls), ls[i])
  elseif k == 4 or k == 5 then -- replace a field with an extreme number
    local i = rnd(#ls)
    local f = {}
    for x in (ls[i] .. "\t"):gmatch("(.-)\t") do f[#f + 1] = x end
    f[rnd(#f)] = pick(NUMS)
    ls[i] = table.concat(f, "\t")
  elseif k == 6 then          -- replace a field with a word
    local i = rnd(#ls)
    local f = {}
    for x in (ls[i] .. "\t"):gmatch("(.-)\t") do f[#f + 1] = x end
    f[rnd(#f)] = pick(WORDS)
    ls[i] = table.concat(f, "\t")
  elseif k == 7 then          -- truncate anywhere
    return data:sub(1, rnd(#data))
  elseif k == 8 then          -- swap two lines
    local i, j = rnd(#ls), rnd(#ls)
    ls[i], ls[j] = ls[j], ls[i]
  elseif k == 9 then          -- splice another seed's lines in
    local o = lines_of(pick(seeds))
    local i = rnd(#o)
    table.insert(ls, rnd(#ls), o[i])
  elseif k == 10 then         -- drop or add fields
    local i = rnd(#ls)
    if rnd(2) == 1 then ls[i] = ls[i]:gsub("\t[^\t]*$", "") else ls[i] = ls[i] .. "\t" .. pick(NUMS) end
  elseif k == 11 then         -- CRLF, NUL bytes, a huge line
    local i = rnd(#ls)
    ls[i] = pick({ls[i] .. "\r", ls[i] .. "\0", ls[i] .. string.rep("x", 70000)})
  else                        -- change the stack of a sample
    for i = 1, #ls do
      if ls[i]:find("^sample\t") and rnd(3) == 1 then
        local l, k = ls[i], #ls[i]  -- the stack is the last field
        while k > 0 and l:byte(k) ~= 9 do k = k - 1 end
        ls[i] = l:sub(1, k) .. pick({"", ",", "1,,2", "0", "99999", "1,2,3,4,5,6,7,8,9", "a"})
      end
    end
  end
  return table.concat(ls, "\n") .. "\n"
end

t.case("raw reader: fixed inputs that once broke it", function()
  local fixed = {
    {"frame with a nil id", "LJPROF-RAW 1\nmeta\tinterval_us\t1000\nframe\tx\tC\tf\nend\t1\t0\n"},
    {"no interval", "LJPROF-RAW 1\nframe\t1\tC\tf\nsample\t5\tN\t\t1\nend\t1\t1\n"},
    {"inf count", "LJPROF-RAW 1\nmeta\tinterval_us\t1000\nframe\t1\tC\tf\nsample\tinf\tN\t\t1\nend\t1\t1\n"},
    {"nan interval", "LJPROF-RAW 1\nmeta\tinterval_us\tnan\nend\t0\t0\n"},
    {"frames not counting up", "LJPROF-RAW 1\nmeta\tinterval_us\t1000\nframe\t3\tC\tf\nend\t1\t0\n"},
    {"empty file", ""},
    {"binary", "\0\1\2\255\254"},
    {"a long last line without a newline (quadratic before)", "LJPROF-RAW 1\nmeta\tinterval_us\t1000\n" ..
      string.rep("x", 200000)},
    {"negative count", "LJPROF-RAW 1\nmeta\tinterval_us\t1000\nframe\t1\tC\tf\nsample\t-5\tN\t\t1\nend\t1\t1\n"},
    {"unknown vmstate", "LJPROF-RAW 1\nmeta\tinterval_us\t1000\nframe\t1\tC\tf\nsample\t5\tQ\t\t1\nend\t1\t1\n"},
    -- found by LJPROF_FUZZ_CASES=10: counts below 2^53 whose time in ns
    -- (count times the interval) is not, which pprof refused in a line
    -- naming its own source ("pprof.lua:121: ... not an integer exactly
    -- representable")
    {"meta samples times the interval above 2^53 ns", "LJPROF-RAW 1\nmeta\tinterval_us\t500\n" ..
      "meta\tsamples\t9007199254740993\nframe\t1\tC\tf\nsample\t5\tN\t\t1\nend\t1\t1\n"},
    {"sample total times the interval above 2^53 ns", "LJPROF-RAW 1\nmeta\tinterval_us\t60000000\n" ..
      "frame\t1\tC\tf\nsample\t9007199254740\tN\t\t1\nend\t1\t1\n"},
  }
  for _, c in ipairs(fixed) do
    local r, why = check_raw(c[2])
    t.eq(r, "error", c[1] .. ": one clear line (" .. tostring(why) .. ")")
  end
  -- Read and rendered in every format: the meta values pprof turns into
  -- number labels (found in CI: 'state nan' made the pprof writer raise)
  for _, c in ipairs({
    {"state nan", "LJPROF-RAW 3\nmeta\tinterval_us\t500\nmeta\tstate\tnan\n" ..
      "frame\t1\tC\tf\nsample\t5\tN\t\t1\nend\t1\t1\t0\t0\t0\n"},
    {"state 1.5", "LJPROF-RAW 3\nmeta\tinterval_us\t500\nmeta\tstate\t1.5\n" ..
      "frame\t1\tC\tf\nsample\t5\tN\t\t1\nend\t1\t1\t0\t0\t0\n"},
  }) do
    local r, why = check_raw(c[2])
    t.eq(r, "ok", c[1] .. ": rendered in every format (" .. tostring(why) .. ")")
  end
  local p, err = raw.parse(fixed[3][2], "x.ljprof")
  t.ok(not p and err == "x.ljprof:4: expected a sample count (an integer >= 0), got 'inf'",
       "the line, the field and the value: " .. tostring(err))
end)

t.case("raw reader + every format: mutated profiles", function()
  local n, errors, oks, bad = 6000 * SCALE, 0, 0, 0
  local t0 = os.clock()
  for i = 1, n do
    local data = pick(seeds)
    for _ = 1, rnd(3) do data = mutate(data) end
    -- every format for the first 200 profiles accepted, then one each
    local r, why = check_raw(data, oks >= 200 and {pick(FORMATS)} or nil)
    if r == "error" then errors = errors + 1
    elseif r == "ok" then oks = oks + 1
    else
      bad = bad + 1
      save("raw", data, why)
    end
    if i % 1000 == 0 then collectgarbage() end
  end
  print(string.format("  (%.1f s)", os.clock() - t0))
  print(string.format("  raw reader: %d cases, %d rejected in one line, %d rendered (the first " ..
                      "200 in all %d formats), %d findings", n, errors, oks, #FORMATS, bad))
  t.eq(bad, 0, "findings (saved under " .. FINDINGS .. ")")
  t.ok(oks > 0 and errors > 0, "both outcomes were reached")
end)

t.case("-jprof option parser: mutated option strings", function()
  local parts = {"f", "F", "l", "s", "p", "v", "z", "r", "a", "A", "G", "3", "-2", "m5", "i", "i0",
    "i5", "i99999999", "/clock=wall", "/clock=cpu", "/clock=x", "/rate=1000", "/rate=1e-9",
    "/rate=nan", "/rate=-1", "/rate=", "/format=raw", "/format=svg", "/format=", "/duration=2",
    "/duration=1e400", "/native=off", "/native=show", "/zones=root", "/calls=on", "/calls=x",
    "/", "//", "/x=y", "=", ",", "\0", "\255", "%", "é", "/rate=1e5", "/rate=100001"}
  local n, accepted, rejected, bad = 3000 * SCALE, 0, 0, 0
  for _ = 1, n do
    local s = {}
    for _ = 1, rnd(6) do s[#s + 1] = pick(parts) end
    local opts = table.concat(s)
    local ok, err = pcall(prof.parse_options, opts, {rnd(2) == 1 and "-" or "out.svg"})
    if ok then
      accepted = accepted + 1
      local r = err
      local rate = r.kv.rate
      if rate and not (rate >= 1 / 60 and rate <= 100000) then
        bad = bad + 1
        save("jprof", opts, "accepted rate " .. rate)
      end
    elseif type(err) == "string" and err:match("^jit%.prof: [^\n]+$") then
      rejected = rejected + 1
    else
      bad = bad + 1
      save("jprof", opts, err)
    end
  end
  print(string.format("  -jprof options: %d cases, %d accepted, %d rejected in one line, %d findings",
                      n, accepted, rejected, bad))
  t.eq(bad, 0, "findings")
end)

t.case("LJPROF parser (jit.prof.auto.parse): mutated values", function()
  local auto = require("jit.prof.auto")
  local items = {"rate=99", "rate=1e9", "rate=0", "rate=.5", "rate=1.", "rate=0x10", "rate=nan",
    "rate=-1", "rate=", "interval=1", "interval=0.001", "clock=wall", "clock=cpu", "clock=x",
    "native=off", "native=show", "calls=on", "zones=root", "format=svg", "format=pprof", "format=",
    "view=vf", "view=G", "view=i5", "view=3", "view=q", "output=a-%p-%s-%t-%n.pb.gz",
    "output=x.folded", "output=%", "output=%%", "output=%q", "output=/no/such/dir/%n.svg",
    "output=-", "every=1", "every=0.1", "every=0", "every=1e9", "keep=3", "keep=0", "keep=-1",
    "maxbytes=1", "maxbytes=100M", "maxbytes=5G", "maxbytes=1T", "maxbytes=99999999999999999",
    "signal=USR1", "signal=SIGUSR2", "signal=RTMIN+3", "signal=RTMIN+99", "signal=9", "signal=off",
    "signal=TERM", "signal=", "control=toggle", "control=snapshot", "control=off", "control=x",
    "start=paused", "start=running", "start=", "off", "", " ", "=", "==", "x=y", "rate",
    "\0", "\255", "é", ",", ";", "%n", "output=" .. string.rep("%t", 50)}
  local n, accepted, off, rejected, bad = 3000 * SCALE, 0, 0, 0, 0
  for _ = 1, n do
    local s = {}
    for _ = 1, rnd(6) do
      local it = pick(items)
      local r = rnd(10)
      if r == 1 then it = it:upper()
      elseif r == 2 then it = it .. it
      elseif r == 3 and #it > 1 then local k = rnd(#it) it = it:sub(1, k - 1) .. it:sub(k + 1)
      elseif r == 4 then it = " " .. it .. "\t" end
      s[#s + 1] = it
    end
    local v = table.concat(s, rnd(8) == 1 and ";" or ",")
    local t0 = os.clock()
    local ok, cfg = pcall(auto.parse, v)
    if os.clock() - t0 > 1 then
      bad = bad + 1
      save("ljprof-env", v, "took " .. (os.clock() - t0) .. " s")
    elseif ok and cfg == nil then
      off = off + 1
    elseif ok and type(cfg) == "table" and type(cfg.opts) == "string" and #cfg.outputs > 0 then
      accepted = accepted + 1
    elseif not ok and type(cfg) == "string" and cfg:match("^ljprof: LJPROF: [^\n]+; not profiling$") then
      rejected = rejected + 1
    else
      bad = bad + 1
      save("ljprof-env", v, cfg)
    end
  end
  print(string.format("  LJPROF values: %d cases, %d accepted, %d off, %d rejected in one line, %d findings",
                      n, accepted, off, rejected, bad))
  t.eq(bad, 0, "findings")
  t.ok(accepted > 0 and rejected > 0, "both outcomes were reached")
end)

t.case("record{} options: mutated tables", function()
  local keys = {"clock", "interval", "rate", "duration", "signal", "ring", "fmt", "depth", "native",
                "calls", "mode", "bogus", 1}
  local vals = {"wall", "cpu", "itimer", "thread", "nope", 0, -1, 1e-9, 1e9, 0 / 0, 1 / 0, 5, 100,
                1000, true, false, "", "f", {}, 2 ^ 40, 16, 8}
  local n, started, rejected, bad = 1000 * SCALE, 0, 0, 0
  for _ = 1, n do
    local o = {}
    for _ = 1, rnd(4) do o[pick(keys)] = pick(vals) end
    if o.signal ~= nil then o.signal = nil end  -- never take over a real signal here
    local ok, err = pcall(ljprof.record, o)
    if ok then
      started = started + 1
      ljprof.stop()
    elseif type(err) == "string" and err:match("^ljprof: [^\n]+$") then
      rejected = rejected + 1
    else
      bad = bad + 1
      local desc = {}
      for k, v in pairs(o) do desc[#desc + 1] = tostring(k) .. "=" .. tostring(v) end
      save("record", table.concat(desc, " "), err)
    end
  end
  print(string.format("  record{} options: %d cases, %d started, %d rejected in one line, %d findings",
                      n, started, rejected, bad))
  t.eq(bad, 0, "findings")
  t.eq(ljprof.running(), false, "nothing left running")
end)

t.case("ljprof report on mutated files: one line, status 2, no traceback", function()
  local cli = BUILD .. "/ljprof"
  local n, bad = 0, 0
  for i = 1, 12 do
    local data = mutate(pick(seeds))
    if check_raw(data) == "error" then
      n = n + 1
      local path = dir .. "/m" .. i .. ".ljprof"
      local f = assert(io.open(path, "wb"))
      f:write(data)
      f:close()
      local p = io.popen(ENV .. cli .. " report " .. q(path) .. " -f folded -o - 2>&1 >/dev/null; echo rc=$?")
      local out = p:read("*a")
      p:close()
      local rc = tonumber(out:match("rc=(%d+)%s*$"))
      local msg = out:gsub("rc=%d+%s*$", "")
      if rc ~= 2 or msg:find("traceback", 1, true) or select(2, msg:gsub("\n", "")) ~= 1 then
        bad = bad + 1
        t.ok(false, "report: " .. tostring(rc) .. ": " .. msg)
      end
    end
  end
  print(string.format("  ljprof report: %d rejected files, %d not one line", n, bad))
  t.ok(n > 0, "some files were rejected")
end)

os.execute("rm -rf " .. q(dir))
t.done()
