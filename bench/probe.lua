-- Measurement probe loaded into every benchmarked process with
-- `luajit -lbench.probe ...` (before any -j option, so it is in place when
-- the profiler starts). It does nothing unless asked through the
-- environment:
--   LJPROF_BENCH_STATS=FILE   (runs with -jprof) after jit.prof stops,
--       write ljprof.stats() to FILE as "key value" lines (VM state
--       counts as vm.N, vm.I, ...), plus cpu_s = the process's CPU time.
--   LJPROF_BENCH_TRACES=FILE  count the JIT's trace events (start, stop,
--       abort, flush) from jit.attach and write them to FILE when the
--       state closes (or at os.exit). ljprof chains to this handler when
--       it attaches its own; jit.p does not use trace events.
--   LJPROF_BENCH_LAYOUT=N  allocate one string of 8N bytes before
--       anything else: the workload's objects and bytecode then lie that
--       much further on in the heap, and LuaJIT's hot counters (a
--       64-entry table indexed by bytecode address: a 256-byte period,
--       covered in 8-byte steps by N = 0..1000) and trace numbers shift.
--       LuaJIT's choice of traces depends on them: richards compiles
--       86-100 traces over 30 such shifts under one seed, in 0.67-0.90 s
--       of CPU.
--       The overhead rounds give every configuration of a round the same
--       N and each round another one, so that a paired ratio measures the
--       profiler and not which layout it happened to shift the program
--       to. (N strings of assorted sizes, the earlier way, mostly did not
--       move the bytecode: richards' main function lay at 4 places over
--       12 rounds, 2 of them 5 times each.)
--   LJPROF_BENCH_VMPROF=f|l  no profiler: LuaJIT's own profiling mode
--       alone, as jit.p turns it on (jit.profile.start with "f" or "l"
--       and a 60 s interval, a callback that does nothing, no sample
--       taken). In that mode LuaJIT records a profiling check into every
--       trace at each function (f) or line (l) change; the control run
--       says how much of jit.p's cost or gain is that change to the
--       compiled code rather than sampling.
-- It is loaded in the unprofiled and jit.p runs too, so that every
-- configuration pays the same (tiny) start-up cost.
local M = {}

local layout = tonumber(os.getenv("LJPROF_BENCH_LAYOUT") or "")
if layout and layout > 0 then
  M.layout = string.rep("x", 8 * layout)
end

local function write_kv(path, t)
  local keys = {}
  for k, v in pairs(t) do
    if type(v) == "table" then
      for k2, v2 in pairs(v) do keys[#keys + 1] = string.format("%s.%s %s", k, k2, tostring(v2)) end
    else
      keys[#keys + 1] = string.format("%s %s", k, tostring(v))
    end
  end
  table.sort(keys)
  local f = assert(io.open(path, "w"))
  f:write(table.concat(keys, "\n"), "\n")
  f:close()
end

local stats_file = os.getenv("LJPROF_BENCH_STATS")
if stats_file and stats_file ~= "" then
  local prof = require("jit.prof")
  local ljprof = require("ljprof")
  local stop, written = prof.stop, false
  prof.stop = function(...)
    local r = stop(...)
    if not written then
      written = true
      local st = ljprof.stats()
      st.vm = st.vmstate
      st.vmstate = nil
      st.cpu_s = os.clock()  -- process CPU time so far
      write_kv(stats_file, st)
    end
    return r
  end
end

local vmprof = os.getenv("LJPROF_BENCH_VMPROF")
if vmprof == "f" or vmprof == "l" then
  require("jit.profile").start(vmprof .. "i60000", function() end)
end

local traces_file = os.getenv("LJPROF_BENCH_TRACES")
if traces_file and traces_file ~= "" then
  local count = {start = 0, stop = 0, abort = 0, flush = 0}
  local function on_trace(what)
    count[what] = (count[what] or 0) + 1
  end
  jit.attach(on_trace, "trace")
  local written = false
  local function finish()
    if written then return end
    written = true
    write_kv(traces_file, count)
  end
  local proxy = newproxy(true)
  getmetatable(proxy).__gc = finish
  M.proxy = proxy  -- anchored by package.loaded: collected at lua_close
  local exit = os.exit
  os.exit = function(...)
    finish()
    return exit(...)
  end
end

return M
