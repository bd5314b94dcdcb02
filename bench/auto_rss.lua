-- Memory and cost of periodic export (LJPROF every=N; docs/design.md,
-- "Periodic export and the control signal"): luacheck looped for S
-- seconds of wall time (bench/workloads/luacheck_loop.lua: many distinct
-- stacks) under LJPROF at 10 kHz on the wall clock, without export and
-- with every=5 and every=1, next to the same run unprofiled. The RSS of
-- each run is read from /proc/PID/status every few seconds; at the end
-- the run's ljprof.stats() gives the exports, the export helper's time
-- and the time the program's thread waited for a lent context.
--
--   luajit bench/auto_rss.lua [SECONDS [EVERY...]]   (from the source tree,
--   after ./run build; default 60 s, every=5 and every=1)
--
-- Prints a markdown table. Nothing is asserted: test_auto.lua checks
-- that ljprof's own memory stays flat.
local seconds = tonumber(arg[1]) or 60
local everys = {}
for i = 2, #arg do everys[#everys + 1] = tonumber(arg[i]) end
if #everys == 0 then everys = {5, 1} end

package.path = debug.getinfo(1, "S").source:match("^@(.-)[^/]*$") .. "?.lua;" .. package.path
local src, build, dir = require("lib.proc").tree(debug.getinfo(1, "S").source)

local ENV = string.format("LUA_PATH='%s/?.lua;%s/jit/?.lua;;' LUA_CPATH='%s/lib?.so;;' " ..
  "LJPROF_BENCH_SECONDS=%d ", src, src, build, seconds)
-- At lua_close, before jit.prof's own write: the run's counters to stderr.
local STATS = [[-e "P = newproxy(true) getmetatable(P).__gc = function() ]] ..
  [[local ok, lj = pcall(require, 'ljprof') if not ok then return end local s = lj.stats() ]] ..
  [[io.stderr:write(string.format('STATS samples=%d exports=%d export_ns=%d lend_waits=%d ]] ..
  [[lend_wait_ns=%d hook_ns=%d complete_ns=%d bytes=%d\n', s.samples, s.exports or 0, ]] ..
  [[s.export_ns or 0, s.lend_waits or 0, s.lend_wait_ns or 0, s.hook_ns, s.complete_ns, s.bytes)) end"]]

local function rss_kb(pid)
  local f = io.open("/proc/" .. pid .. "/status")
  if not f then return nil end
  local s = f:read("*a")
  f:close()
  return tonumber(s:match("VmRSS:%s*(%d+)"))
end

local function run(name, ljprof_env)
  local tag = name:gsub("%W", "_")
  local cmd = string.format("cd '%s' && { %s%s luajit %s%s '%s/bench/workloads/luacheck_loop.lua' " ..
    ">%s.out 2>%s.err & echo $!; }", dir, ENV, ljprof_env and ("LJPROF='" .. ljprof_env .. "'") or "",
    ljprof_env and "-l ljprof.auto " or "", STATS, src, tag, tag)
  local p = io.popen(cmd)
  local pid = tonumber(p:read("*l"))
  p:close()
  local points, t = {}, 0
  local step = seconds >= 30 and 5 or 1
  while true do
    os.execute("sleep " .. step)
    t = t + step
    local kb = rss_kb(pid)
    if not kb then break end
    points[#points + 1] = {t, kb}
  end
  local f = io.open(dir .. "/" .. tag .. ".err")
  local err = f and f:read("*a") or ""
  if f then f:close() end
  local st = {}
  for k, v in (err:match("STATS ([^\n]*)") or ""):gmatch("([%w_]+)=(%d+)") do st[k] = tonumber(v) end
  io.stderr:write(string.format("%s: %d RSS points, %s\n", name, #points,
                                err:match("STATS ([^\n]*)") or ("no stats: " .. err:sub(1, 300))))
  return {name = name, points = points, st = st}
end

local runs = {run("unprofiled", nil),
              run("10 kHz wall, one profile at exit", "clock=wall,rate=10000,output=" .. dir .. "/x-%p.pb.gz")}
for _, e in ipairs(everys) do
  runs[#runs + 1] = run("10 kHz wall, every=" .. e, string.format(
    "clock=wall,rate=10000,every=%g,keep=5,output=%s/e%g-%%n.pb.gz", e, dir, e))
end

print(string.format("luacheck looped %d s (bench/workloads/luacheck_loop.lua), RSS in MB " ..
                    "(/proc/PID/status VmRSS):\n", seconds))
local head, sep = {"| t (s) |"}, {"|---|"}
for _, r in ipairs(runs) do head[#head + 1] = " " .. r.name .. " |" sep[#sep + 1] = "---|" end
print(table.concat(head))
print(table.concat(sep))
local n = 0
for _, r in ipairs(runs) do n = math.max(n, #r.points) end
for i = 1, n do
  local at
  for _, r in ipairs(runs) do at = at or (r.points[i] and r.points[i][1]) end
  local row = {"| " .. at .. " |"}
  for _, r in ipairs(runs) do
    local p = r.points[i]
    row[#row + 1] = p and string.format(" %.1f |", p[2] / 1024) or " |"
  end
  print(table.concat(row))
end
print("")
print("| run | samples | exports | helper ms/export | program waits | program wait ms (total) | " ..
      "safe point us/sample | ljprof bytes at end |")
print("|---|---|---|---|---|---|---|---|")
for _, r in ipairs(runs) do
  local s = r.st
  if s.samples and s.lend_wait_ns then
    print(string.format("| %s | %d | %d | %s | %d | %.1f | %.2f | %.1f MB |", r.name, s.samples, s.exports,
      s.exports > 0 and string.format("%.1f", s.export_ns / s.exports / 1e6) or "-", s.lend_waits,
      s.lend_wait_ns / 1e6, s.hook_ns / math.max(s.samples, 1) / 1e3, s.bytes / 1048576))
  end
end
os.execute("rm -rf '" .. dir .. "'")
