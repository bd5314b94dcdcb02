-- Memory: the peak RSS ljprof adds to a long run with many distinct stacks
-- (luacheck looped for a minute, bench/workloads/luacheck_loop.lua), at
-- 1 kHz on the wall clock with the stack formats' depth (-jprof's G), next
-- to the same run unprofiled; and what bounds it: the ring (fixed at
-- start) and the store (texts, frames, stacks, counts: one entry per
-- distinct one), from ljprof.stats().
local proc = require("lib.proc")
local configs = require("lib.configs")

local M = {}

function M.run(ctx)
  if not ctx.have.luacheck then return nil end
  local seconds = ctx.quick and 10 or 60
  local script = ctx.script("luacheck_loop")
  local plain = configs.plain()
  local prof = configs.ljprof("mem", "ljprof `-jprof=G/clock=wall/rate=1000`",
                              "G/clock=wall/rate=1000", 1000, "wall")
  local res = {seconds = seconds, runs = {}}
  for _, c in ipairs({plain, prof}) do
    proc.log("memory: %s, %d s\n", c.name, seconds)
    c.prepare()
    local env = {}
    for k, v in pairs(ctx.env) do env[k] = v end
    for k, v in pairs(c.env) do env[k] = v end
    env.LJPROF_BENCH_SECONDS = tostring(seconds)
    local r = proc.run_retry("memory " .. c.name, c.argv(script), env)
    if r then
      r.rounds = tonumber(r.out:match("rounds%s+(%d+)"))
      r.run_kb = tonumber(r.out:match("hwm_kb%s+(%d+)"))
      if c.samples then r.st = c.samples() end
      r.out, r.err = nil, nil
    end
    res.runs[c.name] = r
  end
  res.cmd = prof.cmd:gsub("WORKLOAD", script)
  return res
end

function M.tables(res)
  local a, b = res.runs.plain, res.runs.mem
  if not (a and b and b.st) then return "(memory run failed)\n" end
  local L = {}
  local function p(s) L[#L + 1] = s end
  local st = b.st
  p(string.format("luacheck looped for %d s of wall time (`%s`; unprofiled: `luajit " ..
    "-lbench.probe bench/workloads/luacheck_loop.lua`), one run each. Peak RSS is wait4's " ..
    "`ru_maxrss`.", res.seconds, res.cmd))
  p("")
  p("| | unprofiled | ljprof wall 1 kHz | added |")
  p("|---|---|---|---|")
  p(string.format("| peak RSS | %.1f MB | %.1f MB | %+.1f MB |", a.maxrss_kb / 1024,
                  b.maxrss_kb / 1024, (b.maxrss_kb - a.maxrss_kb) / 1024))
  if a.run_kb and b.run_kb then
    p(string.format("| peak RSS before the profile is written | %.1f MB | %.1f MB | %+.1f MB |",
                    a.run_kb / 1024, b.run_kb / 1024, (b.run_kb - a.run_kb) / 1024))
  end
  p(string.format("| luacheck rounds | %s | %s | |", tostring(a.rounds), tostring(b.rounds)))
  p("")
  p(string.format("What bounds ljprof's part (`ljprof.stats()` at stop): %s samples (%s signals) " ..
    "in %s distinct stacks and %s (stack, VM state, zone) entries; **%.1f MB** held by the ring " ..
    "and the store together. The ring is fixed at start (1024 records by default, option " ..
    "`ring`); the store grows with the distinct frames, stacks and count entries only, never " ..
    "with the number of samples (texts, frames and stacks are interned once).",
    tostring(st.samples), tostring(st.signals), tostring(st.stacks), tostring(st.entries),
    (tonumber(st.bytes) or 0) / 1048576))
  p("")
  p("The rest of the peak is writing the profile at exit: `jit.prof` builds the model and the " ..
    "views in a Lua state of its own (`ljprof.write_apart`), whose size follows the distinct " ..
    "stacks and frames, not the samples; it is freed when the outputs are written.")
  p("")
  return table.concat(L, "\n")
end

return M
