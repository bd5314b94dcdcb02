-- Torture: profile a program that exercises everything that makes a safe
-- point hard (GC finalizers, coroutines, error unwinding, C callbacks,
-- trace start/stop/abort/flush churn, string and table churn) at the
-- fastest practical rates, and check that
--   * the program's output is identical to an unprofiled run,
--   * the sample counts are plausible for the time used,
--   * the statistics add up (ticks = completed + dropped, nothing pending),
--   * the trace recorder behaves about the same (start/stop/abort counts
--     seen by the program's own jit.attach handler).
--
-- Every run is a separate `luajit` process running this very file with
-- the argument "child" (LUA_PATH/LUA_CPATH are inherited), so that runs
-- cannot influence each other through the GC, the JIT or the hook state.

local ffi = require "ffi"

ffi.cdef [[
typedef struct { long tv_sec; long tv_nsec; } ljt_timespec;
int clock_gettime(int clk, ljt_timespec *ts);
]]

local CLOCK_MONOTONIC, CLOCK_THREAD_CPUTIME_ID = 1, 3
local tsbuf = ffi.new("ljt_timespec")
local function clock_s(id)
  ffi.C.clock_gettime(id, tsbuf)
  return tonumber(tsbuf.tv_sec) + tonumber(tsbuf.tv_nsec) * 1e-9
end

-- ---------------------------------------------------------------------------
-- The program. It returns a transcript: lines that depend only on the
-- program's logic, never on timing (finalizers run at times that depend on
-- the allocation pattern, which profiling changes, so what they compute is
-- combined with commutative sums and read after a full collection).
-- ---------------------------------------------------------------------------

local ROUNDS = 20

local function program()
  local out = {}
  local function emit(...) out[#out + 1] = table.concat({...}, " ") end

  -- Finalizers: userdata (newproxy) and cdata (ffi.gc), doing work and
  -- allocating inside __gc.
  local fin = {n = 0, sum = 0, strs = 0, cn = 0, csum = 0}
  local function make_proxy(id)
    local p = newproxy(true)
    getmetatable(p).__gc = function()
      local t = {}
      for i = 1, 20 do t[i] = (id * i) % 97 end
      local s = table.concat(t, ",")          -- allocate in the finalizer
      fin.strs = fin.strs + #s
      fin.n = fin.n + 1
      fin.sum = fin.sum + id
    end
    return p
  end
  local function make_cdata(id)
    local c = ffi.new("int[4]")
    c[0] = id
    return ffi.gc(c, function(x)
      local s = string.rep("x", x[0] % 13)
      fin.cn = fin.cn + 1
      fin.csum = fin.csum + x[0] + #s
    end)
  end
  local nproxies, ncdata, idsum, cidsum = 0, 0, 0, 0
  local keep = {}

  -- Coroutines: producer/consumer with many resumes and yields.
  local function producer(n)
    return coroutine.create(function()
      for i = 1, n do
        coroutine.yield(i, tostring(i))
      end
      return "done"
    end)
  end
  local function consume(n)
    local co, acc, slen = producer(n), 0, 0
    while true do
      local ok, a, b = coroutine.resume(co)
      assert(ok, a)
      if a == "done" then break end
      acc = acc + a
      slen = slen + #b
    end
    return acc, slen
  end
  local function gen(n)  -- coroutine.wrap generator
    return coroutine.wrap(function()
      for i = 1, n do coroutine.yield(i * i % 1009) end
    end)
  end

  -- Errors: error()/pcall/xpcall unwinding through several frames, error
  -- objects of several types, errors thrown through C (sort comparator)
  -- and inside coroutines.
  local function deep(n, kind)
    if n == 0 then
      if kind == 0 then error("boom") end
      if kind == 1 then error({code = 42}) end
      if kind == 2 then error(7) end
      local x = nil
      return x.field             -- runtime error
    end
    return deep(n - 1, kind) + 1
  end
  local function errors(rounds)
    local h = 0
    for i = 1, rounds do
      local ok, e = pcall(deep, i % 9, i % 4)
      assert(not ok)
      if type(e) == "table" then h = h + e.code
      elseif type(e) == "number" then h = h + e
      else h = h + #tostring(e):match("[^:]*$") end
      local ok2, e2 = xpcall(function() deep(i % 5, i % 4) end,
                             function(m) return "H" .. type(m) end)
      assert(not ok2)
      h = h + #e2
      local co = coroutine.create(function() coroutine.yield(1); deep(3, 0) end)
      coroutine.resume(co)
      local ok3 = coroutine.resume(co)
      if not ok3 then h = h + 1 end
      local ok4 = pcall(table.sort, {3, 1, 2, 5, 4},
                        function(a, b) if a == 5 then error("cmp") end return a < b end)
      if not ok4 then h = h + 2 end
    end
    return h
  end

  -- C callbacks: table.sort comparators and gsub replacement functions.
  local function callbacks(n, seed)
    local t = {}
    local x = seed
    for i = 1, n do x = (x * 1103515245 + 12345) % 2147483648; t[i] = x % 100000 end
    table.sort(t, function(a, b) return a > b end)
    local h = 0
    for i = 1, n, 97 do h = (h * 31 + t[i]) % 1000000007 end
    local s = string.rep("abc123def456 ", 40)
    local r, cnt = s:gsub("%d+", function(d) return "<" .. (tonumber(d) * 2) .. ">" end)
    local r2 = r:gsub("(%a)(%a)", function(a, b) return b .. a end)
    return h, cnt, #r2, r2:sub(1, 24)
  end

  -- Trace churn: many distinct small loop functions (each compiles its
  -- own trace), some of which abort (closure creation is NYI), with
  -- jit.flush() in the middle.
  local nfuncs = 0
  local function traces(n)
    local h = 0
    for _ = 1, n do
      nfuncs = nfuncs + 1
      local k = nfuncs
      local src
      if k % 5 == 0 then
        src = string.format([[
          local s = 0
          for i = 1, %d do local f = function() return i end; s = s + f() %% %d end
          return s]], 150 + k, k % 11 + 2)
      else
        src = string.format([[
          local s, t = 0, {}
          for i = 1, %d do s = s + (i * %d) %% %d; t[i %% 8 + 1] = s end
          return s + #t]], 150 + k, k, k % 17 + 3)
      end
      local f = assert(loadstring(src, "=churn" .. k))
      h = (h + f() + f()) % 1000000007
      if k % 60 == 0 then jit.flush() end
    end
    return h
  end

  -- String and table churn.
  local function churn(n)
    local parts, t = {}, {}
    for i = 1, n do
      parts[#parts + 1] = string.format("%d:%s", i, string.char(65 + i % 26))
      if #parts > 50 then
        local s = table.concat(parts, "|")
        t[#t + 1] = #s .. s:sub(-3)
        parts = {}
      end
      local tt = {i, i + 1, x = i, [tostring(i)] = i}
      table.insert(tt, 1, i)
      table.remove(tt)
      if i % 3 == 0 then t[#t + 1] = tt[1] end
      if #t > 200 then table.remove(t, 1) end
    end
    local h = 0
    for i = 1, #t do h = (h * 17 + #tostring(t[i])) % 1000000007 end
    return h, #t
  end

  for round = 1, ROUNDS do
    for i = 1, 4000 do
      local id = round * 100000 + i
      local p = make_proxy(id)
      nproxies, idsum = nproxies + 1, idsum + id
      if i % 250 == 0 then keep[#keep + 1] = p end
      local c = make_cdata(id)
      ncdata, cidsum = ncdata + 1, cidsum + id + id % 13
      if i % 350 == 0 then keep[#keep + 1] = c end
    end
    if round % 4 == 0 then keep = {} end
    local acc, slen = consume(40000)
    emit("co", round, acc, slen)
    local g, gs = gen(30000), 0
    for v in g do gs = gs + v end
    emit("wrap", round, gs)
    emit("err", round, errors(2500))
    emit("cb", round, callbacks(30000, round))
    emit("tr", round, traces(40))
    emit("churn", round, churn(40000))
  end
  keep = nil
  collectgarbage("collect")
  collectgarbage("collect")
  emit("fin", fin.n, nproxies, fin.sum, idsum, fin.strs)
  emit("cfin", fin.cn, ncdata, fin.csum, cidsum)
  return out
end

-- ---------------------------------------------------------------------------
-- Child: run the program (optionally profiled) and print a report.
--   OUT <line>        the program's transcript
--   TRACE <what> <n>  trace events seen by the program's own handler
--   STAT <key> <num>  profiler statistics and measured times
--   END               the child got to the end
-- ---------------------------------------------------------------------------

if arg and arg[1] == "child" then
  local mode = arg[2] or "plain"
  local tev = {start = 0, stop = 0, abort = 0, flush = 0}
  jit.attach(function(what) tev[what] = (tev[what] or 0) + 1 end, "trace")
  local ljprof
  if mode ~= "plain" then ljprof = require "ljprof" end
  local cb = mode:match("^cb%-") and "cb"
  local clk, interval = mode:gsub("^cb%-", ""):match("^(%a+):([%d.]+)$")
  local opts = {clock = clk, interval = tonumber(interval)}
  -- With "cb-": a Lua callback (jit.profile style) that reads the stack of
  -- the interrupted coroutine at every safe point.
  local cbn, cbcalls, cbvm, cbbytes = 0, 0, {}, 0
  local function callback(th, n, vm)
    cbcalls = cbcalls + 1
    cbn = cbn + n
    cbvm[vm] = (cbvm[vm] or 0) + n
    cbbytes = cbbytes + #ljprof.dumpstack(th, "pl\n", -50)
  end
  local w0, c0 = clock_s(CLOCK_MONOTONIC), clock_s(CLOCK_THREAD_CPUTIME_ID)
  if ljprof then
    if cb == "cb" then ljprof.start("", callback, opts) else ljprof.record(opts) end
  end
  local out = program()
  local stopped, msg = true, nil
  if ljprof then stopped, msg = ljprof.stop() end
  local wall = clock_s(CLOCK_MONOTONIC) - w0
  local cpu = clock_s(CLOCK_THREAD_CPUTIME_ID) - c0
  local counts = {}
  for _, k in ipairs {"start", "stop", "abort", "flush"} do counts[k] = tev[k] end
  for _, l in ipairs(out) do print("OUT " .. l) end
  for _, k in ipairs {"start", "stop", "abort", "flush"} do
    print("TRACE " .. k .. " " .. counts[k])
  end
  print(string.format("STAT wall %.6f", wall))
  print(string.format("STAT cpu %.6f", cpu))
  if ljprof then
    print("STAT stopped " .. (stopped and 1 or 0) .. (msg and (" " .. msg) or ""))
    local st = ljprof.stats()
    for _, k in ipairs {"signals", "ticks", "completed", "dropped", "merged",
                        "pending", "safepoints", "batches", "stacks", "hook_ns",
                        "missed"} do
      print(string.format("STAT %s %d", k, st[k]))
    end
    for _, k in ipairs {"N", "I", "C", "G", "J"} do
      print(string.format("STAT vm%s %d", k, st.vmstate[k]))
    end
    local sum = 0
    for _, e in ipairs(ljprof.summary()) do sum = sum + e.count end
    print(string.format("STAT summary %d", sum))
    print(string.format("STAT running %d", ljprof.running() and 1 or 0))
    if cb == "cb" then
      print(string.format("STAT cbcalls %d", cbcalls))
      print(string.format("STAT cbsamples %d", cbn))
      print(string.format("STAT cbbytes %d", cbbytes))
      for _, k in ipairs {"N", "I", "C", "G", "J"} do
        print(string.format("STAT cbvm%s %d", k, cbvm[k] or 0))
      end
    end
  end
  print("END")
  io.stdout:flush()
  os.exit(0)
end

-- ---------------------------------------------------------------------------
-- Parent: the test cases.
-- ---------------------------------------------------------------------------

local t = require "t"

local function shquote(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end

local interp = "luajit"
do
  local i = -1
  while arg and arg[i] do interp = arg[i]; i = i - 1 end
end
local script = arg and arg[0] or "tests/lua/test_torture.lua"

local function run_child(mode)
  local cmd = shquote(interp) .. " " .. shquote(script) .. " child " .. shquote(mode)
  local p = assert(io.popen(cmd, "r"))
  local r = {out = {}, trace = {}, stat = {}, ended = false, mode = mode}
  for line in p:lines() do
    local rest = line:match("^OUT (.*)$")
    if rest then r.out[#r.out + 1] = rest
    elseif line:match("^TRACE ") then
      local k, v = line:match("^TRACE (%a+) (%d+)$")
      r.trace[k] = tonumber(v)
    elseif line:match("^STAT ") then
      local k, v, extra = line:match("^STAT ([%w_]+) ([%d.]+)(.*)$")
      r.stat[k] = tonumber(v)
      if extra ~= "" then r.stat[k .. "_msg"] = extra end
    elseif line == "END" then r.ended = true
    end
  end
  p:close()
  return r
end

local function fmt_run(r)
  local s = r.stat
  local parts = {string.format("%-11s wall %.2fs cpu %.2fs", r.mode, s.wall or -1, s.cpu or -1)}
  parts[#parts + 1] = string.format("traces start/stop/abort/flush %s/%s/%s/%s",
    tostring(r.trace.start), tostring(r.trace.stop), tostring(r.trace.abort), tostring(r.trace.flush))
  if s.ticks then
    parts[#parts + 1] = string.format(
      "ticks %d signals %d completed %d dropped %d merged %d pending %d safepoints %d N/I/C/G/J %d/%d/%d/%d/%d",
      s.ticks, s.signals, s.completed, s.dropped, s.merged, s.pending, s.safepoints,
      s.vmN, s.vmI, s.vmC, s.vmG, s.vmJ)
  end
  return table.concat(parts, "; ")
end

local plain

local function check_identical(r)
  t.ok(r.ended, r.mode .. ": child did not reach the end (crash?)")
  t.ok(#r.out > 0, r.mode .. ": no transcript")
  t.eq(#r.out, #plain.out, r.mode .. ": transcript length")
  for i = 1, math.max(#r.out, #plain.out) do
    if not t.eq(r.out[i], plain.out[i], r.mode .. ": transcript line " .. i) then break end
  end
end

local function check_stats(r)
  local s = r.stat
  t.eq(s.stopped, 1, r.mode .. ": stop() returned true" .. (s.stopped_msg or ""))
  t.eq(s.running, 0, r.mode .. ": not running after stop")
  t.eq(s.pending, 0, r.mode .. ": nothing pending after stop")
  t.eq(s.completed + s.dropped, s.ticks, r.mode .. ": ticks == completed + dropped")
  t.eq(s.summary, s.completed, r.mode .. ": summary counts add up to completed")
  t.eq(s.vmN + s.vmI + s.vmC + s.vmG + s.vmJ, s.completed,
       r.mode .. ": vmstate counts add up to completed")
  t.ok(s.dropped <= s.ticks * 0.01 + 5,
       r.mode .. ": few dropped ticks (" .. s.dropped .. " of " .. s.ticks .. ")")
  t.ok(s.signals <= s.ticks, r.mode .. ": signals <= ticks")
  t.ok(s.safepoints > 0 and s.safepoints <= s.signals,
       r.mode .. ": safe points in (0, signals]")
end

-- Trace counts of a profiled run against the unprofiled one: a sanity
-- bound, not the perturbation target. Unprofiled runs alone vary by about
-- +-4% (LuaJIT randomises retries after aborts). The profiler never arms
-- its hook while the recorder runs, but a hook armed just before a trace
-- starts fires at its first recorded instruction, and every hook call
-- aborts recording (lj_trace_abort in LuaJIT's callhook): this program
-- records traces much of the time, so profiled runs see more starts and
-- aborts (+5% to +26% starts measured at 1 ms, the most under CI load).
-- Reducing that is the attribution issue's work; here the counts must stay
-- within a factor that only a broken trace handler would exceed.
local function check_traces(r)
  for _, k in ipairs {"start", "stop"} do
    local a, b = r.trace[k] or -1, plain.trace[k]
    t.ok(math.abs(a - b) <= math.max(20, 0.6 * b),
         string.format("%s: trace %s events %d vs %d unprofiled", r.mode, k, a, b))
  end
  local a, b = r.trace.abort or -1, plain.trace.abort
  t.ok(math.abs(a - b) <= math.max(20, 1.0 * b),
       string.format("%s: trace abort events %d vs %d unprofiled", r.mode, a, b))
  t.eq(r.trace.flush, plain.trace.flush, r.mode .. ": flush events")
end

-- Expected ticks for a run: wall clocks tick over the whole profiled
-- window, cpu clocks over the thread's CPU time. The wall and thread
-- clocks' timer thread counts the ticks it woke too late for as missed
-- (at 10 kHz on a loaded machine, half of them): taken or missed, every
-- expiry is there.
local function check_rate(r, per_s, what)
  local s = r.stat
  local expect, got = s[what] * per_s, s.ticks + (s.missed or 0)
  t.ok(got >= 0.5 * expect and got <= 1.5 * expect,
       string.format("%s: %d ticks and %d missed for %.3f s of %s time (expected ~%d)",
                     r.mode, s.ticks, s.missed or 0, s[what], what, expect))
end

t.case("unprofiled reference run", function()
  plain = run_child("plain")
  print("  " .. fmt_run(plain))
  t.ok(plain.ended, "plain child reached the end")
  t.ok(#plain.out == ROUNDS * 6 + 2, "transcript has all lines")
  local fin = plain.out[#plain.out - 1]
  local n, np, s, ids = fin:match("^fin (%d+) (%d+) (%d+) (%d+)")
  t.ok(n and n == np and s == ids, "every proxy finalized once: " .. fin)
  local cfin = plain.out[#plain.out]
  local cn, nc, cs, cids = cfin:match("^cfin (%d+) (%d+) (%d+) (%d+)")
  t.ok(cn and cn == nc and cs == cids, "every cdata finalized once: " .. cfin)
  t.ok(plain.trace.start > 100 and plain.trace.stop > 50 and plain.trace.abort > 10,
       "the program churns traces")
end)

local runs = {
  {mode = "wall:0.1", per_s = 10000, what = "wall"},
  {mode = "wall:1", per_s = 1000, what = "wall"},
  {mode = "thread:0.1", per_s = 10000, what = "wall"},
  {mode = "thread:1", per_s = 1000, what = "wall"},
  {mode = "cpu:10", per_s = 100, what = "cpu"},
  {mode = "cb-wall:0.2", per_s = 5000, what = "wall"},
}

for _, spec in ipairs(runs) do
  t.case("profiled " .. spec.mode, function()
    assert(plain and plain.ended, "no reference run")
    local r = run_child(spec.mode)
    print("  " .. fmt_run(r))
    check_identical(r)
    if not r.ended then return end
    check_stats(r)
    check_rate(r, spec.per_s, spec.what)
    check_traces(r)
    if r.stat.cbcalls then
      local s = r.stat
      print(string.format("  callback: %d calls, %d samples, %d bytes of stacks",
                          s.cbcalls, s.cbsamples, s.cbbytes))
      -- Every completed tick is delivered, except those completed by
      -- stop() itself, which never calls the callback.
      t.ok(s.cbsamples <= s.completed and s.cbsamples >= s.completed - 1024,
           string.format("callback samples %d vs completed %d", s.cbsamples, s.completed))
      t.ok(s.cbcalls > 0 and s.cbcalls <= s.safepoints, "callback calls in (0, safepoints]")
      t.ok(s.cbbytes > 0, "callback dumped stacks")
    end
  end)
end

t.done()
