-- jit/prof.lua, the -jprof front end: run real `luajit -jprof=...`
-- subprocesses on deterministic workloads and compare each option's report
-- structure with `luajit -jp=...` on the same workload; then the fixes of
-- the built-in's bugs, ljprof's own options and output formats, and the
-- text/folded renderers on synthetic profiles (exact text).
local t = require("t")
local model = require("jit.prof.model")
local text = require("jit.prof.text")
local folded = require("jit.prof.folded")

local write = t.write

local read = t.read

local function exists(path)
  local f = io.open(path, "r"); if f then f:close() end
  return f ~= nil
end

local q = t.q

-- A directory of its own: workloads run from it with relative names, as
-- -jp users do (annotation opens the files by the names in the chunks).
local dir = t.tmpdir()
local function path(name) return dir .. "/" .. name end

-- A shell command in dir; returns its stdout+stderr and its exit status.
local function sh(cmd) return t.sh_in(dir, cmd) end

local function run(opt, script, extra)
  return sh(string.format("luajit %s %s%s", opt, script, extra or ""))
end

-- Two interpreted functions with a fixed 3:1 cost ratio (~0.3 s of CPU).
-- The hot lines are 2 and 3 (the case that crashes -jp's annotation).
write(path("wl.lua"), [[
jit.off()
local function heavy(n) local s = 0 for i = 1, n do s = s + i % 7 end return s end
local function light(n) local s = 0 for i = 1, n do s = s + i % 5 end return s end
local r = 0
for k = 1, 200 do r = r + heavy(300000) + light(100000) end
io.write("result ", r, "\n")
]])
local workload = "wl.lua"

-- What -jprof's tests check, shared with the Windows test
-- (tests/lua/jprof_cases.lua).
local cases = require("jprof_cases")

-- Hot lines far from the top of the file (excerpts work in -jp too).
write(path("wl_ann.lua"), cases.annotated(100))

-- A loadstring chunk ("[string]") sorts before "wl_str.lua": -jp stops
-- annotating at it.
write(path("wl_str.lua"), [[
jit.off()
local chunk = loadstring("local s = 0 for i = 1, ... do s = s + i % 3 end return s")
local virt = loadstring("local s = 0 for i = 1, ... do s = s + i % 3 end return s", "@virtual.lua")

local function filework(n)
  local s = 0
  for i = 1, n do s = s + i % 7 end
  return s
end

local r = 0
for k = 1, 100 do r = r + filework(400000) + chunk(300000) + virt(300000) end
print(r)
]])

-- A hot interpreted loop that never ends by itself (signals).
write(path("loop.lua"), [[
jit.off()
local function spin(n) local s = 0 for i = 1, n do s = s + i % 3 end return s end
io.write("started\n"); io.flush()
while true do spin(100000) end
]])

-- The report's lines and their grammar, and -jprof=opt against -jp=opt
-- (cases, above).
local lines, shapes = cases.lines, cases.shapes
local function compare(opt, script, keep)
  return cases.compare(t, run, opt, script or workload, keep)
end

t.case("hot but interpreted: its own section after the -jp lines", function()
  local s = run("-jprof", workload)
  local sec = s:match("\n\n(Hot but interpreted.*)$")
  t.ok(sec, "section present:\n" .. s)
  if sec then
    t.ok(sec:find("\n%s?%d+%%  [^\n]*:[%w_]+  %(why its traces aborted: run with /aborts=on%)") ~= nil,
      "jit.off functions listed, aborts not recorded:\n" .. sec)
  end
  local sa = run("-jprof=f/aborts=on", workload)
  local seca = sa:match("\n\n(Hot but interpreted.*)$")
  t.ok(seca and seca:find("\n%s?%d+%%  [^\n]*:[%w_]+  no trace aborts reported") ~= nil,
    "/aborts=on: jit.off functions listed without aborts:\n" .. sa)
  -- The section's heading at the start of a line: whole-file annotation
  -- may print jit/prof.lua itself (a sample can land in the profiler's
  -- own start or stop code), and its source mentions the heading.
  local function has_section(out) return ("\n" .. out):find("\nHot but interpreted %(") ~= nil end
  t.ok(has_section(s), "the heading matcher finds the section")
  t.ok(not has_section(run("-jprof=r", workload)), "not in raw mode")
  t.ok(not has_section(run("-jprof=G", workload)), "not in G mode")
  t.ok(not has_section(run("-jprof=A", workload)), "not in annotation")
end)

t.case("hot but interpreted: the profiler's own work is not listed", function()
  local out = require("jit.prof.output")
  local p = {total = 100, functions = {{func = "[ljprof]", I = 4}, {func = "w.lua:walk", I = 30}}}
  local sec = out.hot_interpreted(p, 3, {aborts = "off"})
  t.ok(sec:find("w.lua:walk", 1, true) ~= nil, "a function listed: " .. sec)
  t.ok(not sec:find("[ljprof]", 1, true), "[ljprof] not listed: " .. sec)
end)

t.case("default report: percent lines, heavy first, like -jp", function()
  local l1 = compare("")
  t.ok(l1[2] == "N%  heavy" and l1[3] == "N%  light", "top entries: " .. table.concat(l1, " | "))
  local l2 = lines(run("-jprof", workload))
  for i = 2, #l2 do
    t.ok(l2[i]:match("^%s?%d+%%  %S") ~= nil, "line grammar: " .. l2[i])
  end
  -- The share, from enough samples not to flake: ~125 timer signals at
  -- 2 ms (CPU timers fire at most every 4 ms here), so 3:1 is 75% +- 4%.
  local share = lines(run("-jprof=i2", workload))[2]
  local pct = tonumber(share:match("(%d+)%%"))
  t.ok(pct >= 55 and pct <= 95, "heavy share " .. pct .. "% (expected about 75%)")
end)

t.case("-jp stack views: f F l p, depth n and -n, split s", function()
  compare("fi2")
  compare("Fi2")
  local l = compare("li2")
  t.eq(l[2], "N%  wl.lua:2", "hot line")
  compare("2i2")
  compare("-2i2")
  l = compare("si2")
  t.eq(l[3], "  <- N%  wl.lua:0", "s: the rest of the key below the first frame")
  l = compare("-si2")
  t.eq(l[3], "  -> N%  heavy", "-s: callers first")
  compare("3si2")
  compare("Fl2i2")
  -- p: full paths, run by absolute name.
  l = compare("pli2", path(workload))
  t.eq(l[2], "N%  " .. path(workload) .. ":2", "full path")
  compare("pFi2", path(workload))
end)

t.case("-jp splits: v z and their order (vf fv zf fz fl vl)", function()
  for _, o in ipairs({"vi2", "vfi2", "fvi2", "zi2", "zfi2", "fzi2", "fli2", "vli2"}) do
    compare(o)
  end
  local l = lines(run("-jprof=vf", workload))
  t.ok(l[2]:match("^%s?%d+%%  Interpreted$") ~= nil, "first level is a VM state: " .. tostring(l[2]))
  t.ok(l[3]:match("^  %-%- %s?%d+%%  heavy$") ~= nil, "second level: " .. tostring(l[3]))
  l = lines(run("-jprof=fv", workload))
  t.ok(l[2]:match("^%s?%d+%%  heavy$") ~= nil, "first level: " .. tostring(l[2]))
  t.ok(l[3]:match("^  <%- %s?%d+%%  Interpreted$") ~= nil, "second level: " .. tostring(l[3]))
  l = lines(run("-jprof=z", workload))
  t.ok(l[2]:match("^100%%  %(none%)$") ~= nil, "no zone: (none), as -jp: " .. tostring(l[2]))
end)

t.case("raw counts (r), minimum (m), interval (i)", function()
  compare("ri2")
  compare("vfri2")
  local l = lines(run("-jprof=rm0", workload))
  t.ok(l[2]:match("^%s*%d+  heavy$") ~= nil, "raw line: " .. tostring(l[2]))
  -- m50: light (about 25%) is left out.
  l = compare("m50i2")
  t.eq(#l, 2, "m50 keeps heavy only")
  -- m0: every entry, which may include a stray sample or two; the top
  -- entries and the grammar are the same.
  local mine = shapes((run("-jprof=m0i2", workload)))
  for i = 2, #mine do t.ok(mine[i]:match("^N%%  %S"), "m0 line: " .. mine[i]) end
  t.eq(mine[2], "N%  heavy", "m0 top entry")
  -- i: the interval reaches the recording (raw profile meta).
  run("-jprof=i5/format=raw,i5.ljprof", workload)
  local p, meta = require("jit.prof.raw").read(path("i5.ljprof"))
  t.ok(p and meta.interval_us == 5000, "i5: interval_us " .. tostring(meta and meta.interval_us))
  run("-jprof=i/format=raw,i1.ljprof", workload)
  p, meta = require("jit.prof.raw").read(path("i1.ljprof"))
  t.ok(p and meta.interval_us == 1000, "i alone: 1 ms, got " .. tostring(meta and meta.interval_us))
end)

t.case("folded stacks (G): the -jp G text", function()
  local heavy_light = function(l) return l:find("[;:]heavy %d+$") or l:find("[;:]light %d+$") end
  local l = compare("Gi2", nil, heavy_light)
  t.eq(l[2] or l[1], "@0x;wl.lua:0;light N", "root-first stack")
  compare("GFi2", nil, heavy_light)
  compare("Gli2", nil, function(l) return l:find(":[23] %d+$") end)
  compare("Gfvi2", nil, function(l) return l:find(";heavy %d+$") or l:find("^Interpreted %d+$") end)
  local out = path("g.folded")
  local s = run("-jprof=G," .. out, workload)
  t.eq(lines(s)[1] and lines(s)[1]:match("^result"), "result",
       "program output on stdout, nothing else:\n" .. s)
  local data = read(out) or ""
  local n = 0
  for line in data:gmatch("[^\n]+") do
    n = n + 1
    t.ok(line:match("^.+ %d+$"), "folded line: " .. line)
  end
  t.ok(n >= 2, "at least two stacks")
  t.ok(data:find(";heavy %d+\n") ~= nil, "root-first stacks end in the leaf")
end)

t.case("annotation (A, Ar, a, ar): headers and excerpts as -jp", function()
  local l = compare("Ai2")
  t.eq(l[2], "====== wl.lua ======", "file header")
  t.eq(l[3], "      | jit.off()", "cold line")
  t.eq(l[4]:match("^N%% | local function heavy"), "N% | local function heavy", "hot line")
  compare("Ari2")
  l = compare("ai2", "wl_ann.lua")
  t.eq(l[2], "====== wl_ann.lua ======", "header")
  t.eq(l[3], "@@ 3 @@", "excerpt from 3 lines before the first hot line (6)")
  compare("ari2", "wl_ann.lua")
  local s = run("-jprof=a", "wl_ann.lua")
  t.ok(s:find("\n\n====== wl_ann.lua ======\n@@ 3 @@\n", 1, true) ~= nil,
    "blank line, header, hunk:\n" .. s)
end)

t.case("fix: annotation with a hot line among lines 2-3", function()
  -- -jp=a fails here (show + ann on a boolean) and prints only "@@ 1 @@".
  local s = run("-jprof=a", workload)
  t.ok(s:find("\n====== wl.lua ======\n@@ 1 @@\n      | jit.off()\n", 1, true) ~= nil,
    "excerpt from line 1:\n" .. s)
  t.ok(s:find("\n%s*%d+%% | local function heavy") ~= nil, "hot line 2 shown:\n" .. s)
  t.ok(s:find("\n%s*%d+%% | local function light") ~= nil, "hot line 3 shown:\n" .. s)
  t.ok(s:find("      | local r = 0\n", 1, true) ~= nil, "context after the hot lines")
  t.ok(not s:find("error", 1, true), "no error:\n" .. s)
end)

t.case("fix: a [string] chunk or a missing file does not stop annotation", function()
  -- a wall clock at 1 kHz: every file gets its samples even on a loaded
  -- machine (three files must each pass -jp's 3% threshold)
  local s = run("-jprof=a/clock=wall/rate=1000", "wl_str.lua")
  local i1 = s:find("\n====== [string] ======\n[Cannot annotate non-file]\n", 1, true)
  local i2 = s:find("====== ERROR: virtual.lua: ", 1, true)
  local i3 = s:find("\n====== wl_str.lua ======\n", 1, true)
  t.ok(i1 and i2 and i3, "three files, [string] first:\n" .. s)
  t.ok(i3 and s:find("%d+%% |   for i = 1, n do s = s %+ i %% 7 end", i3) ~= nil,
    "the file after them is annotated:\n" .. s)
end)

t.case("fix: starting twice, a stale __gc does not stop the second run", function()
  write(path("twice.lua"), [[
jit.off()
local prof, ljprof = require("jit.prof"), require("ljprof")
local function first(n) local s = 0 for i = 1, n do s = s + i % 3 end return s end
local function second(n) local s = 0 for i = 1, n do s = s + i % 3 end return s end
prof.start("r", "t1.txt")
for k = 1, 100 do first(100000) end
prof.start("r", "t2.txt")
collectgarbage(); collectgarbage()
print("running", ljprof.running())
for k = 1, 200 do second(100000) end
]])
  os.remove(path("t1.txt")); os.remove(path("t2.txt"))
  local s, code = run("", "twice.lua")
  t.eq(code, 0, "exit status")
  t.ok(s:find("running\ttrue", 1, true), "still running after a full GC:\n" .. s)
  local t1, t2 = read(path("t1.txt")) or "", read(path("t2.txt")) or ""
  t.ok(t1:match("^%s*%d+  first\n"), "first run written by the second start: " .. t1)
  t.ok(t2:match("^%s*%d+  second\n"), "second run written at exit: " .. t2)
  t.ok(not t2:find("first", 1, true), "second run only: " .. t2)
end)

t.case("fix: zero samples: the file is complete and closed", function()
  write(path("zero.lua"), [[
local prof = require("jit.prof")
prof.start("fi1000", "z1.txt"); prof.stop()
prof.start("Gi1000", "z2.txt"); prof.stop()
local f = io.open("z1.txt"); io.write("[", f:read("*a"), "]\n"); f:close()
f = io.open("z2.txt"); io.write("[", f:read("*a"), "]\n"); f:close()
local p = io.popen("ls -l /proc/$PPID/fd"); io.write(p:read("*a")); p:close()
]])
  local s = run("", "zero.lua")
  t.ok(s:find("[[No samples collected]\n]\n", 1, true), "text: " .. s)
  t.ok(s:find("\n[]\n", 1, true), "G: an empty file: " .. s)
  t.ok(not s:find("z1.txt", 1, true) and not s:find("z2.txt", 1, true),
    "no descriptor left open on the outputs:\n" .. s)
  s = run("-jprof=i1000,z3.txt", "zero.lua")
  t.eq(read(path("z3.txt")), "[No samples collected]\n", "-jprof with no samples")
end)

-- Run script under -jprof=r,out and without profiling; both exit
-- statuses, the profile and the output.
local function exit_case(script, body, signal)
  write(path(script), body)
  local out = path(script .. ".prof")
  os.remove(out)
  local cmd = "luajit %s " .. script
  if signal then  -- wait until the loop runs, then send the signal
    cmd = "luajit %s " .. script .. " > " .. script .. ".log 2>&1 & pid=$!; " ..
      "for i in $(seq 100); do grep -q started " .. script .. ".log 2>/dev/null && break; " ..
      "sleep 0.05; done; sleep 0.3; kill -" .. signal .. " $pid; wait $pid"
  end
  local _, plain = sh(string.format(cmd, ""))
  local s, code = sh(string.format(cmd, "-jprof=r," .. q(out)))
  return read(out) or "", code, plain, s
end

local spin = [[
jit.off()
local function spin(n) local s = 0 for i = 1, n do s = s + i % 3 end return s end
for k = 1, 300 do spin(100000) end
]]

t.case("profile written on normal exit, os.exit() and an uncaught error", function()
  local prof, code, plain = exit_case("ex_normal.lua", spin)
  t.ok(prof:match("^%s*%d+  spin\n"), "normal exit: " .. prof)
  t.ok(code == 0 and plain == 0, "status " .. tostring(code))
  prof, code, plain = exit_case("ex_exit.lua", spin .. "os.exit(3)\n")
  t.ok(prof:match("^%s*%d+  spin\n"), "os.exit: " .. prof)
  t.ok(code == 3 and plain == 3, "os.exit status unchanged: " .. tostring(code))
  local s
  prof, code, plain, s = exit_case("ex_error.lua", spin .. "error('boom')\n")
  t.ok(prof:match("^%s*%d+  spin\n"), "uncaught error: " .. prof)
  t.ok(code == plain and code ~= 0, "error status unchanged: " .. tostring(code) .. " vs " ..
    tostring(plain))
  t.ok(s:find("boom", 1, true), "the error is reported: " .. s)
end)

t.case("profile written on SIGINT (luajit's interrupted! error), status unchanged", function()
  local prof, code, plain = exit_case("sig_int.lua", read(path("loop.lua")), "INT")
  t.ok(prof:match("^%s*%d+  spin\n"), "profile: " .. prof)
  t.ok(code == plain, "status " .. tostring(code) .. ", without profiling " .. tostring(plain))
end)

t.case("profile written on SIGTERM and SIGHUP, then the default action", function()
  if not require("ljprof").on_signal then
    io.stdout:write("     skipped: the ljprof library has no on_signal (C support pending)\n")
    return
  end
  for sig, status in pairs({TERM = 143, HUP = 129}) do
    local prof, code, plain = exit_case("sig_" .. sig .. ".lua", read(path("loop.lua")), sig)
    t.ok(prof:match("^%s*%d+  spin\n"), sig .. ": profile: " .. prof)
    t.ok(code == plain and plain == status, sig .. ": status " .. tostring(code) ..
      ", without profiling " .. tostring(plain))
  end
end)

t.case("signal contract: on_signal's writer writes the profile, stop holds then removes the trap", function()
  -- The Lua side of ljprof.on_signal, with the C part mocked: the writer
  -- is what the library's helper thread calls, in a state of its own,
  -- after a signal (here: in this state, while the run goes on).
  write(path("sigmock.lua"), [[
local ljprof = require("ljprof")
local trap, calls = nil, {}
ljprof.on_signal = function(sigs, mod, fn, spec)
  calls[#calls + 1] = tostring(sigs)
  if sigs then trap = {sigs = sigs, mod = mod, fn = fn, spec = spec} end
end
jit.off()
local prof = require("jit.prof")
prof.start("r", "sigmock.txt", "sigmock.folded")
local function spin(n) local s = 0 for i = 1, n do s = s + i % 3 end return s end
for k = 1, 300 do spin(100000) end
print("signals " .. table.concat(trap.sigs, ","))
print("writer " .. trap.mod .. "." .. trap.fn .. " " .. trap.spec:gsub("%z", "|"))
require(trap.mod)[trap.fn](trap.spec, "TERM")
print("running " .. tostring(ljprof.running()))
io.write(io.open("sigmock.txt"):read("*a"))
print(io.open("sigmock.folded") ~= nil)
prof.stop()
print("then " .. table.concat(calls, " ", 2))
]])
  local s = run("", "sigmock.lua")
  t.ok(s:find("signals TERM,HUP,INT\n", 1, true), "trapped signals: " .. s)
  t.ok(s:find("writer jit.prof.write_after_signal sigmock.lua|r|sigmock.txt|sigmock.folded\n", 1, true),
       "the writer and its spec: " .. s)
  t.ok(s:find("running true\n%s*%d+  spin\n"), "profile written: " .. s)
  t.ok(s:find("\ntrue\n", 1, true), "both outputs: " .. s)
  t.ok(s:find("then false nil\n", 1, true), "stop holds, then removes the trap: " .. s)
end)

t.case("frame names are the same in every run (no ASLR address for unnamed C functions)", function()
  -- luajit's main C function has no Lua name: it printed as @0x55...,
  -- another address every run, so two profiles could not be compared
  local names = {}
  for k = 1, 2 do
    local out = path("stable" .. k .. ".folded")
    run("-jprof=G," .. q(out), workload)
    local set = {}
    for line in (read(out) or ""):gmatch("[^\n]+") do
      -- ([ljprof], ljprof's own time, is there when a tick fell in it)
      for fr in line:gsub(" %d+$", ""):gmatch("[^;]+") do
        if fr ~= "[ljprof]" then set[fr] = true end
      end
    end
    local list = {}
    for fr in pairs(set) do list[#list + 1] = fr end
    table.sort(list)
    names[k] = table.concat(list, "\n")
    t.ok(#list > 0, "frames in run " .. k)
    t.ok(not names[k]:find("@0x", 1, true), "no address as a name: " .. names[k])
  end
  t.ok(names[1]:find("^luajit%+0x%x+\n") or names[1]:find("\nluajit%+0x%x+\n"),
       "luajit's main function by object and offset: " .. names[1])
  t.eq(names[2], names[1], "the same frame names in both runs")
end)

t.case("bad options: one line naming the input and what is accepted", function()
  for _, c in ipairs(cases.BAD) do  -- (tests/lua/jprof_cases.lua)
    local s, code = run("-jprof=" .. c[1], workload)
    t.ok(s:find(c[2], 1, true), c[1] .. ": " .. s)
    t.ok(not s:find("result", 1, true) and code ~= 0, c[1] .. ": the program does not run")
    t.eq(select(2, s:gsub("\n", "")), 1, c[1] .. ": one line")
  end
end)

t.case("unwritable output: one line before profiling starts", function()
  local s, code = run("-jprof=f,/nonexistent/dir/out.txt", workload)
  t.ok(s:find("cannot write /nonexistent/dir/out.txt: ", 1, true), s)
  t.ok(not s:find("result", 1, true) and code ~= 0, "the program does not run: " .. s)
  t.eq(select(2, s:gsub("\n", "")), 1, "one line")
  s = run("-jprof=f,ok.txt,/nonexistent/x.svg", workload)
  t.ok(s:find("cannot write /nonexistent/x.svg: ", 1, true), "any of several: " .. s)
  t.ok(not exists(path("ok.txt")), "no file left behind by the check")
end)

t.case("several outputs, formats from the names; full stacks recorded", function()
  for _, f in ipairs({"m.txt", "m.folded", "m.ljprof", "m.out"}) do os.remove(path(f)) end
  local s, code = run("-jprof=vf,m.txt,m.folded,m.ljprof,m.out", workload)
  t.eq(code, 0, "status: " .. s)
  local txt = read(path("m.txt")) or ""
  t.ok(txt:match("^%s?%d+%%  Interpreted\n  %-%- %s?%d+%%  heavy\n"), "text: " .. txt)
  t.ok(txt:find("\nHot but interpreted", 1, true), "text has ljprof's section")
  local fo = read(path("m.folded")) or ""
  t.ok(fo:match("^luajit%+0x%x+;wl%.lua:0;heavy %d+\n"), "folded, full root-first stacks " ..
    "although the text view has depth 1: " .. fo)
  local p, meta = require("jit.prof.raw").read(path("m.ljprof"))
  t.ok(p and p.total > 0 and meta.program == "wl.lua" and meta.clock, "raw: " .. tostring(meta))
  t.eq(read(path("m.out")), txt, "unknown ending: text, the same report")
  -- /format= with one output: that format, whatever the name.
  run("-jprof=/format=folded,f.txt", workload)
  t.ok((read(path("f.txt")) or ""):match("^luajit%+0x%x+;wl%.lua:0;heavy %d+\n"), "format=folded")
  -- /format= with several: for the names without a known ending.
  run("-jprof=/format=folded,g.txt,g.out", workload)
  t.ok((read(path("g.txt")) or ""):match("^%s?%d+%%  heavy\n"), ".txt stays text")
  t.ok((read(path("g.out")) or ""):match("^luajit%+0x%x+;wl%.lua:0;heavy %d+\n"), "other: folded")
  -- Folded labels follow the letters; to stdout without an output.
  s = run("-jprof=l/format=folded", workload)
  t.ok(s:find("\nluajit%+0x%x+;wl%.lua:5;wl%.lua:2 %d+\n"), "line labels: " .. s)
  -- $LUAJIT_PROFILEFILE without outputs, as -jp.
  sh("LUAJIT_PROFILEFILE=env.txt luajit -jprof=r " .. workload)
  t.ok((read(path("env.txt")) or ""):match("^%s*%d+  heavy\n"), "LUAJIT_PROFILEFILE")
end)

t.case("formats from other modules, or one line naming a missing one", function()
  for _, fmt in ipairs({"speedscope", "pprof", "svg"}) do
    local ok = pcall(require, "jit.prof." .. fmt)
    local name = "m." .. ({speedscope = "speedscope.json", pprof = "pb.gz", svg = "svg"})[fmt]
    os.remove(path(name))
    local s, code = run("-jprof=f," .. name, workload)
    if ok then
      t.ok(code == 0 and #(read(path(name)) or "") > 0, fmt .. " written: " .. s)
    else
      t.ok(s:find("format " .. fmt .. " is not available", 1, true) and code ~= 0, s)
    end
  end
  -- A tree without jit/prof/svg.lua: the missing module is named.
  local src = os.getenv("LJPROF_SRC") or io.popen("pwd"):read("*l")
  local tree = path("tree")
  sh("mkdir -p tree/jit/prof && cp " .. q(src .. "/jit/prof.lua") .. " tree/jit/ && cp " ..
     q(src .. "/jit/prof/model.lua") .. " " .. q(src .. "/jit/prof/text.lua") .. " " ..
     q(src .. "/jit/prof/options.lua") .. " " ..
     q(src .. "/jit/prof/output.lua") .. " " .. q(src .. "/jit/prof/folded.lua") ..
     " tree/jit/prof/")
  local s, code = sh("LUA_PATH=" .. q(tree .. "/?.lua;;") .. " luajit -jprof=f/format=svg,x.svg " .. workload)
  t.ok(s:find("jit.prof: format svg is not available (module 'jit.prof.svg' not found)",
    1, true), s)
  t.ok(code ~= 0 and not s:find("result", 1, true), "before the program runs")
  t.eq(select(2, s:gsub("\n", "")), 1, "one line")
end)

-- Whatever ljprof allocates before the program is loaded moves the
-- program's bytecode, and LuaJIT's choice of traces with it (richards got
-- another set of traces, 30% slower, from the 90 KB the model and writers
-- took): a starting run loads the library and the option reader only, and
-- the rest when it writes, with the module path it started with.
t.case("start loads only the option reader; the writers load at stop, from the start's path", function()
  write(path("loaded.lua"), [[
local names = {}
for _, m in ipairs({"jit.prof.model", "jit.prof.text", "jit.prof.output", "jit.prof.folded",
                    "jit.prof.pprof", "jit.vmdef"}) do
  if package.loaded[m] then names[#names + 1] = m end
end
io.write("loaded at start: ", #names == 0 and "none" or table.concat(names, " "), "\n")
package.path, package.cpath = "./nothing/?.lua", "./nothing/?.so"  -- the program's own
local s = 0
for i = 1, 3e7 do s = s + i % 3 end
io.write("result ", s, "\n")
]])
  os.remove(path("ld.txt"))
  os.remove(path("ld.pb.gz"))
  local s, code = run("-jprof=f,ld.txt,ld.pb.gz", "loaded.lua")
  t.ok(code == 0 and s:find("loaded at start: none", 1, true), s)
  t.ok((read(path("ld.txt")) or ""):find("loaded.lua", 1, true), "text written: " .. s)
  t.ok(#(read(path("ld.pb.gz")) or "") > 0, "pprof written: " .. s)
end)

t.case("stop writes in a state of ljprof's own: the program's heap does not grow, nor its modules", function()
  -- Many distinct stacks, so that the model and the views are large; the
  -- program's collector is stopped, so its heap only grows.
  write(path("apart.lua"), [[
local prof, ljprof = require("jit.prof"), require("ljprof")
local broken = ... == "broken"
if broken then ljprof.write_apart = function() return nil, "test: no state" end end
local fs = {}
for i = 1, 400 do
  fs[i] = loadstring("local n = ... local s = 0 for j = 1, n do s = s + j % 7 end return s", "=f" .. i)
end
prof.start("G/clock=wall/rate=2000", "apart.txt")
local t0 = os.clock()
while os.clock() - t0 < 0.6 do for i = 1, 400 do fs[i](300) end end
collectgarbage("stop")
local kb = collectgarbage("count")
prof.stop()
io.write(string.format("grew %.0f KB; model %s\n", collectgarbage("count") - kb,
  package.loaded["jit.prof.model"] and "loaded" or "not loaded"))
]])
  os.remove(path("apart.txt"))
  local s, code = run("", "apart.lua")
  local kb = tonumber(s:match("grew (%-?%d+) KB"))
  local lines = select(2, (read(path("apart.txt")) or ""):gsub("\n", ""))
  t.ok(code == 0 and kb and lines >= 200, "written: " .. lines .. " stacks; " .. s)
  t.ok(kb and kb < 64 and s:find("model not loaded", 1, true),
       "the program's heap grew by less than 64 KB, and the writers stayed out of it: " .. s)
  -- Where no such state can be made, the program's own state writes.
  os.remove(path("apart.txt"))
  s, code = run("", "apart.lua broken")
  local lines2 = select(2, (read(path("apart.txt")) or ""):gsub("\n", ""))
  t.ok(code == 0 and lines2 >= 200 and s:find("model loaded", 1, true),
       "fallback written in the program's state: " .. lines2 .. " stacks; " .. s)
end)

t.case("clock=, rate= and duration= reach the recording", function()
  run("-jprof=/clock=wall/format=raw,w.ljprof", workload)
  local raw = require("jit.prof.raw")
  local p, meta = raw.read(path("w.ljprof"))
  t.ok(p and meta.clock == "wall", "clock wall: " .. tostring(meta and meta.clock))
  run("-jprof=/rate=250/format=raw,r.ljprof", workload)
  p, meta = raw.read(path("r.ljprof"))
  t.ok(p and meta.interval_us == 4000, "rate 250: " .. tostring(meta and meta.interval_us))
  -- duration: only the first 0.1 s of a ~0.3 s run at 1 ms wall clock.
  run("-jprof=i1/clock=wall/format=raw,full.ljprof", workload)
  run("-jprof=i1/clock=wall/duration=0.1/format=raw,d.ljprof", workload)
  local pf = raw.read(path("full.ljprof"))
  local pd = raw.read(path("d.ljprof"))
  t.ok(pf and pd and pd.total > 0 and pd.total < pf.total * 0.6,
    "duration 0.1: " .. tostring(pd and pd.total) .. " of " .. tostring(pf and pf.total))
end)

-- Synthetic profiles: exact text.

-- One sample entry as ljprof.summary() gives it (model.KEY_FMT keys).
local function entry(frames, count, vmstate, zone)
  local t2 = {}
  for i, f in ipairs(frames) do t2[i] = f[1] .. model.FIELD .. f[2] end
  return {stack = table.concat(t2, model.FRAME), count = count, vmstate = vmstate or "I",
          zone = zone or ""}
end

local MAIN = {"/src/app.lua:0", "/src/app.lua:30"}
local function fn(name, line) return {name, "/src/app.lua:" .. line} end

t.case("zones (z, zf, fz): the -jp text, (none) for samples without a zone", function()
  local p = model.collect({
    entry({MAIN, fn("work", 5)}, 42, "I", "AI"),
    entry({MAIN, fn("work", 5)}, 23, "I", "PHYS"),
    entry({MAIN, fn("work", 6)}, 21, "N", "PHYS.sub"),
    entry({MAIN, fn("work", 5)}, 14, "I", ""),
  })
  t.eq(text.render(p, "z"), "42%  AI\n23%  PHYS\n21%  PHYS.sub\n14%  (none)\n", "z")
  t.eq(text.render(p, "zf"), "42%  AI\n  -- 100%  work\n23%  PHYS\n  -- 100%  work\n" ..
    "21%  PHYS.sub\n  -- 100%  work\n14%  (none)\n  -- 100%  work\n", "zf")
  t.eq(text.render(p, "fz"), "100%  work\n  <- 42%  AI\n  <- 23%  PHYS\n  <- 21%  PHYS.sub\n" ..
    "  <- 14%  (none)\n", "fz")
  t.eq(text.render(p, "zr"), "   42  AI\n   23  PHYS\n   21  PHYS.sub\n   14  (none)\n", "zr")
  t.eq(text.render(p, "vz"), text.render(p, "z"), "v and z: z wins")
end)

t.case("text renderer: -jp layouts on a synthetic profile", function()
  local p = model.collect({
    entry({MAIN, fn("outer", 10), fn("inner", 3)}, 60, "N"),
    entry({MAIN, fn("outer", 11)}, 30, "I"),
    entry({MAIN, {"[builtin#" .. 999 .. "]", "[builtin#999]"}}, 8, "C"),
    entry({MAIN}, 2, "G"),
  })
  t.eq(text.render(p, "f"), "60%  inner\n30%  outer\n 8%  [builtin#999]\n", "f, m3")
  t.eq(text.render(p, "fm0"), "60%  inner\n30%  outer\n 8%  [builtin#999]\n 2%  app.lua:0\n", "m0")
  t.eq(text.render(p, "F"), "60%  app.lua:inner\n30%  app.lua:outer\n 8%  [builtin#999]\n", "F")
  t.eq(text.render(p, "pl"), "60%  /src/app.lua:3\n30%  /src/app.lua:11\n 8%  [builtin#999]\n", "pl")
  t.eq(text.render(p, "2"), "60%  inner < outer\n30%  outer < app.lua:0\n 8%  [builtin#999] < app.lua:0\n", "2")
  t.eq(text.render(p, "-3"), "60%  app.lua:0 > outer > inner\n30%  app.lua:0 > outer\n" ..
    " 8%  app.lua:0 > [builtin#999]\n", "-3")
  t.eq(text.render(p, "s"), "60%  inner\n  <- 100%  outer\n30%  outer\n  <- 100%  app.lua:0\n" ..
    " 8%  [builtin#999]\n  <- 100%  app.lua:0\n", "s")
  t.eq(text.render(p, "-s"), "60%  outer\n  -> 100%  inner\n40%  app.lua:0\n  -> 75%  outer\n" ..
    "  -> 20%  [builtin#999]\n", "-s: split at the first ' > '")
  t.eq(text.render(p, "fl"), "60%  inner\n  -- 100%  app.lua:3\n30%  outer\n  -- 100%  app.lua:11\n" ..
    " 8%  [builtin#999]\n  -- 100%  [builtin#999]\n", "fl")
  t.eq(text.render(p, "v"), "60%  Compiled\n30%  Interpreted\n 8%  C code\n", "v")
  t.eq(text.render(p, "vr"), "   60  Compiled\n   30  Interpreted\n    8  C code\n", "vr, m3")
  t.eq(text.render(p, "G"), "app.lua:0;outer;inner 60\napp.lua:0;outer 30\napp.lua:0;[builtin#999] 8\n" ..
    "app.lua:0 2\n", "G: every stack, root first")
  t.eq(text.render(p, "Gv"), "60%  Compiled\n30%  Interpreted\n 8%  C code\n", "Gv: no stack, normal output")
  t.eq(text.render(model.collect({}), "f"), "[No samples collected]\n", "no samples")
  t.eq(text.render(model.collect({}), "G"), "", "no samples, G")
  t.eq(text.render(model.collect({}), "a"), "[No samples collected]\n", "no samples, a")
end)

t.case("annotation on a synthetic profile: excerpts, C leaves, raw width", function()
  local src = path("syn.lua")
  local body = {}
  for i = 1, 20 do body[i] = "line" .. i end
  write(src, table.concat(body, "\n") .. "\n")
  local function at(line) return {"f", src .. ":" .. line} end
  local p = model.collect({
    entry({at(20), at(2)}, 50),
    entry({at(20), at(9), {"string.rep", "string.rep"}}, 30),  -- C leaf: charged to line 9
    entry({at(20), at(18)}, 20),
  })
  t.eq(text.render(p, "a"), "\n====== " .. src .. " ======\n@@ 1 @@\n" ..
    "      | line1\n  50% | line2\n      | line3\n      | line4\n      | line5\n" ..
    "      | line6\n      | line7\n      | line8\n  30% | line9\n      | line10\n" ..
    "      | line11\n      | line12\n" ..
    "@@ 15 @@\n      | line15\n      | line16\n      | line17\n  20% | line18\n      | line19\n" ..
    "      | line20\n", "a")
  local all = text.render(p, "Ar")
  t.ok(all:find("\n   50 | line2\n", 1, true) and all:find("\n      | line1\n", 1, true),
    "Ar: 5-digit counts: " .. all)
  local big = model.collect({entry({at(20), at(2)}, 1234567)})
  t.ok(text.render(big, "Ar"):find("\n1234567 | line2\n", 1, true), "raw width grows with log10")
end)

t.case("folded renderer: root first, one line per stack, names cleaned", function()
  local p = model.collect({
    entry({MAIN, fn("outer", 10), fn("inner", 3)}, 60),
    entry({MAIN, fn("outer", 10), fn("inner", 4)}, 5),   -- same f stack: merged
    entry({MAIN, {"we;ird\nname", "/src/app.lua:7"}}, 7),
    entry({}, 1),
  })
  t.eq(folded.render(p, {}), "app.lua:0;outer;inner 65\napp.lua:0;we,ird name 7\n(no stack) 1\n", "f")
  t.eq(folded.render(p, {scope = "l"}), "app.lua:30;app.lua:10;app.lua:3 60\napp.lua:30;app.lua:7 7\n" ..
    "app.lua:30;app.lua:10;app.lua:4 5\n(no stack) 1\n", "l")
  t.ok(folded.render(p, {scope = "F", fullpath = true}):find("^/src/app.lua:0;/src/app.lua:outer;"),
    "F with full paths")
end)

t.case("option parsing: -jp's interplay", function()
  local v = text.parse("s")
  t.ok(v.split == 2 and v.depth == 2, "s: depth 2")
  v = text.parse("-s")
  t.ok(v.split == 2 and v.depth == -2, "-s: depth -2")
  v = text.parse("Fl")
  t.ok(v.split == 3 and v.label == "F" and v.scope == "l", "Fl: F keys, lines second")
  v = text.parse("vf")
  t.eq(v.split, 1, "vf: state first")
  v = text.parse("fv")
  t.eq(v.split, 0, "fv: state second")
  v = text.parse("aG")
  t.ok(v.ann == 3 and v.fmt == "ann", "a wins over G")
  v = text.parse("Aa")
  t.eq(v.ann, 0, "A wins over a")
  v = text.parse("Gm5")
  t.ok(v.min == 0 and v.raw == true and v.depth == -100, "G: min 0, depth -100")
  v = text.parse(nil)
  t.ok(v.scope == "f" and v.min == 3 and v.depth == 1 and not v.interval, "defaults")
  t.raises(function() text.parse("q") end, "bad view 'q' (letter 'q' unknown; accepted: ")
end)

os.execute("rm -rf " .. q(dir))
t.done()
