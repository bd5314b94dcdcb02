-- The power of `ljprof report --diff` on real runs (issue 27): T trials of
-- R vs R identical runs and T trials of R vs R runs with one function's
-- work 10% larger, all runs interleaved (base, base', changed, ...), J at
-- a time. Each run is bench/diff_power_work.lua (five functions of
-- 50/20/15/10/5% of the work, register arithmetic only) under the short
-- form `ljprof`, clock cpu (the thread's CPU time: time other processes
-- take is not counted), so only the work and LuaJIT's choices vary.
--
--   nice luajit bench/diff_power.lua [--trials 10] [--runs 5] [--seconds 16]
--        [--rate 250] [--jobs 2] [--factor 1.1] [--dir /tmp/dp] [--ljprof build/ljprof]
--        [--budget S]   (no run started after S seconds: the trials whose
--                        runs all finished are compared, the rest left out)
--        [--clock C] [--ring N]   (ring N > 0: each run profiled in its own
--                        process by bench/diff_power_run.lua with a ring of N
--                        records, which the command line does not set)
--
-- Prints, per trial, what the diff showed (the significant rows), then the
-- counts: identical trials with any change shown (false), changed trials
-- whose hot function was shown grown (found), samples per run and the load
-- average before and after. Exit status 0 always (a measurement, not a test).
local opt = {trials = 10, runs = 5, seconds = 16, rate = 250, jobs = 2, factor = 1.1,
             dir = "/tmp/ljprof-diff-power", ljprof = "build/ljprof", budget = 0,
             clock = "cpu", ring = 0}
local i = 1
while arg[i] do
  local k = arg[i]:match("^%-%-(.+)$")
  assert(k and opt[k] ~= nil and arg[i + 1], "unknown option " .. tostring(arg[i]))
  opt[k] = tonumber(arg[i + 1]) or arg[i + 1]
  i = i + 2
end
local here = (arg[0]:match("^(.*)/[^/]*$") or ".")
local work = here .. "/diff_power_work.lua"
local hotline = 0  -- the hot function's first line (its name where none is known)
do
  local n = 0
  for line in io.lines(work) do
    n = n + 1
    if line:match("^local function hot%(") then hotline = n end
  end
end

local function sh(cmd)
  local f = assert(io.popen(cmd, "r"))
  local s = f:read("*a")
  f:close()
  return s
end
local function loadavg() return (sh("cat /proc/loadavg"):match("^(%S+ %S+ %S+)")) end
local function log(...) io.stdout:write(string.format(...)); io.stdout:flush() end

os.execute("rm -rf " .. opt.dir .. " && mkdir -p " .. opt.dir)
-- Rounds for the asked CPU seconds, from a short unprofiled run.
local cal = sh(string.format("luajit %s 40 2>&1 >/dev/null", work))
local cpu40 = assert(tonumber(cal:match("cpu ([%d.]+)")), "calibration: " .. cal)
local rounds = math.max(1, math.floor(opt.seconds * 40 / cpu40 + 0.5))
log("diff_power: %d trials of %d vs %d runs, %d rounds per run (~%.0f s CPU), clock %s, rate %d, ring %s, %d jobs at a time, factor %.2f\n",
    opt.trials, opt.runs, opt.runs, rounds, opt.seconds, opt.clock, opt.rate,
    opt.ring > 0 and tostring(opt.ring) or "1024 (the command line's)", opt.jobs, opt.factor)
local env = opt.ring > 0 and sh(opt.ljprof .. " --env"):gsub("\n", "") .. "; " or ""
local load0 = loadavg()
log("load average before: %s\n", load0)

-- The runs, interleaved: trial t, run r: a (base), b (base), c (changed).
local jobs = {}
for t = 1, opt.trials do
  for _, side in ipairs({"a", "b", "c"}) do os.execute(string.format("mkdir -p %s/%d%s", opt.dir, t, side)) end
  for r = 1, opt.runs do
    for _, side in ipairs({"a", "b", "c"}) do
      jobs[#jobs + 1] = {file = string.format("%s/%d%s/%d.ljprof", opt.dir, t, side, r),
                         factor = side == "c" and opt.factor or 1}
    end
  end
end
local t0 = os.time()
local ntrials = opt.trials
for j = 1, #jobs, opt.jobs do
  if opt.budget > 0 and os.time() - t0 > opt.budget then
    ntrials = math.floor((j - 1) / (3 * opt.runs))
    log("  budget of %d s spent: %d trials complete\n", opt.budget, ntrials)
    break
  end
  local cmds = {}
  for k = j, math.min(#jobs, j + opt.jobs - 1) do
    if opt.ring > 0 then
      cmds[#cmds + 1] = string.format("luajit %s/diff_power_run.lua %s %s %d %d %d %s >/dev/null 2>>%s/runs.log &",
        here, jobs[k].file, opt.clock, opt.rate, opt.ring, rounds, jobs[k].factor, opt.dir)
    else
      cmds[#cmds + 1] = string.format("%s -q -c %s -r %d -o %s %s %d %s >/dev/null 2>>%s/runs.log &",
        opt.ljprof, opt.clock, opt.rate, jobs[k].file, work, rounds, jobs[k].factor, opt.dir)
    end
  end
  os.execute(env .. table.concat(cmds, " ") .. " wait")
  if j % 15 == 1 then log("  runs %d-%d of %d done, %d s\n", j, math.min(#jobs, j + opt.jobs - 1), #jobs, os.time() - t0) end
end

-- The diffs.
local function diff(x, y)
  local out = sh(string.format("%s report --diff %s/%s %s/%s 2>&1", opt.ljprof, opt.dir, x, opt.dir, y))
  local shown = {}
  for line in out:gmatch("[^\n]+") do
    local d, name = line:match("^%s*[%d.]+%%%s+[%d.]+%%%s+([+-][%d.]+)%%.*%%%s+(%S.*)$")
    if d then shown[#shown + 1] = {name = name, delta = tonumber(d), line = line} end
  end
  local na, nb = out:match("%(%d+ profiles?, ([%d,]+) samples%).-%(%d+ profiles?, ([%d,]+) samples%)")
  return shown, out, na, nb
end
local false_pos, found = 0, 0
for t = 1, ntrials do
  local s, out, na, nb = diff(t .. "a", t .. "b")
  if #s > 0 then false_pos = false_pos + 1 end
  log("trial %2d identical (%s vs %s samples): %s\n", t, na or "?", nb or "?",
      #s == 0 and "no change shown" or (#s .. " shown"))
  for _, r in ipairs(s) do log("    %s\n", r.line) end
  if not na then log("%s\n", out) end
  s, out, na, nb = diff(t .. "a", t .. "c")
  local hot
  for _, r in ipairs(s) do
    if (r.name:match("^hot") or r.name:match(":" .. hotline .. "$")) and r.delta > 0 then hot = r end
  end
  if hot then found = found + 1 end
  log("trial %2d changed   (%s vs %s samples): %s\n", t, na or "?", nb or "?",
      hot and "hot shown grown" or "hot NOT shown")
  for _, r in ipairs(s) do log("    %s\n", r.line) end
  if not na then log("%s\n", out) end
end
log("identical: a change shown in %d of %d trials; changed: hot found in %d of %d trials\n",
    false_pos, ntrials, found, ntrials)
log("load average before %s, after %s; %d s\n", load0, loadavg(), os.time() - t0)
