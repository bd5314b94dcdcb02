-- One run of the cost gate (bench/cost/gate.lua): starts ljprof (or not),
-- runs a workload, stops, and prints on stderr what the run did:
--   cost: samples S signals N safepoints P traces T cpu SECONDS (the workload's)
-- (S counts timer expiries, N the signals ljprof's handler took: under
-- valgrind a signal stands for about 10 expiries, natively about 1)
-- T counts trace events (start/stop/abort/flush) through jit.attach, in
-- LuaJIT's code, not ljprof's; records the recorded bytecodes ljprof's
-- "record" handler mapped (inline=recorded, within its budget). No output file is written unless
-- LJPROF_COST_OUT names one: the output option is written by the Lua
-- writer -jprof uses (src/writer.c), whose loading (~7.5 M instructions
-- for an empty profile) and rendering (per stack) would be charged to the
-- start and to every sample; -jprof's write is not counted either.
--   luajit bench/cost/run.lua WORKLOAD.lua INTERVAL_MS NATIVE(on|off|none) [ARGS...]
local script, interval, native = arg[1], tonumber(arg[2]), arg[3]
local wargs = {}
for i = 4, #arg do wargs[#wargs + 1] = arg[i] end
local traces = 0
jit.attach(function() traces = traces + 1 end, "trace")
local ljprof
if native ~= "none" then
  ljprof = require("ljprof")
  ljprof.record({clock = "cpu", interval = interval, native = native == "on",
                 output = os.getenv("LJPROF_COST_OUT")})
end
local chunk = assert(loadfile(script))
local c0 = os.clock()
chunk(unpack(wargs))
local cpu = os.clock() - c0
local st = {samples = 0, signals = 0, safepoints = 0}
if ljprof then
  ljprof.stop()
  st = ljprof.stats()
end
io.stderr:write(string.format("cost: samples %d signals %d safepoints %d traces %d cpu %.4f mapped %d records %d\n",
  st.samples, st.signals, st.safepoints, traces, cpu, st.record_traces or 0, st.record_events or 0))
