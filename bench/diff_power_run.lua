-- One run of bench/diff_power.lua: bench/diff_power_work.lua profiled in
-- this process by ljprof.record (so that the ring's size can be set: the
-- command line keeps 1024 records, which a wall-clock run on a loaded
-- machine fills, dropping ticks unevenly), written as a raw profile.
--   luajit bench/diff_power_run.lua OUT.ljprof CLOCK RATE RING ROUNDS FACTOR
local out, clock, rate, ring, rounds, factor = arg[1], arg[2], tonumber(arg[3]),
  tonumber(arg[4]), arg[5], arg[6]
local ljprof = require("ljprof")
local model = require("jit.prof.model")
local raw = require("jit.prof.raw")
local here = (arg[0]:match("^(.*)/[^/]*$") or ".")
ljprof.record({clock = clock, rate = rate, ring = ring})
arg = {rounds, factor}
dofile(here .. "/diff_power_work.lua")
ljprof.stop()
local st = ljprof.stats()
local p = ljprof.profile and model.from_profile(ljprof.profile()) or model.collect(ljprof.summary())
local f = assert(io.open(out, "wb"))
f:write(raw.render(p, {clock = clock, interval_us = math.floor(1e6 / rate + 0.5),
                       program = "bench/diff_power_work.lua", samples = p.total,
                       dropped = st.dropped, merged = st.merged}))
f:close()
io.stderr:write(string.format("%s: %d samples, %d merged, %d dropped\n", out, p.total, st.merged, st.dropped))
