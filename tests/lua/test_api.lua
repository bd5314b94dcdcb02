-- API behaviour of the Lua module: start/stop exactly like jit.profile
-- (arguments, errors, callback contract) plus ljprof's improvements
-- (callback errors stop profiling, start twice is an error, stop returns a
-- status), record/summary/stats, options and their errors, folded output.
--
-- Statistical checks run workloads until enough samples were taken
-- (bounded by a number of rounds, never by a time assertion) and have
-- generous tolerances. Checks on tick WEIGHTS (who dominates, delivered vs
-- completed) use the thread's CPU clock: with a wall clock, a thread that
-- is descheduled for 100 ms on a loaded machine gets one sample of weight
-- 100 wherever it resumes, which can outweigh the whole workload. Checks on
-- counts of callbacks use the wall clock (many samples, no kernel-tick
-- granularity).
local t = require "t"
local ljprof = require "ljprof"
local P = require "jit.profile"  -- only its argument errors: never started here

jit.off()  -- everything interpreted: samples reach the safe point at once

local SRC = debug.getinfo(1, "S").short_src:match("[^/\\]*$")  -- "test_api.lua"

-- -- Workloads ---------------------------------------------------------------

local function spin(n)
  local s = 0
  for i = 1, n or 20000 do s = s + i % 7 end
  return s
end

local function hot(n) local s = 0 for i = 1, n do s = s + i % 3 end return s end
local function cold(n) local s = 0 for i = 1, n do s = s + i % 5 end return s end
local function hot2(n) local s = 0 for i = 1, n do s = s + i % 11 end return s end

-- Run step() until the profiler has completed at least n ticks (or a round
-- limit is reached: a stuck profiler then fails the count checks instead
-- of hanging the test).
local function work_until(n, step, max_rounds)
  local rounds = 0
  max_rounds = max_rounds or 20000
  while ljprof.stats().completed < n and rounds < max_rounds do
    step()
    rounds = rounds + 1
  end
  return rounds
end

local WALL1 = {clock = "wall", interval = 1}
local CPU1 = {clock = "cpu", interval = 1}
-- The host's C function (luajit's main: no Lua name, so a stable name,
-- "luajit+0x92c0", never its ASLR address), then the main chunk.
local ROOT = "^[^;@]+%+0x%x+;" .. SRC:gsub("%p", "%%%0") .. ":0;"
-- ljprof's own work (the safe point, starting): one stack of its own.
local function rooted(stack) return stack == "[ljprof]" or stack:find(ROOT) ~= nil end

local function is_int(x) return type(x) == "number" and x == math.floor(x) end

local function make_tmp()
  local name = os.tmpname()
  os.remove(name)
  return name
end

-- Every key of a stats() table with its value's type, sorted ("k=type",
-- vmstate's keys as "vmstate.K=type").
local function stat_keys(st)
  local ks = {}
  for k, v in pairs(st) do ks[#ks + 1] = k .. "=" .. type(v) end
  for k, v in pairs(st.vmstate or {}) do ks[#ks + 1] = "vmstate." .. k .. "=" .. type(v) end
  table.sort(ks)
  return table.concat(ks, " ")
end

-- stats()'s keys and types as lua_ljprof.c's field-by-field copying gave
-- them before the stats descriptor (captured from that code): before any
-- run, and of a finished run (no error, no periodic export interval).
local STATS_BEFORE = "aggregate_ns=number aggregated=number batches=number bytes=number " ..
  "complete_ns=number completed=number dropped=number entries=number handler_ns=number " ..
  "hook_ns=number merged=number name_scans=number name_searches=number " ..
  "native_frames=number native_skipped=number " ..
  "native_truncated=number native_unwinds=number pending=number safepoints=number " ..
  "samples=number signals=number stacks=number stale_signals=number ticks=number " ..
  "vmstate.C=number vmstate.G=number vmstate.I=number vmstate.J=number vmstate.N=number " ..
  "vmstate=table"
local STATS_RUN = "aborts_lost=number aborts_recorded=boolean aggregate_ns=number " ..
  "aggregated=number batches=number bytes=number cfunc_names=boolean clock=string " ..
  "complete_ns=number completed=number dropped=number duration_ns=number entries=number " ..
  "exact_lines=boolean exact_stacks=boolean expired=boolean export_ns=number " ..
  "exports=number handler_ns=number hook_ns=number host_detect=boolean host_main=boolean host_ticks=number " ..
  "inline_estimated=number inline_frames=string inline_recorded=number inline_samples=number " ..
  "inline_undecoded=number interval_us=number jit_state=boolean lend_wait_ns=number " ..
  "lend_waits=number lua_captures=number merged=number missed=number name_scans=number " ..
  "name_searches=number names_late=number names_late_found=number native_frames=number " ..
  "native_skipped=number native_truncated=number native_unwinds=number pending=number " ..
  "record_budget_spent=boolean record_events=number record_refused=number record_traces=number " ..
  "recorder_kept=number running=boolean safepoints=number samples=number signal=number " ..
  "signal_lost=boolean signals=number snap_checks=number snap_mismatches=number " ..
  "stack_checks=number stack_mismatches=number stacks=number stale_signals=number " ..
  "start_time=number state_id=number thread=string thread_id=number ticks=number " ..
  "trace_event_ns=number trace_events=number trace_source=string vmstate.C=number " ..
  "vmstate.G=number vmstate.I=number vmstate.J=number vmstate.N=number vmstate=table " ..
  "vmstate_source=string"

-- -- Before any start --------------------------------------------------------

t.case("dumpstack, stop, stats and running before any start", function()
  local co = coroutine.create(function() local function f() coroutine.yield() end f() end)
  coroutine.resume(co)
  t.eq(ljprof.dumpstack(co, "F|lZ; ", 100), P.dumpstack(co, "F|lZ; ", 100), "dumpstack")
  t.eq(ljprof.running(), false, "running()")
  local ok, a, b = pcall(ljprof.stop)
  t.ok(ok, "stop before any start raises no error: " .. tostring(a))
  t.eq(a, true, "stop before any start returns true")
  t.eq(b, nil, "no message")
  t.eq(type(ljprof.stats()), "table", "stats() before any start")
  t.eq(stat_keys(ljprof.stats()), STATS_BEFORE, "stats() keys and types before any start")
  t.eq(type(ljprof.summary()), "table", "summary() before any start")
end)

-- -- start: arguments exactly like jit.profile.start -----------------------

t.case("start argument errors match jit.profile", function()
  local cb = function() end
  -- Through a field of the same name, so the messages name the same function.
  local sets = {
    {n = 2, {}, cb}, {n = 2, true, cb}, {n = 2, cb, cb}, {n = 1, "i1"}, {n = 0},
    {n = 2, "i1", "cb"}, {n = 2, "i1", 42}, {n = 2, "i1", {}}, {n = 2, nil, nil},
    {n = 2, {}, nil},
  }
  for i, a in ipairs(sets) do
    local ok1, e1 = pcall(function() return P.start(unpack(a, 1, a.n)) end)
    local ok2, e2 = pcall(function() return ljprof.start(unpack(a, 1, a.n)) end)
    t.eq(ok1, false, "jit.profile.start fails for set " .. i)
    t.eq(ok2, false, "ljprof.start fails for set " .. i)
    t.eq(e2, e1, "error message for set " .. i)
    t.eq(ljprof.running(), false, "not running after argument error " .. i)
  end
  t.raises(function() ljprof.start({}, cb) end, "bad argument #1 to 'start' (string expected, got table)")
  t.raises(function() ljprof.start("i1") end, "bad argument #2 to 'start' (function expected, got no value)")
  t.raises(function() ljprof.start(nil, "x") end, "bad argument #2 to 'start' (function expected, got string)")
end)

t.case("start accepts nil, number and string modes", function()
  local cb = function() end
  local cases = {
    {nil, 10000}, {7, 10000}, {"", 10000}, {"i5", 5000}, {"i", 1000}, {"i0", 1000},
    {"fi2", 2000}, {"li3l", 3000}, {"xyz", 10000}, {"i2i4", 4000},
  }
  for _, c in ipairs(cases) do
    local ok, err = pcall(ljprof.start, c[1], cb)
    t.ok(ok, "start(" .. tostring(c[1]) .. ", cb): " .. tostring(err))
    t.eq(ljprof.running(), true, "running after start(" .. tostring(c[1]) .. ")")
    t.eq(ljprof.stats().interval_us, c[2], "interval of mode " .. tostring(c[1]))
    t.eq(ljprof.stop(), true, "stop after start(" .. tostring(c[1]) .. ")")
    t.eq(ljprof.running(), false, "not running after stop")
  end
  -- start returns nothing, like jit.profile.start.
  t.eq(select("#", ljprof.start("i10", cb)), 0, "start returns nothing")
  ljprof.stop()
end)

-- -- Callback contract -----------------------------------------------------

t.case("callback: (thread, samples, vmstate) on a private coroutine", function()
  local calls, sum, bad = 0, 0, {}
  local threads, cbthreads, stacks = {}, {}, {}
  local co = coroutine.create(function()
    while true do spin() coroutine.yield() end
  end)
  ljprof.start("i1", function(th, samples, vmstate, extra)
    calls = calls + 1
    if type(th) ~= "thread" then bad[#bad + 1] = "thread arg is a " .. type(th) end
    if not is_int(samples) or samples < 1 then bad[#bad + 1] = "samples " .. tostring(samples) end
    if type(vmstate) ~= "string" or not ("NICGJ"):find(vmstate, 1, true) or #vmstate ~= 1 then
      bad[#bad + 1] = "vmstate " .. tostring(vmstate)
    end
    if extra ~= nil then bad[#bad + 1] = "a fourth argument" end
    sum = sum + (tonumber(samples) or 0)
    threads[th] = (threads[th] or 0) + 1
    cbthreads[coroutine.running() or "main"] = true
    if th == co then stacks[#stacks + 1] = ljprof.dumpstack(th, "fZ;", -100) end
  end, CPU1)
  work_until(300, function() assert(coroutine.resume(co)) end)
  local ok, err = ljprof.stop()
  local st = ljprof.stats()
  t.eq(ok, true, "stop returns true: " .. tostring(err))
  t.eq(#bad, 0, "bad callback arguments: " .. table.concat(bad, ", ", 1, math.min(#bad, 5)))
  t.ok(calls > 0, "the callback ran")
  -- Threads: the workload coroutine, plus the main thread for samples that
  -- landed between resumes.
  t.ok((threads[co] or 0) > calls / 2,
    "most callbacks got the workload coroutine (" .. tostring(threads[co]) .. " of " .. calls .. ")")
  local others = 0
  for th in pairs(threads) do if th ~= co then others = others + 1 end end
  t.ok(others <= 1, "only the workload coroutine and the main thread were interrupted (" .. others .. " others)")
  -- The stack of the interrupted coroutine, dumped in the callback: spin
  -- called from the coroutine's function.
  local nspin = 0
  for _, s in ipairs(stacks) do
    if s:find(SRC .. ":%d+;spin$") then nspin = nspin + 1 end
  end
  t.ok(nspin > #stacks / 2, "coroutine stacks end in spin (" .. nspin .. " of " .. #stacks .. ")")
  -- The callback ran on one private coroutine: not the main thread (nil
  -- from coroutine.running()) and not the workload.
  local ncb = 0
  for c in pairs(cbthreads) do
    ncb = ncb + 1
    t.ok(c ~= "main", "callback ran on the main thread")
    t.ok(c ~= co, "callback ran on the workload coroutine")
    t.ok(threads[c] == nil, "callback coroutine was also an interrupted thread")
  end
  t.eq(ncb, 1, "one private coroutine for all callbacks of a run")
  -- Samples: every completed tick is delivered, except those completed by
  -- stop itself (at most a few at 1 ms).
  t.eq(st.pending, 0, "nothing pending after stop")
  t.eq(st.completed + st.dropped, st.ticks, "ticks = completed + dropped")
  t.ok(sum <= st.completed, "samples delivered (" .. sum .. ") <= completed (" .. st.completed .. ")")
  t.ok(st.completed - sum <= math.max(10, st.completed / 10),
    "samples delivered (" .. sum .. ") ~ completed (" .. st.completed .. ")")
  t.ok(sum >= 300 - 10, "enough samples: " .. sum)
end)

t.case("callback: main-thread workload gets the main thread", function()
  local threads, calls = {}, 0
  local mains = {}
  ljprof.start("i1", function(th)
    calls = calls + 1
    threads[th] = true
    mains[#mains + 1] = ljprof.dumpstack(th, "lZ;", -100):match("^[^;]*")
  end, WALL1)
  work_until(50, function() spin() end)
  t.eq(ljprof.stop(), true, "stop")
  local n = 0
  for _ in pairs(threads) do n = n + 1 end
  t.eq(n, 1, "one interrupted thread")
  t.ok(calls > 0, "callbacks")
  -- The outermost frame of the interrupted thread is the host's C function
  -- below the main chunk: this is the main thread.
  for i = 1, math.min(#mains, 20) do
    t.ok(mains[i]:find("^@0x%x+$") or mains[i]:find("^%[builtin#%d+%]$"),
      "outermost frame of the main thread is C: " .. mains[i])
  end
end)

t.case("callback error stops profiling, stop returns false + message", function()
  local calls = 0
  ljprof.start("i1", function() calls = calls + 1; error("boom in callback 42") end, WALL1)
  local rounds = 0
  while ljprof.running() and rounds < 20000 do spin(2000); rounds = rounds + 1 end
  t.eq(ljprof.running(), false, "not running after the callback error")
  t.eq(calls, 1, "the callback ran once")
  -- No more callbacks, even with more work.
  for _ = 1, 50 do spin(2000) end
  t.eq(calls, 1, "no callback after the error")
  local ok, msg = ljprof.stop()
  t.eq(ok, false, "stop returns false")
  t.ok(type(msg) == "string" and msg:find("boom in callback 42", 1, true),
    "message has the error text: " .. tostring(msg))
  t.ok(msg and msg:find(SRC, 1, true), "message has the error position: " .. tostring(msg))
  t.eq(ljprof.running(), false, "not running after stop")
  t.eq(type(ljprof.stats().error), "string", "stats().error says why the run failed")
  t.ok(ljprof.stats().error:find("boom in callback 42", 1, true), "stats().error: " .. ljprof.stats().error)
  -- A new run works and reports success.
  local calls2 = 0
  ljprof.start("i1", function() calls2 = calls2 + 1 end, WALL1)
  work_until(20, function() spin(2000) end)
  t.eq(ljprof.stop(), true, "the next run stops with true")
  t.ok(calls2 > 0, "the next run's callback ran")
  t.eq(ljprof.stats().error, nil, "no error in the next run's stats")
end)

t.case("callback error with a non-string error object", function()
  ljprof.start("i1", function() error({}) end, WALL1)
  local rounds = 0
  while ljprof.running() and rounds < 20000 do spin(2000); rounds = rounds + 1 end
  local ok, msg = ljprof.stop()
  t.eq(ok, false, "stop returns false")
  t.eq(type(msg), "string", "message is a string")
end)

-- In a child process: exactly one line on stderr, the process goes on.
local function interp()
  local i = -1
  while arg and arg[i - 1] do i = i - 1 end
  return arg and arg[i] or "luajit"
end

t.case("callback error: one line on stderr, process continues", function()
  local errfile = make_tmp()
  local script = [[
    jit.off()
    local lp = require "ljprof"
    lp.start("i1", function() error("child-boom") end, {clock = "wall"})
    local n = 0
    while lp.running() and n < 200000 do
      local s = 0 for i = 1, 2000 do s = s + i end
      n = n + 1
    end
    local ok, msg = lp.stop()
    print("after", tostring(ok), tostring(msg))
  ]]
  local scriptfile = make_tmp() .. ".lua"
  local sf = assert(io.open(scriptfile, "w"))
  sf:write(script)
  sf:close()
  local function q(s) return "'" .. s:gsub("'", "'\\''") .. "'" end
  local p = io.popen(q(interp()) .. " " .. q(scriptfile) .. " 2>" .. q(errfile) .. "; echo rc=$?")
  local out = p:read("*a")
  p:close()
  os.remove(scriptfile)
  local f = io.open(errfile)
  local err = f and f:read("*a") or ""
  if f then f:close() end
  os.remove(errfile)
  t.ok(out:find("after\tfalse\t[^\n]*child%-boom") ~= nil, "child went on after the error: " .. out)
  t.ok(out:find("rc=0", 1, true) ~= nil, "child exit code 0: " .. out)
  local lines = {}
  for l in err:gmatch("[^\n]+") do lines[#lines + 1] = l end
  t.eq(#lines, 1, "one line on stderr: " .. err)
  t.ok(err:find("child-boom", 1, true) ~= nil, "stderr names the error: " .. err)
end)

t.case("stop from inside the callback", function()
  local calls = 0
  ljprof.start("i1", function() calls = calls + 1; ljprof.stop() end, WALL1)
  local rounds = 0
  while ljprof.running() and rounds < 20000 do spin(2000); rounds = rounds + 1 end
  t.eq(ljprof.running(), false, "stopped")
  for _ = 1, 50 do spin(2000) end
  t.eq(calls, 1, "no callback after stop")
  t.eq(ljprof.stop(), true, "a later stop returns true")
end)

t.case("stop then start inside the callback: the new run takes over, as with jit.profile", function()
  local first, second, running_in_cb, err2 = 0, 0, nil, nil
  local function cb2() second = second + 1 end
  ljprof.start("i1", function()
    first = first + 1
    if first == 3 then
      ljprof.stop()
      t.eq(ljprof.running(), false, "not running between stop and start")
      ljprof.start("i2", cb2, {clock = "wall"})
      running_in_cb = ljprof.running()
      -- a second start before the callback returns is refused
      local ok, e = pcall(ljprof.start, "i1", cb2)
      err2 = ok and "accepted" or e
    end
  end, WALL1)
  local rounds = 0
  while second < 20 and rounds < 40000 do spin(2000); rounds = rounds + 1 end
  t.eq(first, 3, "the first callback ends at its stop")
  t.ok(second >= 20, "the second callback runs: " .. second)
  t.eq(running_in_cb, true, "running after start in the callback")
  t.ok(tostring(err2):find("already running", 1, true), "second start refused: " .. tostring(err2))
  t.eq(ljprof.running(), true, "the new run is running")
  t.eq(ljprof.stats().interval_us, 2000, "the new run's options")
  t.eq(ljprof.stop(), true, "stop")
  t.eq(ljprof.running(), false, "stopped")
end)

t.case("stop, start, stop inside the callback: stopped", function()
  local calls = 0
  ljprof.start("i1", function()
    calls = calls + 1
    ljprof.stop()
    ljprof.start("i1", function() calls = calls + 100 end)
    ljprof.stop()
  end, WALL1)
  local rounds = 0
  while ljprof.running() and rounds < 20000 do spin(2000); rounds = rounds + 1 end
  for _ = 1, 50 do spin(2000) end
  t.eq(calls, 1, "one callback, no run after it")
  t.eq(ljprof.running(), false, "stopped")
end)

-- -- Start twice, stop twice -------------------------------------------------

t.case("start twice is an error; the first run keeps working", function()
  local calls1, calls2 = 0, 0
  ljprof.start("i1", function() calls1 = calls1 + 1 end, WALL1)
  t.raises(function() ljprof.start("i1", function() calls2 = calls2 + 1 end) end,
    "ljprof: already running for this Lua state (call stop first)")
  t.raises(function() ljprof.record() end, "already running")
  t.raises(function() ljprof.record(WALL1) end, "already running")
  t.eq(ljprof.running(), true, "still running")
  t.eq(ljprof.stats().clock, "wall", "the first run's options are kept")
  local before = calls1
  work_until(ljprof.stats().completed + 30, function() spin(2000) end)
  t.ok(calls1 > before, "the first callback still runs")
  t.eq(calls2, 0, "the second callback never runs")
  t.eq(ljprof.stop(), true, "stop")
  t.eq(ljprof.stop(), true, "second stop: true")
  t.eq(ljprof.running(), false, "not running")
end)

-- -- record + summary --------------------------------------------------------

local function summary_total(s)
  local n = 0
  for _, e in ipairs(s) do n = n + e.count end
  return n
end

t.case("record + summary: entries, order, totals, hot function", function()
  t.eq(select("#", ljprof.record(CPU1)), 0, "record returns nothing")
  t.eq(ljprof.running(), true, "running")
  work_until(400, function()
    for _ = 1, 9 do hot(3000) end
    cold(3000)
  end)
  t.eq(ljprof.stop(), true, "stop")
  local st = ljprof.stats()
  local s = ljprof.summary()
  t.ok(#s > 0, "summary has entries")
  t.eq(st.pending, 0, "nothing pending")
  t.eq(summary_total(s), st.completed, "summary counts sum to completed")
  local vmsum = 0
  for _, k in ipairs({"N", "I", "C", "G", "J"}) do vmsum = vmsum + st.vmstate[k] end
  t.eq(vmsum, st.completed, "vmstate counts sum to completed")
  local hotn, coldn = 0, 0
  for i, e in ipairs(s) do
    t.eq(type(e.stack), "string", "entry " .. i .. " stack")
    t.ok(type(e.vmstate) == "string" and #e.vmstate == 1 and ("NICGJ"):find(e.vmstate, 1, true),
      "entry " .. i .. " vmstate " .. tostring(e.vmstate))
    t.eq(type(e.zone), "string", "entry " .. i .. " zone")
    t.ok(is_int(e.count) and e.count > 0, "entry " .. i .. " count " .. tostring(e.count))
    if i > 1 then t.ok(s[i - 1].count >= e.count, "sorted by count, descending at " .. i) end
    if e.stack:find(";hot$") then hotn = hotn + e.count end
    if e.stack:find(";cold$") then coldn = coldn + e.count end
    -- Default key: "fZ;" outermost first: the host's C function, then
    -- the main chunk.
    t.ok(rooted(e.stack), "root first: " .. e.stack)
  end
  t.ok(hotn > 0.6 * st.completed, string.format("hot dominates: %d of %d (cold %d)",
    hotn, st.completed, coldn))
  t.ok(s[1].stack:find(";hot$") ~= nil, "the top entry is hot: " .. s[1].stack)
  t.ok(coldn > 0 and coldn < hotn, "cold appears, less than hot: " .. coldn)
  -- Summary stays readable after stop, and is the same when read again.
  local s2 = ljprof.summary()
  t.eq(#s2, #s, "summary read twice")
  t.eq(summary_total(s2), summary_total(s), "same totals")
end)

t.case("summary while running", function()
  ljprof.record(WALL1)
  work_until(50, function() hot(3000) end)
  local s = ljprof.summary()
  local st = ljprof.stats()
  t.ok(#s > 0, "entries while running")
  t.ok(summary_total(s) <= st.completed, "summary total <= completed while running")
  ljprof.stop()
  t.eq(summary_total(ljprof.summary()), ljprof.stats().completed, "totals after stop")
end)

t.case("fmt and depth options change the key", function()
  -- Lua keys only: with native frames, a tick in ljprof's own work at a
  -- safe point (reading a library's symbols on first use, which takes
  -- about a millisecond with libc's debug file) has a C leaf in state I.
  ljprof.record({clock = "cpu", interval = 1, fmt = "l", depth = 1, native = false})
  work_until(100, function() hot(3000) end)
  ljprof.stop()
  local s = ljprof.summary()
  t.ok(#s > 0, "entries")
  for _, e in ipairs(s) do
    -- a sample taken inside a C function shows that function as the
    -- leaf; so may a GC
    -- step a C function's lua_* call started (lua_pushstring)
    t.ok(e.stack:find("^" .. SRC .. ":%d+$") ~= nil or
         ((e.vmstate == "C" or e.vmstate == "G") and not e.stack:find(":%d")),
         "file:line key (or C function): " .. e.stack)
  end
  t.eq(summary_total(s), ljprof.stats().completed, "totals")
  -- The hot function's lines dominate.
  local hot_first = debug.getinfo(hot, "S").linedefined
  t.ok(s[1].stack == SRC .. ":" .. hot_first, "top key is hot's line: " .. s[1].stack)

  ljprof.record({clock = "cpu", interval = 1, fmt = "fZ|", depth = 2})
  work_until(100, function() hot(3000) end)
  ljprof.stop()
  s = ljprof.summary()
  t.ok(s[1].stack:find("^hot|") ~= nil, "callee first, '|' separated, 2 frames: " .. s[1].stack)
  for _, e in ipairs(s) do
    local _, bars = e.stack:gsub("|", "")
    t.ok(bars <= 1, "at most 2 frames: " .. e.stack)
  end

  -- Negative depth: the 3 innermost frames, callers first; F prefixes
  -- names of Lua functions with the chunk; no Z keeps the last ';'.
  ljprof.record({clock = "cpu", mode = "i2", fmt = "F;", depth = -3})
  t.eq(ljprof.stats().interval_us, 2000, "mode option sets the interval")
  work_until(50, function() hot(3000) end)
  ljprof.stop()
  s = ljprof.summary()
  t.eq(s[1].stack, SRC .. ":work_until;" .. SRC .. ":step;" .. SRC .. ":hot;", "F;, depth -3")

  -- record(mode string)
  ljprof.record("i3")
  t.eq(ljprof.stats().interval_us, 3000, "record(mode)")
  t.eq(ljprof.stats().clock, "cpu", "default clock")
  ljprof.stop()
end)

t.case("restart after stop gives fresh counts", function()
  ljprof.record(CPU1)
  work_until(100, function() hot(3000) end)
  ljprof.stop()
  local first = ljprof.stats().completed
  t.ok(first >= 100, "first run: " .. first)
  ljprof.record(CPU1)
  local st = ljprof.stats()
  t.ok(st.completed < first, "counts reset at start (" .. st.completed .. ")")
  work_until(100, function() hot2(3000) end)
  ljprof.stop()
  st = ljprof.stats()
  local s = ljprof.summary()
  t.eq(summary_total(s), st.completed, "second run totals")
  for _, e in ipairs(s) do
    t.ok(not e.stack:find(";hot$"), "no entry of the first run: " .. e.stack)
  end
  t.ok(s[1].stack:find(";hot2$") ~= nil, "second run's function on top: " .. s[1].stack)
end)

-- -- Options ---------------------------------------------------------------------

t.case("option errors", function()
  local cb = function() end
  local function both(opts, needles, what)
    for _, f in ipairs({
      function() ljprof.record(opts) end,
      function() ljprof.start("", cb, opts) end,
    }) do
      for _, n in ipairs(needles) do t.raises(f, n, what) end
      t.eq(ljprof.running(), false, what .. ": not running after the error")
    end
  end
  both({clock = "bogus"}, {"bad clock 'bogus'", "accepted", "wall"}, "clock=bogus")
  both({clock = 3}, {"bad clock '3'", "accepted"}, "clock=3")
  both({bogus = 1}, {"unknown option 'bogus'", "accepted"}, "unknown option")
  both({intervall = 1}, {"unknown option 'intervall'"}, "misspelt option")
  both({interval = 0}, {"bad interval '0'", "accepted"}, "interval=0")
  both({interval = -5}, {"bad interval '-5'", "accepted"}, "interval<0")
  both({interval = "abc"}, {"bad interval 'abc'"}, "interval=abc")
  both({interval = 0 / 0}, {"bad interval"}, "interval=nan")
  both({rate = 0}, {"bad rate '0'", "accepted"}, "rate=0")
  both({rate = -100}, {"bad rate '-100'"}, "rate<0")
  both({ring = 5}, {"bad ring '5'", "accepted"}, "ring=5")
  both({ring = 0}, {"bad ring '0'", "accepted"}, "ring=0")
  both({ring = -3}, {"bad ring '-3'", "accepted"}, "ring<0")
  both({ring = 1e9}, {"bad ring '1000000000'", "accepted"}, "ring too big")
  both({interval = 120000}, {"bad interval", "accepted"}, "interval too long")
  both({clock = "itimer", signal = 12}, {"SIGPROF"}, "itimer with another signal")
  -- A fault signal would turn a real crash into an endless loop.
  for _, sig in ipairs({4, 5, 6, 7, 8, 11, 17}) do  -- ILL TRAP ABRT BUS FPE SEGV CHLD
    both({clock = "wall", signal = sig}, {"signal " .. sig, "cannot be the sampling signal", "accepted"},
      "fault signal " .. sig)
  end
  local bad = "/nonexistent/dir/x.folded"
  both({output = bad}, {bad, "cannot write"}, "unwritable output")
  -- A bad option after good ones does not leave a run behind.
  both({clock = "wall", interval = 1, bogus = true}, {"unknown option 'bogus'"}, "mixed options")
  t.raises(function() ljprof.start("", cb, "wall") end, "bad argument #3 to 'start'")
  t.eq(ljprof.running(), false, "not running")
  t.eq(ljprof.stop(), true, "stop after failed starts")
  -- Errors are one line.
  local ok, err = pcall(ljprof.record, {clock = "bogus"})
  t.ok(not ok and not err:find("\n"), "one-line error: " .. tostring(err))
end)

t.case("interval and rate options", function()
  for _, c in ipairs({
    {{interval = 1}, 1000}, {{interval = 0.5}, 500}, {{interval = 20}, 20000},
    {{rate = 1000}, 1000}, {{rate = 250}, 4000}, {{rate = 3}, 333333},
  }) do
    c[1].clock = "wall"
    ljprof.record(c[1])
    t.eq(ljprof.stats().interval_us, c[2], "interval_us")
    ljprof.stop()
  end
end)

t.case("output file: folded stacks written at stop", function()
  local path = make_tmp() .. ".folded"
  ljprof.record({clock = "cpu", interval = 1, output = path})
  t.eq(io.open(path) and true or false, false, "no file while running")
  work_until(200, function() for _ = 1, 9 do hot(3000) end cold(3000) end)
  t.eq(ljprof.stop(), true, "stop")
  local st = ljprof.stats()
  local f = io.open(path)
  t.ok(f, "output file exists after stop: " .. path)
  if not f then return end
  local total, lines, hotn = 0, 0, 0
  for line in f:lines() do
    lines = lines + 1
    local stack, count = line:match("^(.-) (%d+)$")
    t.ok(stack ~= nil, "line is 'stack count': " .. line)
    if stack then
      total = total + tonumber(count)
      t.ok(rooted(stack), "root first: " .. stack)
      if stack:find(";hot$") then hotn = hotn + tonumber(count) end
    end
  end
  f:close()
  os.remove(path)
  t.ok(lines > 0, "lines written")
  t.eq(total, st.completed, "counts sum to completed")
  t.ok(hotn > total / 2, "hot dominates the file: " .. hotn .. " of " .. total)
  -- One line per stack: VM states are summed.
  local s = ljprof.summary()
  local stacks = {}
  for _, e in ipairs(s) do stacks[e.stack] = true end
  local n = 0
  for _ in pairs(stacks) do n = n + 1 end
  t.eq(lines, n, "one line per unique stack")
end)

t.case("output with start(mode, cb, opts)", function()
  local path = make_tmp() .. ".folded"
  local calls = 0
  ljprof.start("i1", function() calls = calls + 1 end, {clock = "wall", output = path})
  work_until(30, function() hot(3000) end)
  t.eq(ljprof.stop(), true, "stop")
  local f = io.open(path)
  t.ok(f, "output file exists: " .. path)
  if f then
    local total = 0
    for line in f:lines() do total = total + tonumber(line:match(" (%d+)$") or 0) end
    f:close()
    t.eq(total, ljprof.stats().completed, "counts sum to completed")
  end
  os.remove(path)
  t.ok(calls > 0, "callback ran")
end)

-- -- stats -------------------------------------------------------------------------

t.case("stats fields", function()
  ljprof.record({clock = "wall", interval = 2})
  work_until(20, function() hot(3000) end)
  local st = ljprof.stats()
  for _, k in ipairs({"signals", "ticks", "completed", "dropped", "merged", "pending",
      "safepoints", "batches", "stacks", "entries", "hook_ns", "bytes", "interval_us"}) do
    t.ok(is_int(st[k]) and st[k] >= 0, "stats." .. k .. " = " .. tostring(st[k]))
  end
  t.eq(type(st.vmstate), "table", "stats.vmstate")
  for _, k in ipairs({"N", "I", "C", "G", "J"}) do
    t.ok(is_int(st.vmstate[k]) and st.vmstate[k] >= 0, "stats.vmstate." .. k)
  end
  t.eq(st.clock, "wall", "clock")
  t.eq(st.interval_us, 2000, "interval_us")
  t.eq(st.running, true, "running while running")
  t.ok(st.signals > 0 and st.ticks >= st.signals, "signals and ticks")
  t.ok(st.completed > 0 and st.safepoints > 0, "completed and safepoints")
  t.ok(st.bytes > 0, "bytes")
  t.ok(st.vmstate.I > 0, "interpreted samples")
  ljprof.stop()
  st = ljprof.stats()
  t.eq(st.running, false, "running after stop")
  t.eq(st.pending, 0, "pending after stop")
  t.ok(st.stacks > 0 and st.entries > 0, "stacks and entries")
  t.eq(st.completed + st.dropped, st.ticks, "ticks accounted")
  for _, c in ipairs({"cpu", "wall", "itimer", "thread"}) do
    ljprof.record({clock = c})
    t.eq(ljprof.stats().clock, c, "clock name " .. c)
    ljprof.stop()
  end
end)

t.case("stats keys, types and values of a finished run", function()
  ljprof.record({interval = 1})
  work_until(20, function() hot(3000) end)
  t.ok(ljprof.stop(), "stop")
  local st = ljprof.stats()
  t.eq(stat_keys(st), STATS_RUN, "stats() keys and types of a finished run (record_off: " ..
       tostring(st.record_off) .. ")")
  for k, v in pairs(st) do
    if type(v) == "number" and k ~= "start_time" then
      t.ok(is_int(v) and v >= 0, "stats." .. k .. " = " .. tostring(v))
    end
  end
  t.eq(st.samples, st.ticks, "samples is ticks")
  t.eq(st.clock, "cpu", "clock")
  t.eq(st.interval_us, 1000, "interval_us")
  t.eq(st.signal, 23, "signal: the default (SIGURG on Linux)")
  t.eq(st.running, false, "running")
  t.eq(st.expired, false, "expired")
  t.eq(st.signal_lost, false, "signal_lost")
  t.ok(st.vmstate_source == "vmstate" or st.vmstate_source == "pc", "vmstate_source " .. st.vmstate_source)
  t.ok(st.trace_source == "memory" or st.trace_source == "events" or st.trace_source == "none",
       "trace_source " .. st.trace_source)
  t.ok(math.abs(st.start_time - os.time()) < 3600, "start_time: Unix seconds " .. st.start_time)
  t.ok(st.duration_ns > 0, "duration_ns")
  t.ok(st.thread_id > 0 and st.state_id >= 1, "thread_id and state_id")
  local n = 0
  for _, k in ipairs({"N", "I", "C", "G", "J"}) do n = n + st.vmstate[k] end
  t.eq(n, st.ticks, "vmstate counts add up to ticks")
end)

t.case("dumpstack after stop", function()
  ljprof.record(WALL1)
  ljprof.stop()
  local co = coroutine.create(function() local function g() coroutine.yield() end g() end)
  coroutine.resume(co)
  for _ = 1, 3 do
    t.eq(ljprof.dumpstack(co, "F|lZ; ", -100), P.dumpstack(co, "F|lZ; ", -100), "after stop")
  end
  local s = ljprof.dumpstack("fZ;", 3)
  t.ok(s:find("^dumpstack;") ~= nil, "direct call: " .. s)
end)


-- At the safe point no Lua may be called, so fast-function ids in the
-- aggregation keys come from ids learnt in normal context: they must be
-- the real ids, also for a coroutine.wrap closure created after start.
t.case("aggregated keys name fast functions like jit.profile", function()
  local ju = require("jit.util")
  local sort_id = ju.funcinfo(table.sort).ffid
  ljprof.record({clock = "wall", interval = 0.5, fmt = "lZ;", depth = -100})
  local function cmp(a, b) local s = 0 for i = 1, 30 do s = s + i end return a < b end
  jit.off(cmp)
  local gen = coroutine.wrap(function()
    for k = 1, 40 do
      local arr = {} for i = 1, 3000 do arr[i] = (i * 7919) % 3001 end
      table.sort(arr, cmp)
      coroutine.yield(k)
    end
  end)
  while gen() do end
  ljprof.stop()
  local wrap_id = ju.funcinfo(gen).ffid
  local saw_sort = false
  for _, e in ipairs(ljprof.summary()) do
    t.ok(not e.stack:find("[builtin#?]", 1, true), "no unknown builtin: " .. e.stack)
    if e.stack:find("[builtin#" .. sort_id .. "]", 1, true) then saw_sort = true end
  end
  t.ok(saw_sort, "table.sort appears as [builtin#" .. sort_id .. "]")
  t.ok(wrap_id ~= nil, "coroutine.wrap closures are fast functions")
end)

t.case("duration: sampling ends after the given seconds, data kept", function()
  local function spin(sec) local t0 = os.clock() while os.clock() - t0 < sec do end end
  ljprof.record({clock = "wall", interval = 1, duration = 0.15})
  spin(0.6)
  local st = ljprof.stats()
  t.ok(ljprof.running(), "the run stays open")
  t.ok(st.expired, "expired")
  t.ok(ljprof.stop(), "stop")
  st = ljprof.stats()
  -- 150 ms at 1 kHz: ~150 ticks; far from the 600 a full run would take
  t.ok(st.ticks + st.missed >= 50 and st.ticks <= 300,
       "ticks within the duration: " .. st.ticks .. " (missed " .. st.missed .. ")")
  t.ok(st.completed == st.ticks - st.dropped, "every tick completed")
  t.raises(function() ljprof.record({duration = -1}) end, "bad duration")
end)

t.done()
