-- Exact call counts (record{calls=true}, -jprof=/calls=on, ljprof --calls):
-- every call of every function counted exactly, with the JIT off while
-- counting and put back at stop; the program's own hook keeps its events;
-- the calls report (jit/prof/calls.lua) and the raw format carry the
-- counts. Checks are exact for counts and events; sampled time only gets
-- wide, statistical checks. The cost per counted call is printed, never
-- asserted.
local t = require("t")
local ljprof = require("ljprof")
local raw = require("jit.prof.raw")

local LUAJIT = arg and arg[-1] or "luajit"
local SRC = os.getenv("LJPROF_SRC") or "."
local BUILD = os.getenv("LJPROF_BUILD") or "build"
local ENV = string.format("LUA_PATH='%s/?.lua;%s/jit/?.lua;;' LUA_CPATH='%s/lib?.so;;' ",
                          SRC, SRC, BUILD)

-- Calls of the counted function named name (first call-site name) or
-- with func == name.
local function calls_of(name, list)
  list = list or ljprof.calls()
  local n, found = 0, false
  for _, e in ipairs(list) do
    if e.name == name or e.func == name then n = n + e.calls; found = true end
  end
  return found and n or nil
end

local function by_func(list)
  local m = {}
  for _, e in ipairs(list) do m[e.func] = e end
  return m
end

local write = t.write

local function run(cmd)
  local p = io.popen(cmd .. " 2>&1")
  local out = p:read("*a")
  p:close()
  return out
end

-- A program with known calls; each function is defined on its own line
-- (functions defined on one line count together: "chunk:linedefined").
local function f(x)
  return x + 1
end
local function make(k)
  return function(y)
    return y * k
  end
end
local function rec(n)
  if n == 0 then return 0 end
  return 1 + rec(n - 1)
end
local function tail(n)
  return f(n)        -- a tail call: f counted too
end
local function body(a)
  local b = coroutine.yield(f(a))
  return f(b)
end

local function known()
  for i = 1, 1000 do f(i) end                    -- f: 1000
  for k = 1, 10 do                               -- 10 closures of one
    local g = make(k)                            -- prototype, 5 calls
    for i = 1, 5 do g(i) end                     -- each: 50
  end
  rec(20)                                        -- rec: 21
  for i = 1, 7 do tail(i) end                    -- tail: 7, f: +7
  for i = 1, 3 do pcall(f, i) end                -- pcall: 3, f: +3
  local co = coroutine.create(body)
  coroutine.resume(co, 1)                        -- body: 1, f: +1
  coroutine.resume(co, 2)                        -- f: +1
  local s = ("ab"):rep(3)                        -- string.rep: 2
  s = string.rep(s, 2)
  return s
end

t.case("exact counts: loops, closures, recursion, tail calls, pcall, coroutines, C", function()
  local jit_before = jit.status()
  ljprof.record({calls = true})
  t.eq(jit.status(), false, "JIT off while counting")
  known()
  t.ok(ljprof.stop(), "stop")
  t.eq(jit.status(), jit_before, "JIT back as it was")
  local list = ljprof.calls()
  t.eq(calls_of("f", list), 1000 + 7 + 3 + 2, "f")
  t.eq(calls_of("make", list), 10, "make")
  local inner = by_func(list)[debug.getinfo(make(1), "S").short_src:match("[^/]*$") .. ":" ..
                              debug.getinfo(make(1), "S").linedefined]
  t.ok(inner and inner.calls == 50, "closures of one prototype count together: " ..
       tostring(inner and inner.calls))
  t.eq(calls_of("rec", list), 21, "rec (recursion)")
  t.eq(calls_of("tail", list), 7, "tail")
  t.eq(calls_of("pcall", list), 3, "pcall (a builtin)")
  t.eq(by_func(list)["test_calls.lua:" .. debug.getinfo(body, "S").linedefined].calls, 1,
       "coroutine body")
  t.eq(calls_of("coroutine.resume", list), 2, "coroutine.resume")
  t.eq(calls_of("coroutine.yield", list), 1, "coroutine.yield")
  t.eq(calls_of("coroutine.create", list), 1, "coroutine.create")
  t.eq(calls_of("string.rep", list), 2, "string.rep, as a method and a field")
  t.eq(calls_of("known", list), 1, "known")
  local e = by_func(list)["test_calls.lua:" .. debug.getinfo(f, "S").linedefined]
  t.ok(e, "f listed as chunk:linedefined")
  if e then
    t.eq(e.what, "Lua", "what")
    t.eq(e.linedefined, debug.getinfo(f, "S").linedefined, "linedefined")
    t.eq(e.lastlinedefined, debug.getinfo(f, "S").lastlinedefined, "lastlinedefined")
    t.ok(e.source:sub(1, 1) == "@" and e.source:find("test_calls.lua", 1, true), "source " .. e.source)
  end
  for _, x in ipairs(list) do
    if x.what == "C" then
      t.ok(not x.func:find("^%[builtin#"), "builtins by name: " .. x.func)
    end
  end
  -- counts are exact, run after run
  ljprof.record({calls = true})
  known()
  ljprof.stop()
  t.eq(calls_of("f"), 1012, "the same counts again")
  -- a run without calls=true has no counts
  ljprof.record({})
  known()
  ljprof.stop()
  t.eq(#ljprof.calls(), 0, "no counts without calls=true")
end)

t.case("JIT state put back: on stays on, off stays off", function()
  jit.on()
  ljprof.record({calls = true})
  t.eq(jit.status(), false, "off while counting")
  ljprof.stop()
  t.eq(jit.status(), true, "on again")
  jit.off()
  ljprof.record({calls = true})
  ljprof.stop()
  t.eq(jit.status(), false, "still off")
  jit.on()
  t.raises(function() ljprof.record({calls = 1}) end, "bad calls '1' (accepted: true or false)")
end)

local function mkA(k)
  return function() return k end
end
local function mkB(k)
  return function() return k + 1 end
end

t.case("a collected function's address reused: no miscount (weak keys)", function()
  ljprof.record({calls = true})
  local addrs = {}
  for i = 1, 1000 do
    local a = mkA(i)
    a()
    addrs[tostring(a)] = true
  end
  collectgarbage()
  collectgarbage()
  local reused = 0
  for i = 1, 1000 do
    local b = mkB(i)
    b()
    if addrs[tostring(b)] then reused = reused + 1 end
  end
  ljprof.stop()
  print(string.format("  %d of 1000 functions at a collected function's address", reused))
  t.ok(reused > 0, "addresses were reused (else this case proves nothing)")
  local m = by_func(ljprof.calls())
  local la = debug.getinfo(mkA(1), "S").linedefined
  local lb = debug.getinfo(mkB(1), "S").linedefined
  t.eq(m["test_calls.lua:" .. la].calls, 1000, "A's closures: 1000 calls")
  t.eq(m["test_calls.lua:" .. lb].calls, 1000, "B's closures: 1000 calls, none taken for A's")
end)

-- The program's own hook: same events as unprofiled, with counting and
-- fast sampling (the hook re-armed and rested thousands of times).
local function leaf(x) return x + 1 end
local function lt(a, b) return a < b end
local function work(n)
  local s = 0
  for i = 1, n do
    s = s + leaf(i % 7)
    if i % 50 == 0 then
      local arr = {5, 3, 9, 1, 7}
      table.sort(arr, lt)
      s = s + arr[1]
    end
  end
  return s
end

local WORK_FIRST = debug.getinfo(work, "S").linedefined
local WORK_LAST = debug.getinfo(work, "S").lastlinedefined

local function events(mask, fn)
  local ev = {total = 0}
  local getinfo = debug.getinfo
  debug.sethook(function(e, line)
    ev.total = ev.total + 1
    local k = e
    if e == "line" then  -- lines of work() only: the callers' differ
      k = (line >= WORK_FIRST and line <= WORK_LAST) and ("line:" .. line) or "line:other"
    elseif e == "call" then
      local fn2 = getinfo(2, "f").func
      k = "call:" .. (fn2 == leaf and "leaf" or fn2 == lt and "lt" or "other")
    end
    ev[k] = (ev[k] or 0) + 1
  end, mask)
  fn()
  local h, m = debug.gethook()
  debug.sethook()
  ev.mask_seen = m
  ev.hook_seen = type(h)
  return ev
end

local same = t.same_keys

t.case("the program's hook keeps its events while counting (sampled at 2 kHz)", function()
  jit.off()
  for _, mask in ipairs({"c", "l", "cr", "crl"}) do
    local base = events(mask, function() work(100000) end)
    -- set while counting (through the debug.sethook wrapper)
    ljprof.record({calls = true, clock = "wall", interval = 0.5})
    local ev = events(mask, function() work(100000) end)
    t.ok(ljprof.stop(), "stop")
    local st = ljprof.stats()
    same(base, ev, "events with mask " .. mask)
    t.eq(calls_of("leaf"), 100000, "leaf counted exactly (" .. mask .. ")")
    t.eq(by_func(ljprof.calls())["test_calls.lua:" .. debug.getinfo(lt, "S").linedefined].calls,
         100000 / 50 * 10, "lt counted (" .. mask .. ")")  -- 10 per sort
    if mask:find("c") then t.eq(ev["call:lt"], 100000 / 50 * 10, "lt calls seen by the hook") end
    t.eq(st.pending, 0, "nothing pending")
    t.eq(st.completed + st.dropped, st.ticks, "ticks == completed + dropped")
    print(string.format("  mask %-3s: %d events, %d ticks, %d safe points", mask, ev.total,
                        st.ticks, st.safepoints))
  end
  -- set before counting starts, removed after it stops
  local ev = {n = 0}
  debug.sethook(function(e) if e == "call" then ev.n = ev.n + 1 end end, "c")
  ljprof.record({calls = true, clock = "wall", interval = 0.5})
  local h, m = debug.gethook()
  t.eq(type(h), "function", "gethook while counting: the program's function")
  t.eq(m, "c", "gethook while counting: its mask")
  for i = 1, 500 do leaf(i) end
  ljprof.stop()
  h, m = debug.gethook()
  debug.sethook()
  t.eq(type(h), "function", "the program's hook still installed after stop")
  t.eq(m, "c", "with its mask")
  t.ok(ev.n >= 500, "the program's hook saw the calls: " .. ev.n)
  t.eq(calls_of("leaf"), 500, "and they were counted")
  t.eq(debug.gethook(), nil, "no hook left")
  jit.on()
end)

t.case("a program count hook is forwarded while counting", function()
  jit.off()
  local function count_events()
    local n = 0
    debug.sethook(function() n = n + 1 end, "", 1000)
    work(50000)
    debug.sethook()
    return n
  end
  local base = count_events()
  ljprof.record({calls = true, clock = "wall", interval = 1})
  local n = count_events()
  ljprof.stop()
  print(string.format("  count events: %d unprofiled, %d while counting and sampling", base, n))
  -- each sample restarts the program's countdown: fewer, never more
  t.ok(n <= base + 1 and n >= base * 0.5, string.format("%d vs %d", n, base))
  t.eq(calls_of("leaf"), 50000, "leaf counted")
  jit.on()
end)

t.case("counting with sampling at 1 kHz wall clock", function()
  ljprof.record({calls = true, clock = "wall", interval = 1})
  local t0, rounds = os.clock(), 0
  while os.clock() - t0 < 0.4 do
    work(2000)
    rounds = rounds + 1
  end
  ljprof.stop()
  local st = ljprof.stats()
  t.eq(calls_of("leaf"), rounds * 2000, "leaf: exact")
  t.eq(calls_of("work"), rounds, "work: exact")
  t.eq(calls_of("table.sort"), rounds * 40, "table.sort: exact")
  t.ok(st.ticks >= 150, "sampled meanwhile: " .. st.ticks)
  t.eq(st.pending, 0, "nothing pending")
  t.eq(st.completed + st.dropped, st.ticks, "ticks == completed + dropped")
end)

t.case("ljprof's own code: no call counted from record() and stop() but stop itself", function()
  ljprof.record({calls = true})
  ljprof.stop()
  local list = ljprof.calls()
  t.eq(#list, 1, "one function")
  t.eq(list[1] and list[1].func, "ljprof.stop", "the call of stop")
end)

-- The report, through -jprof, from a script with known calls.
local SCRIPT = [[
local function fib(n)
  if n < 2 then return n end
  return fib(n - 1) + fib(n - 2)
end

local function spin(n)
  local s = 0
  for i = 1, n do s = s + i % 7 end
  return s
end

local chunk = loadstring("local x = 0 for i = 1, 2e5 do x = x + i end return x", "=(inline)")

local t0 = os.clock()
local rounds = 0
while os.clock() - t0 < 0.3 do
  fib(12)
  spin(50000)
  chunk()
  rounds = rounds + 1
end
io.stderr:write("rounds ", rounds, "\n")
]]

local function report_checks(out, what)
  local rounds = tonumber(out:match("rounds (%d+)"))
  t.ok(rounds and rounds > 0, what .. ": script ran:\n" .. out)
  if not rounds then return end
  t.ok(out:find("Calls: %d+ counted exactly %(JIT off while counting%); time: %d+ samples of 1 ms"),
       what .. ": header:\n" .. out)
  t.ok(out:find("\n%s+ncalls%s+self ms%s+total ms%s+percall  function\n"), what .. ": table header")
  -- fib(12) makes 465 calls
  local fibcalls = out:match("\n%s+(%d+)%s+%S+%s+%S+%s+%S+%s+%S+:1 %(fib%)\n")
  t.eq(tonumber(fibcalls), rounds * 465, what .. ": fib's calls in the table")
  t.ok(out:find("\n%s+" .. rounds .. "%s+%S+%s+%S+%s+%S+%s+%S+:6 %(spin%)\n"),
       what .. ": spin's calls:\n" .. out)
  t.ok(out:find("\n====== [^\n]*%.lua ======\n%s+ncalls%s+self ms%s+total ms%s+percall |\n"),
       what .. ": listing header")
  t.ok(out:find("\n%s+" .. rounds * 465 .. "%s+%S+ | local function fib%(n%)\n") or
       out:find("\n%s+" .. rounds * 465 .. "%s+%S+%s+%S+%s+%S+ | local function fib%(n%)\n"),
       what .. ": ncalls and percall on fib's definition line")
  t.ok(out:find("\n[^\n]*%d[^\n]* |   for i = 1, n do s = s %+ i %% 7 end\n"),
       what .. ": spin's loop line has sampled time")
  t.ok(out:find("\n====== %(inline%) ======\n%[Cannot annotate non%-file%]\n"),
       what .. ": a non-file chunk")
end

t.case("ljprof's own work is one root frame, never inside the program's stacks", function()
  -- Counting calls runs ljprof's hook on every call: many samples land in
  -- it. They used to sit on top of the program's stacks ("mid;[ljprof]").
  local tmp = t.tmpname(".lua")
  write(tmp, [[
local function leaf(x) return x + 1 end
local function mid(x) return leaf(x) + leaf(x) end
local s, t0 = 0, os.clock()
while os.clock() - t0 < 0.5 do for i = 1, 1000 do s = s + mid(i) end end
]])
  local out = t.tmpname(".folded")
  run(ENV .. LUAJIT .. " -jprof=G/calls=on/clock=wall/rate=2000," .. out .. " " .. tmp)
  local folded = t.read(out) or ""
  local own, inside = 0, 0
  for line in folded:gmatch("[^\n]+") do
    local n = line:match("^%[ljprof%] (%d+)$")
    if n then own = own + tonumber(n)
    elseif line:find("[ljprof", 1, true) then inside = inside + 1 end
  end
  t.ok(own > 0, "samples in ljprof's own work, as a root: " .. folded)
  t.eq(inside, 0, "no [ljprof] frame inside a program stack:\n" .. folded)
  t.ok(folded:find(";mid;leaf %d+\n") or folded:find(";mid %d+\n"), "the program's stacks: " .. folded)
  os.remove(tmp)
  os.remove(out)
end)

t.case("the calls report through -jprof: table and annotated listing", function()
  local tmp = t.tmpname(".lua")
  write(tmp, SCRIPT)
  local out = run(ENV .. LUAJIT .. " -jprof=/calls=on/clock=wall/rate=1000 " .. tmp)
  report_checks(out, "excerpts")
  t.ok(out:find("\n@@ 1 @@\n"), "excerpts start with @@ n @@")
  t.ok(not out:find("Hot but interpreted", 1, true), "no hot-but-interpreted section")
  -- whole files with A; -jp's own report first for other letters
  local outA = run(ENV .. LUAJIT .. " -jprof=A/calls=on/clock=wall/rate=1000 " .. tmp)
  report_checks(outA, "whole files")
  t.ok(not outA:find("\n@@ %d+ @@\n"), "A: no excerpt markers")
  -- every line is listed; a line run once in a few nanoseconds has no columns
  -- (loadstring's line may carry a sample of the parser, so only its presence)
  t.ok(outA:find("\n[^\n]*| local chunk = loadstring") ~= nil, "A: every line")
  t.ok(outA:find("\n%s+| local rounds = 0\n") ~= nil, "A: unsampled lines have empty columns")
  local outF = run(ENV .. LUAJIT .. " -jprof=f/calls=on/clock=wall/rate=1000 " .. tmp)
  t.ok(outF:find("^rounds %d+\n%s*%d+%%  ") or outF:find("\n%s*%d+%%  spin\n"),
       "f: -jp's report before:\n" .. outF)
  t.ok(outF:find("\n\nCalls: "), "f: then the calls report")
  local bad = run(ENV .. LUAJIT .. " -jprof=/calls=maybe " .. tmp)
  t.ok(bad:find("bad calls 'maybe' (accepted: on, off)", 1, true), "one line: " .. bad)
  -- an unreadable file is reported, the rest still annotated
  local gone = t.tmpname(".lua")
  write(gone, "local function g() return 1 end\nfor i = 1, 10 do g() end\nos.remove(arg[0])\n")
  local outG = run(ENV .. LUAJIT .. " -jprof=/calls=on " .. gone)
  t.ok(outG:find("====== ERROR: " .. gone, 1, true), "missing file:\n" .. outG)
  os.remove(tmp)
end)

t.case("raw profiles carry the counts; version 1 files still load", function()
  local tmp = t.tmpname(".lua")
  local rawf = t.tmpname(".ljprof")
  write(tmp, SCRIPT)
  local out = run(ENV .. LUAJIT .. " -jprof=/calls=on/clock=wall/rate=1000," .. rawf .. " " .. tmp)
  local p, meta = raw.read(rawf)
  t.ok(p, "raw profile read: " .. tostring(meta) .. out)
  if p then
    local f = io.open(rawf)
    t.eq(f:read("*l"), "LJPROF-RAW 3", "version 3: counts, functions, aborts")
    f:close()
    t.ok(p.calls and #p.calls > 0, "counts in the file")
    local rounds = tonumber(out:match("rounds (%d+)"))
    local fib
    for _, c in ipairs(p.calls or {}) do if c.name == "fib" then fib = c end end
    t.ok(fib and fib.calls == rounds * 465 and fib.what == "Lua" and fib.linedefined == 1 and
         fib.lastlinedefined == 4, "fib's record")
    -- ljprof report renders the calls report
    local rep = run(BUILD .. "/ljprof report " .. rawf)
    report_checks(out:match("rounds %d+\n") .. rep, "ljprof report")
    -- round trip
    local p2 = raw.parse(raw.render(p, meta), "again")
    t.ok(p2 and #p2.calls == #p.calls, "render + parse keep the counts")
  end
  -- a version 1 file (no counts) still loads
  local v1 = "LJPROF-RAW 1\nmeta\tclock\twall\nmeta\tinterval_us\t10000\nframe\t1\tL\t/x.lua\t3\t1\t-\nsample\t5\tI\t\t1\nend\t1\t1\n"
  local p1, err = raw.parse(v1, "v1")
  t.ok(p1 and p1.total == 5 and p1.calls == nil, "version 1 loads: " .. tostring(err))
  t.eq(raw.render(p1, {clock = "wall"}):match("^[^\n]*"), "LJPROF-RAW 1", "and writes as version 1")
  local p3, err3 = raw.parse(v1:gsub("\nend\t1\t1\n", "\ncall\t3\tLua\tx.lua:1\t-\t@/x.lua\t1\t4\nend\t1\t1\n"), "bad")
  t.ok(not p3 and err3:find("expected a raw profile record", 1, true), "call records need version 2: " .. tostring(err3))
  local p4, err4 = raw.parse("LJPROF-RAW 2\nmeta\tinterval_us\t10000\ncall\t3\tLua\tx.lua:1\t-\t@/x.lua\t1\t4\nend\t0\t0\n", "trunc")
  t.ok(not p4 and err4:find("an end record with the counts", 1, true), "the end record counts the calls: " .. tostring(err4))
  os.remove(tmp)
  os.remove(rawf)
end)

t.case("counts written on os.exit() and SIGTERM", function()
  local tmp = os.tmpname()
  local script, out = tmp .. ".lua", tmp .. ".ljprof"
  write(script, [[
local function spin(n) local s = 0 for i = 1, n do s = s + i % 3 end return s end
io.stdout:write("started\n") io.stdout:flush()
for k = 1, (tonumber(arg[1]) or 1e9) do spin(1000) end
os.exit(3)
]])
  local jp = LUAJIT .. " -jprof=/calls=on/format=raw," .. out .. " " .. script
  local function spins()
    local p = raw.read(out)
    for _, c in ipairs(p and p.calls or {}) do if c.name == "spin" then return c.calls end end
  end
  os.remove(out)
  local s = run(ENV .. jp .. " 500; echo status $?")
  t.ok(s:find("status 3"), "os.exit status kept: " .. s)
  t.eq(spins(), 500, "os.exit: the counts written")
  os.remove(out)
  s = run(ENV .. jp .. " > " .. tmp .. ".log 2>&1 & pid=$!; for i in $(seq 100); do " ..
          "grep -q started " .. tmp .. ".log && break; sleep 0.05; done; sleep 0.3; " ..
          "kill -TERM $pid; wait $pid; echo status $?")
  t.ok(s:find("status 143"), "killed by SIGTERM: " .. s)
  local n = spins()
  t.ok(n and n > 0, "SIGTERM: the counts written: " .. tostring(n))
  os.remove(out)
  os.remove(script)
  os.remove(tmp .. ".log")
  os.remove(tmp)
end)

t.case("ljprof --calls prints the report", function()
  local tmp = t.tmpname(".lua")
  write(tmp, SCRIPT)
  local out = run(BUILD .. "/ljprof --calls -r 1000 -c wall " .. tmp)
  report_checks(out, "ljprof --calls")
  t.ok(out:find("Samples: %d+ %(dropped %d+%) %-> standard output"), "summary line")
  os.remove(tmp)
end)

t.case("cost per counted call (printed)", function()
  jit.off()
  jit.flush()
  local N = 2e6
  local function loop() for i = 1, N do leaf(i) end end
  local function time(fn) local t0 = os.clock(); fn(); return os.clock() - t0 end
  local base, counted = math.huge, math.huge
  for _ = 1, 3 do base = math.min(base, time(loop)) end
  for _ = 1, 3 do
    ljprof.record({calls = true, interval = 1000})
    counted = math.min(counted, time(loop))
    ljprof.stop()
  end
  t.eq(calls_of("leaf"), N, "counted")
  print(string.format("  %.1f ns per counted call (interpreted call: %.1f ns)",
                      (counted - base) / N * 1e9, base / N * 1e9))
  jit.on()
end)

t.done()
