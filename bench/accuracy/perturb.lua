-- JIT perturbation probe, run as a fresh process by bench/accuracy/accuracy.lua:
-- counts the trace events (start, stop, abort with reasons, flush) of one
-- program while one profiler configuration runs, and writes the counts to
-- a file as "key<TAB>value" lines.
--
--   luajit bench/accuracy/perturb.lua CONFIG OUTFILE script.lua [args...]
--   luajit bench/accuracy/perturb.lua CONFIG OUTFILE mix:SEED:DRIVER:KxN:PLAN
--
-- CONFIG: none | ljprof-wall1 | ljprof-wall10 | jitp (jit.p as `-jp`: mode
-- "f", 10 ms; flushes traces at start) | builtin-i1 (jit.profile "i1" with a
-- callback that dumps the stack, as in the accuracy passes).
-- DRIVER: interpreted | compiled (components.lua's drivers). KxN: the
-- first N calls are of component K (H.sequence's lead; 0x0: none). PLAN is
-- harness.encode_plan's "n:calls,..." for all the components.
-- The trace counter is attached before the profiler starts (ljprof chains
-- to the handler it finds), so it sees every event in every configuration.
-- The program's own stdout is left alone (the caller discards it).
local vmdef = require("jit.vmdef")
local jutil = require("jit.util")

local config, outfile, target = arg[1], arg[2], arg[3]
if not (config and outfile and target) then
  io.stderr:write("usage: luajit perturb.lua CONFIG OUTFILE script.lua|mix:SEED:DRIVER:KxN:PLAN [args]\n")
  os.exit(2)
end

-- -- The trace-event counter -------------------------------------------------

local counts = {start = 0, stop = 0, abort = 0, abort0 = 0, flush = 0}
local reasons = {}

-- Where a function is, as jit.v prints it.
local function fmtfunc(func, pc)
  local fi = jutil.funcinfo(func, pc)
  if fi.loc then return fi.loc end
  if fi.ffid then return vmdef.ffnames[fi.ffid] end
  if fi.addr then return string.format("C:%x", fi.addr) end
  return "(?)"
end

-- The abort reason, formatted the way jit.v does (traceerr[otr] with oex).
local function reason(otr, oex)
  if type(otr) ~= "number" then return tostring(otr) end
  if type(oex) == "function" then oex = fmtfunc(oex) end
  local fmt = vmdef.traceerr[otr] or ("error " .. otr)
  local ok, s = pcall(string.format, fmt, oex)
  return ok and s or fmt
end

jit.attach(function(what, tr, func, pc, otr, oex)
  counts[what] = (counts[what] or 0) + 1
  if what == "abort" then
    if otr == 0 then counts.abort0 = counts.abort0 + 1 end
    local r = reason(otr, oex)
    reasons[r] = (reasons[r] or 0) + 1
  end
end, "trace")

-- -- The profiler ----------------------------------------------------------------

local samples = 0
local stop_profiler = function() end

if config == "none" then
  -- nothing
elseif config == "ljprof-wall1" or config == "ljprof-wall10" then
  local ljprof = require("ljprof")
  ljprof.record({clock = "wall", interval = config == "ljprof-wall1" and 1 or 10,
                 fmt = "fZ;", depth = -100})
  stop_profiler = function()
    assert(ljprof.stop())
    samples = ljprof.stats().samples
  end
elseif config == "jitp" then
  local jitp = require("jit.p")
  jitp.start("f", "/dev/null")
  stop_profiler = function() jitp.stop() end
  samples = -1  -- not counted (jit.p keeps its counts to itself)
elseif config == "builtin-i1" then
  local profile = require("jit.profile")
  local seen = {}
  profile.start("i1", function(th, n, vm)
    samples = samples + n
    local key = profile.dumpstack(th, "fZ;", -100)
    seen[key] = (seen[key] or 0) + n
  end)
  stop_profiler = function() profile.stop() end
else
  error("perturb.lua: unknown config " .. config)
end

-- -- The program ---------------------------------------------------------------

local mixspec = target:match("^mix:(.*)$")
if mixspec then
  package.path = (arg[0]:match("^(.*)/[^/]*$") or ".") .. "/?.lua;" .. package.path
  local H = require("harness")
  local seed, driver, lk, ln, planstr = mixspec:match("^(%d+):(%a+):(%d+)x(%d+):(.*)$")
  local drive = assert(H.components.drivers[driver], "bad driver " .. tostring(driver))
  local plan = H.decode_plan(planstr)
  local seq, nseq = H.sequence(plan, tonumber(seed), {tonumber(lk), tonumber(ln)})
  local wall, cpu = {}, {}
  for k = 1, #H.components.all do wall[k], cpu[k] = 0, 0 end
  drive(seq, nseq, plan.size, wall, cpu)
else
  local sargs = {[0] = target}
  for i = 4, #arg do sargs[i - 3] = arg[i] end
  arg = sargs
  dofile(target)
end

stop_profiler()
local f = assert(io.open(outfile, "w"))
for k, v in pairs(counts) do f:write(k, "\t", v, "\n") end
f:write("samples\t", samples, "\n")
for r, n in pairs(reasons) do f:write("reason:", r, "\t", n, "\n") end
f:close()
