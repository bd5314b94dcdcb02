-- Accuracy: ljprof's wall-clock profile of a calibrated mix puts the time
-- where it really went. Six components (interpreted, compiled, C library,
-- allocation/GC, recursion, pcall+metamethods; bench/accuracy/components.lua)
-- run in a random order, each call timed in-run; the profile's shares per
-- component must be close to those timed shares (total variation distance).
--
-- Tolerance: with ~2000-3000 samples the sampling noise alone gives a TVD
-- of about 0.02 (an iid sampler; ljprof's timer does better), and the full
-- harness (docs/accuracy.md) measured about 0.001-0.02 for this clock. 0.12 leaves room for a noisy 2-CPU
-- virtual machine, while broken attribution (a component's samples landing
-- in another component or in the driver) moves at least one 1/6 share and
-- shows up well above it. Nothing is asserted on elapsed time.
local t = require "t"

-- The harness lives in bench/accuracy: found from LJPROF_SRC (set by
-- tests/meson.build) or from this script's path.
local root = os.getenv("LJPROF_SRC")
  or (arg and arg[0] and (arg[0]:match("^(.*)/tests/lua/[^/]*$")
                          or (arg[0]:match("^tests/lua/") and ".")))
  or "."
package.path = root .. "/bench/accuracy/?.lua;" .. package.path

local H = require "harness"

local TOLERANCE = 0.12

local cal

t.case("calibrated mix: ljprof wall 1 ms shares match the in-run truth", function()
  cal = H.calibrate({target = 0.001, reps = 5})
  local mix = {name = "equal",
               weights = {interp = 1, jitloop = 1, cfuncs = 1, alloc = 1, recurse = 1, meta = 1}}
  -- At least ~2.8 s of CPU time (topped up if the machine runs faster than
  -- calibrated): ~2800 samples or more at 1 ms of wall time.
  local plan = H.plan(mix, cal, 2.8)
  local r = H.run_pass(plan, {H.ljprof("wall", 1)}, 20240601, 2.8)
  local x = r.results[1]
  local st = x.result.stats
  print(string.format("  %d samples (%d signals, %d dropped), %d calls; TVD %.3f (iid sampler ~%.3f)",
                      x.result.samples, st.signals, st.dropped, r.calls, x.tvd, x.noise or 0))
  for _, b in ipairs(H.buckets) do
    print(string.format("  %-8s profile %5.1f%%  truth %5.1f%%", b,
                        x.attr.shares[b] * 100, r.truth.wall[b] * 100))
  end
  -- Sanity: enough samples for the comparison to mean something.
  t.ok(x.result.samples >= 500, "enough samples: " .. x.result.samples)
  t.ok(st.dropped <= 0.01 * st.ticks + 2, "few dropped ticks: " .. st.dropped)
  -- Every component was seen, and the profile is close to the truth.
  for _, c in ipairs(H.components.list) do
    t.ok(x.attr.shares[c.id] > 0, c.id .. " got a share of the samples")
  end
  t.ok(x.tvd <= TOLERANCE,
       string.format("TVD %.3f <= %.2f (profile vs in-run truth)", x.tvd, TOLERANCE))
end)

-- A driver loop left to the JIT (bench/accuracy, "compiled-driver" mix):
-- the compiled loop's trace exits through the driver, so the built-in
-- charges its time to the driver. ljprof charges it to the function the
-- trace started in, when it saw the trace compile: during a run, or at any
-- time after ljprof.watch(). The traces here are compiled by an unprofiled
-- run before the profiled one (a profiler started on a warm program).
t.case("warm start: a second run, and ljprof.watch(), know earlier traces", function()
  cal = cal or H.calibrate({target = 0.001, reps = 5})
  local mix = {name = "compiled-driver", driver = "compiled", flush = true,
               lead = {"jitloop", 20}, weights = {jitloop = 1, closure = 1, cfuncs = 1}}
  local warm = {}
  for k, v in pairs(mix) do warm[k] = v end
  warm.flush = false
  local function warm_pass(seed)
    H.run_pass(H.plan(mix, cal, 0.3), {}, seed, nil)  -- flush, compile
    local r = H.run_pass(H.plan(warm, cal, 1.2), {H.ljprof("wall", 1)}, seed + 1, 1.2)
    return r.results[1], r.truth.wall
  end
  -- A profiled cold pass compiles the traces while ljprof watches; the
  -- next run (no flush) still knows where they started.
  H.run_pass(H.plan(mix, cal, 0.3), {H.ljprof("wall", 1)}, 21, nil)
  local r = H.run_pass(H.plan(warm, cal, 1.2), {H.ljprof("wall", 1)}, 22, 1.2)
  local again = r.results[1]
  print(string.format("  second run: jitloop share %.1f%% (truth %.1f%%), TVD %.3f",
                      again.attr.shares.jitloop * 100, r.truth.wall.jitloop * 100, again.tvd))
  t.ok(again.tvd <= TOLERANCE, string.format("second run: TVD %.3f <= %.2f", again.tvd, TOLERANCE))
  local before, truth0 = warm_pass(31)   -- no watch: traces compiled unseen
  t.ok(require("ljprof").watch(), "watch()")
  local after, truth1 = warm_pass(41)
  print(string.format("  jitloop share: unwatched %.1f%%, watched %.1f%% (truth %.1f%%, %.1f%%); " ..
                      "TVD %.3f, %.3f", before.attr.shares.jitloop * 100,
                      after.attr.shares.jitloop * 100, truth0.jitloop * 100,
                      truth1.jitloop * 100, before.tvd, after.tvd))
  t.ok(after.result.samples >= 500, "enough samples: " .. after.result.samples)
  t.ok(after.tvd <= TOLERANCE, string.format("watched: TVD %.3f <= %.2f", after.tvd, TOLERANCE))
  t.ok(after.attr.shares.jitloop >= 0.5 * truth1.jitloop,
       "watched: the compiled loop keeps its time")
end)

t.done()
