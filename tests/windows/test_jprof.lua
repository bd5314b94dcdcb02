-- The -jp option set of -jprof in the Windows build, under Wine
-- (tests/windows/meson.build): child luajit.exe runs (through cmd.exe:
-- t.run_win) with LUA_PATH naming the source tree (jit/prof.lua), the
-- cross-built LuaJIT's jit/ (-jp's jit.p) and LUA_CPATH the build's
-- ljprof.dll. Two parts, one Wine process each (~30 s each):
--   views     every view letter (f F l s p v z r a A G, depths, m<n>,
--             i<n>) against -jp's report on the same workload, as on
--             Linux (tests/lua/jprof_cases.lua, shared with
--             tests/lua/test_jitprof.lua): the same lines once the
--             numbers are taken out, status 0.
--   options  each /key= option with a meaning on Windows (clock cpu,
--             wall, thread; itimer refused in one line; rate, duration,
--             format, native (off said once), zones, inline, calls,
--             aborts, private): status 0 and a well-formed report or
--             file; the bad options of the Linux test and a bad value of
--             every -jprof key (jit.prof.options' lines, as
--             tests/lua/test_options.lua checks them): one line, the
--             program does not run.
-- What differs from Linux: ljprof's own time ([ljprof]) passes -jp's 3%
-- threshold under Wine (the safe point's ReadProcessMemory, ~0.1 ms a
-- call there), so the comparison leaves [ljprof] lines out; and every run
-- prints two notices on stderr (native frames off, exit signals not
-- trapped), which the comparison leaves out too (stdout only). ljprof's
-- own time shows as [ljprof] and, in the v views, as C code: left out.
local t = require("t")
local cases = require("jprof_cases")
local options = require("jit.prof.options")
local raw = require("jit.prof.raw")

local LUAJIT = arg and arg[-1] or "luajit"
local PART = arg and arg[1] or "views"
local PRE = string.format("ljp_wj_%d_", os.time())

local made = {}
local function file(name, body)
  name = PRE .. name
  if body then t.write(name, body) end
  made[#made + 1] = name
  return name
end

-- luajit.exe opt script: output (stdout only when quiet) and status
local function run(opt, script, quiet)
  return t.run_win(string.format("%s %s %s", LUAJIT, opt, script), quiet)
end
local function run_quiet(opt, script) return run(opt, script, true) end

-- Two interpreted functions with a fixed 3:1 cost ratio (~0.15 s), the
-- hot lines 2 and 3 (as test_jitprof.lua's).
local workload = file("wl.lua", [[
jit.off()
local function heavy(n) local s = 0 for i = 1, n do s = s + i % 7 end return s end
local function light(n) local s = 0 for i = 1, n do s = s + i % 5 end return s end
local r = 0
for k = 1, 100 do r = r + heavy(300000) + light(100000) end
io.write("result ", r, "\n")
]])

-- ljprof's own time: [ljprof] in stack views (and its annotation,
-- "[Cannot annotate non-file]"), C code in the VM states (the workload
-- calls no C function: -jp's C code is 0 there)
local not_own = function(l)
  return not l:find("[ljprof]", 1, true) and not l:find("C code", 1, true) and
         l ~= "[Cannot annotate non-file]"
end
-- The report without ljprof's own entries: a first-level line of its
-- own time with the second-level lines under it.
local function without_own(s)
  local out, skip = {}, false
  for l in s:gmatch("([^\n]*)\n") do
    if not l:find("^  [%-<>][%-<>] ") then skip = not not_own(l) end
    if not skip and not_own(l) then out[#out + 1] = l .. "\n" end
  end
  return table.concat(out)
end
local function run_mine(opt, script)
  local s, code = run_quiet(opt, script)
  return without_own(s), code
end
local function compare(opt, script, keep)
  return cases.compare(t, run_mine, opt, script or workload, keep)
end

local function count_lines(s) return select(2, s:gsub("\n", "")) end

if PART == "views" then
  -- Hot lines far from the top of the file (excerpts, a).
  local ann = file("ann.lua", cases.annotated(50))

  t.case("-jp views: f F l p s, depth n and -n, as -jp's", function()
    local l = compare("fi2")
    t.ok(l[2] == "N%  heavy" and l[3] == "N%  light", "f: heavy, light: " .. table.concat(l, " | "))
    compare("Fi2")
    l = compare("li2")
    t.eq(l[2], "N%  " .. workload .. ":2", "l: the hot line")
    compare("pFi2")
    compare("si2")
    compare("2i2")
    compare("-2i2")
  end)

  t.case("-jp splits and counts: v fv zf r m<n>, as -jp's", function()
    for _, o in ipairs({"vi2", "fvi2", "zfi2", "ri2"}) do compare(o) end
    t.eq(#compare("m50i2"), 2, "m50 keeps heavy only")
  end)

  t.case("-jp annotation and folded stacks: A a G, as -jp's", function()
    local l = compare("Ai2")
    t.eq(l[2], "====== " .. workload .. " ======", "A: the file's header")
    -- a: the file's header and its two hot lines (the loops' bodies);
    -- whether a loop's "for" line passes the 3% threshold, and so where
    -- an excerpt starts, differs between runs of either under Wine
    l = compare("ai2", ann, function(l)
      return l:find("^======") or l:find("i %% [57]")
    end)
    t.ok(#l == 3 and l[2]:find("^N%% |") and l[3]:find("^N%% |"), "a: two hot lines: " ..
      table.concat(l, " | "))
    local s = run_quiet("-jprof=ai2", ann)
    t.ok(s:find("\n@@ %d+ @@\n") ~= nil, "a: excerpts: " .. s)
    compare("Gi2", nil, function(l) return l:find("[;:]heavy %d+$") or l:find("[;:]light %d+$") end)
  end)

  t.case("i<n>: the interval reaches the recording", function()
    for _, c in ipairs({{"i5", 5000}, {"i", 1000}}) do
      local out = file(c[1] .. ".ljprof")
      local o, code = run("-jprof=" .. c[1] .. "/format=raw," .. out, workload)
      t.eq(code, 0, c[1] .. ": status: " .. o)
      local p, meta = raw.read(out)
      t.ok(p and meta.interval_us == c[2], c[1] .. ": interval_us " ..
        tostring(meta and meta.interval_us))
    end
  end)
else
  -- A compiled loop (the JIT on: inline, aborts, calls have traces to see).
  -- (1 s: under load, 10 on this 2-core machine, a 0.3 s run under Wine
  -- had no sample at times, Wine's timer thread starved)
  local hot = file("hot.lua", [[
local function hot(n) local s = 0 for i = 1, n do s = s + i % 3 end return s end
local t0 = os.clock()
while os.clock() - t0 < 1 do hot(1e5) end
io.write("ran\n")
]])

  t.case("bad options: one line naming the input and what is accepted (test_jitprof's)", function()
    for _, c in ipairs(cases.BAD) do
      local s, code = run("-jprof=" .. c[1], workload)
      t.ok(s:find(c[2], 1, true), c[1] .. ": " .. s)
      t.ok(not s:find("result", 1, true) and code ~= 0, c[1] .. ": the program does not run")
      t.eq(count_lines(s), 1, c[1] .. ": one line")
    end
  end)

  t.case("a bad value of every -jprof key: options' line, once (test_options')", function()
    local n = 0
    for _, k in ipairs(options.documented()) do
      local bad = (cases.SAMPLES[k.key] or {})[1]
      if k.jprof and bad and not (k.as_given and k.as_given.jprof) then
        local opt = k.key == "view" and bad or k.key == "i" and "f" .. bad or
                    "f/" .. k.key .. "=" .. bad
        local s, code = run("-jprof=" .. opt .. ",NUL", hot)
        local want = "jit.prof: " .. select(2, options.value(k.key, bad))
        t.ok(s:find(want, 1, true), k.key .. ": " .. s .. " lacks " .. want)
        t.eq(count_lines(s), 1, k.key .. ": one line: " .. s)
        t.ok(code ~= 0 and not s:find("ran", 1, true), k.key .. ": the program does not run")
        n = n + 1
      end
    end
    print("  " .. n .. " keys")
    t.ok(n >= 10, "keys checked: " .. n)
  end)

  -- A good run: status 0, the report names hot (text) or the raw profile
  -- holds samples; what -jprof printed on stderr besides, returned.
  local function good(opt, fmt)
    local out = file(opt:gsub("[^%w]", "_") .. "." .. (fmt == "raw" and "ljprof" or "txt"))
    local s, code = run("-jprof=" .. opt .. (fmt and "/format=" .. fmt or "") .. "," .. out, hot)
    t.eq(code, 0, opt .. ": status: " .. s)
    t.ok(s:find("ran", 1, true), opt .. ": the program ran: " .. s)
    if fmt == "raw" then
      local p, meta = raw.read(out)
      t.ok(p and p.total > 0, opt .. ": samples in the raw profile")
      return s, p, meta
    end
    local txt = t.read(out) or ""
    if fmt == nil then
      t.ok(txt:find("^%s?%d+%%  %S") ~= nil, opt .. ": a report: " .. txt)
    end
    return s, txt
  end

  t.case("clock=: cpu, wall, thread reach the recording; itimer refused in one line", function()
    for _, c in ipairs({"cpu", "wall", "thread"}) do
      local _, _, meta = good("i2/clock=" .. c, "raw")
      t.eq(meta and meta.clock, c, "clock " .. c)
    end
    local s, code = run("-jprof=f/clock=itimer,NUL", hot)
    t.eq(s:gsub("^[^\n]-: ljprof:", "ljprof:"),  -- (after "luajit.exe: ")
         "ljprof: clock itimer does not exist on Windows (accepted: cpu, wall, thread)\n",
         "itimer: one line")
    t.ok(code ~= 0, "itimer: the program does not run")
  end)

  t.case("rate= and duration= reach the recording", function()
    local _, _, meta = good("/rate=250", "raw")
    t.eq(meta and meta.interval_us, 4000, "rate 250")
    local _, pf = good("i1/clock=wall", "raw")
    local _, pd = good("i1/clock=wall/duration=0.3", "raw")
    t.ok(pf and pd and pd.total < pf.total * 0.6, "duration 0.3 of a 1 s run: " ..
      tostring(pd and pd.total) .. " of " .. tostring(pf and pf.total))
  end)

  t.case("format=: each format with one output", function()
    local starts = {text = "^%s?%d+%%  %S", folded = ";hot %d+%s", speedscope = '"%$schema"',
                    svg = "<svg", pprof = "^\31\139"}
    for fmt, pat in pairs(starts) do
      local _, body = good("i2", fmt)
      t.ok(body and body:find(pat) ~= nil, fmt .. ": " .. tostring(body):sub(1, 80))
    end
    good("i2", "raw")
  end)

  t.case("native=: off says nothing; on and show say once that native frames are off", function()
    local s = good("i2/native=off")
    t.ok(not s:find("native", 1, true), "off: no notice: " .. s)
    for _, v in ipairs({"on", "show"}) do
      s = good("i2/native=" .. v)
      local _, n = s:gsub("ljprof: notice: native C frames are off: not captured on Windows " ..
                          "%(Lua frames only%)\n", "")
      t.eq(n, 1, v .. ": the notice, once: " .. s)
    end
  end)

  t.case("zones=, inline=, calls=, aborts=, private=: accepted, a report", function()
    for _, o in ipairs({"zones=root", "zones=off", "inline=snapshots", "inline=exact",
                        "inline=off", "calls=on", "calls=off", "aborts=on", "aborts=off",
                        "private=on", "private=off"}) do
      good("i2/" .. o)
    end
    -- zones: a zone's samples under its name (z view)
    local z = file("zone.lua", [[
local zone = require("jit.zone")
local function hot(n) local s = 0 for i = 1, n do s = s + i % 3 end return s end
local t0 = os.clock()
zone("WORK")
while os.clock() - t0 < 0.3 do hot(1e5) end
zone()
]])
    local s, code = run("-jprof=zi2", z, true)
    t.eq(code, 0, "z: status")
    t.ok(s:match("^%s?%d+%%  WORK\n"), "z: the zone first: " .. s)
  end)
end

for _, f in ipairs(made) do os.remove(f) end
t.done()
