-- Run a Lua script under ljprof (aggregate-only recording), for benchmarks.
--
--   LJPROF_BENCH="clock=cpu,interval=10" luajit bench/with_ljprof.lua script.lua [args]
--
-- LJPROF_BENCH is a comma-separated list of key=value options passed to
-- ljprof.record (clock, interval, rate, fmt, depth, output, ring, signal,
-- native; numbers and true/false are converted; fmt=jprof is the key
-- format `luajit -jprof` records with), plus options of this wrapper:
--   stats=FILE   write ljprof.stats() of the run to FILE as "key value" lines
--                (vmstate counts as vm.N, vm.I, ...), plus cpu_s = process CPU
--                seconds (os.clock) spent while recording, and top_frames =
--                frames in the most-sampled stack key.
--   stacks=FILE  write the aggregated stack keys to FILE, one
--                "count<TAB>vmstate<TAB>key" line each (keys containing a newline or
--                a tab are left out).
--   profile=off  load ljprof but do not record (a baseline with the same
--                frames and module loading as a profiled run).
-- An empty/unset LJPROF_BENCH runs the script with the default options.
-- Profiling stops when the script returns, raises an error, or calls os.exit.
-- Needs LUA_CPATH to find ljprof (e.g. LUA_CPATH="build/lib?.so").
local ljprof = require("ljprof")

local script = arg and arg[1]
if not script then
  io.stderr:write("usage: luajit bench/with_ljprof.lua script.lua [args...]\n")
  os.exit(2)
end

-- Parse the options.
local opts, statsfile, stacksfile, profile = {}, nil, nil, true
for item in (os.getenv("LJPROF_BENCH") or ""):gmatch("[^,]+") do
  local k, v = item:match("^%s*([%w_]+)%s*=%s*(.-)%s*$")
  if not k then error("with_ljprof: bad LJPROF_BENCH item '" .. item .. "' (want key=value)") end
  if k == "stats" then statsfile = v
  elseif k == "stacks" then stacksfile = v
  elseif k == "profile" then profile = (v ~= "off")
  elseif k == "fmt" and v == "jprof" then opts.fmt = require("jit.prof.model").KEY_FMT
  elseif v == "true" or v == "false" then opts[k] = (v == "true")
  else opts[k] = tonumber(v) or v end
end

-- The script may call _LJPROF_BENCH_MARK() once it is past its warm-up
-- (bench/workloads/deep.lua does, a tenth into its leaf): the stats file
-- then also holds steady_<key> = the counters' growth since that call, so
-- that one-time costs (learning layouts, loading a library's symbols at
-- its first native frame) do not count as per-sample costs.
local marked
function _LJPROF_BENCH_MARK()
  if marked or not profile then return end
  marked = ljprof.stats()
end

-- Stop once, write the stats file.
local cpu0
local stopped = false
local function finish()
  if stopped then return end
  stopped = true
  local cpu = os.clock() - cpu0
  if not profile then
    if statsfile then
      local f = assert(io.open(statsfile, "w"))
      f:write(string.format("cpu_s %.6f\nticks 0\nsignals 0\n", cpu))
      f:close()
    end
    return
  end
  local ok, msg = ljprof.stop()
  if not ok then io.stderr:write("with_ljprof: ", tostring(msg), "\n") end
  local summary = ljprof.summary()
  if statsfile then
    local f = assert(io.open(statsfile, "w"))
    local st = ljprof.stats()
    local keys = {}
    for k, v in pairs(st) do
      if type(v) == "table" then
        for k2, v2 in pairs(v) do keys[#keys + 1] = string.format("vm.%s %s", k2, tostring(v2)) end
      else
        keys[#keys + 1] = string.format("%s %s", k, tostring(v))
      end
    end
    keys[#keys + 1] = string.format("cpu_s %.6f", cpu)
    if marked then
      for k, v in pairs(st) do
        if type(v) == "number" and type(marked[k]) == "number" then
          keys[#keys + 1] = string.format("steady_%s %s", k, tostring(v - marked[k]))
        end
      end
    end
    local top = summary[1]
    local frames = 0
    if top then  -- frames end with ';' (fZ;) or \30 (the -jprof key format)
      for _ in top.stack:gmatch("[^;\30]+") do frames = frames + 1 end
    end
    keys[#keys + 1] = string.format("top_frames %d", frames)
    table.sort(keys)
    f:write(table.concat(keys, "\n"), "\n")
    f:close()
  end
  if stacksfile then
    local f = assert(io.open(stacksfile, "wb"))
    for _, e in ipairs(summary) do
      if not e.stack:find("[\t\n]") then
        f:write(string.format("%.0f\t%s\t%s\n", e.count, e.vmstate, e.stack))
      end
    end
    f:close()
  end
end

-- A script that ends with os.exit must still stop the profiler.
local os_exit = os.exit
os.exit = function(...)
  finish()
  return os_exit(...)
end

-- The script sees its own arg table, as if run directly.
local sargs = {[0] = script}
for i = 2, #arg do sargs[i - 1] = arg[i] end
arg = sargs

cpu0 = os.clock()
if profile then ljprof.record(opts) end
local ok, err = xpcall(function() return dofile(script) end, debug.traceback)
finish()
if not ok then
  io.stderr:write(tostring(err), "\n")
  os_exit(1)
end
