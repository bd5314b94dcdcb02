-- Accuracy of functions LuaJIT inlines into traces (issue "The function
-- that ran, not the trace it ran in"): five workloads, each profiled by
-- ljprof (inline=recorded, the default; inline=snapshots; inline=exact;
-- inline=off) and by
-- jit.profile in jit.p's mode ("f", dumpstack per callback), with TVD of
-- the profile's shares against the truth.
--
-- Truth by construction, outside any profiler: every function's own work
-- is a number of math.sin calls on distinct arguments (compiled to calls
-- of libm's sin that the JIT cannot merge or drop), so its share of the
-- sin time is its share of the calls. The rest (loads, stores, adds, the
-- loop) is measured: each workload is timed unprofiled once with math.sin
-- and once with the identity in its place (inlined away), and that
-- fraction of the time is charged to the function holding the loop (for
-- the recursion, spread over the nodes: each depth by its node count).
-- cformat's truth is timed: the loop's three parts in separate loops.
--
--   helpers   update's loop calls three pure arithmetic helpers (6, 3 and 1
--             sin calls; update's own 2): guard-free inlined code;
--   methods   the same shares in small methods that read and write tables
--             (OOP/vector code: stores take snapshots inside them);
--   recursion visit(t, d) calls itself twice down to depth 7, 1 sin per
--             node and 6 per leaf (shares per depth);
--   zones     the helpers loop with a zone switched around each call;
--   cformat   a wrapper around string.format("%q", s) called from a
--             compiled loop with a sin-based helper (C helper called from
--             trace code).
--
-- Usage (from the repository, after ninja -C build):
--   LUA_PATH="$PWD/?.lua;$PWD/jit/?.lua;;" LUA_CPATH="$PWD/build/lib?.so;;" \
--     luajit bench/accuracy/inline.lua [runs] [seconds] [workload,...] [profiler,...]
-- (profilers: recorded, snapshots, exact, off, jitp; snapshots:RULE sets LJPROF_INLINE=RULE)
-- Prints one markdown table (docs/accuracy.md, "Inlined functions").
local RUNS = tonumber(arg[1]) or 3
local SECS = tonumber(arg[2]) or 2

local LUAJIT = arg[-1] or "luajit"

-- Each workload: source text (a chunk taking (SIN, reps) and returning
-- the loop function), the names whose shares are compared, and how each
-- name's truth is computed from the calls per iteration.
-- A workload shared with the tests (bench/lib), as text.
local function read_lib(name)
  local f = assert(io.open((arg[0]:match("^(.*)/[^/]*$") or ".") .. "/../lib/" .. name))
  local s = f:read("*a")
  f:close()
  return s
end

local W = {}

W.helpers = {
  names = {"update", "ha", "hb", "hc"},
  calls = {update = 2, ha = 6, hb = 3, hc = 1},
  src = [[
local sin, n = ...
local function ha(x) return sin(x) + sin(x + 1) + sin(x + 2) + sin(x + 3) + sin(x + 4) + sin(x + 5) end
local function hb(x) return sin(x + 6) + sin(x + 7) + sin(x + 8) end
local function hc(x) return sin(x + 9) end
local function update(n)
  local s = 0
  for i = 1, n do s = s + ha(i) + hb(i) + hc(i) + sin(i + 10) + sin(i + 11) end
  return s
end
return function(reps) local s = 0 for r = 1, reps do s = s + update(n) end return s end
]]}

W.methods = {
  names = {"step", "add", "scale", "norm"},
  calls = {step = 2, add = 6, scale = 3, norm = 1},
  src = "local sin, n = ...\n" .. read_lib("methods.lua") .. [[
return function(reps) local s = 0 for r = 1, reps do s = s + step(n) end return s end
]]}

W.recursion = {
  names = {"d1", "d2", "d3", "d4", "d5", "d6", "d7"},
  -- 2^(d-1) nodes at depth d; 1 sin per inner node, 6 per leaf (depth 7)
  calls = {d1 = 1, d2 = 2, d3 = 4, d4 = 8, d5 = 16, d6 = 32, d7 = 64 * 6},
  depth = true,
  src = [[
local sin, n = ...
local t = {0}
local function visit(x, d)
  if d == 7 then
    t[1] = t[1] + sin(x) + sin(x + 1) + sin(x + 2) + sin(x + 3) + sin(x + 4) + sin(x + 5)
    return 1
  end
  t[1] = t[1] + sin(x + d)
  return visit(x + 1, d + 1) + visit(x + 2, d + 1)
end
return function(reps) local s = 0 for r = 1, reps * n / 64 do s = s + visit(r, 1) end return s end
]]}

W.zones = {
  names = {"update", "ha", "hb", "hc"},
  calls = {update = 2, ha = 6, hb = 3, hc = 1},
  src = [[
local sin, n = ...
local zone = (jit and jit.zone) or function() end
local function ha(x) return sin(x) + sin(x + 1) + sin(x + 2) + sin(x + 3) + sin(x + 4) + sin(x + 5) end
local function hb(x) return sin(x + 6) + sin(x + 7) + sin(x + 8) end
local function hc(x) return sin(x + 9) end
local function update(n)
  local s = 0
  for i = 1, n do
    zone("A") s = s + ha(i) zone()
    zone("B") s = s + hb(i) + hc(i) zone()
    s = s + sin(i + 10) + sin(i + 11)
  end
  return s
end
return function(reps) local s = 0 for r = 1, reps do s = s + update(n) end return s end
]]}

W.cformat = {
  names = {"loop", "fmtq", "work"},
  src = [[
local sin, n = ...
local fmt = string.format
local strs = {}
for i = 1, 16 do strs[i] = string.rep("ab\"c\n", 8) .. i end
local function fmtq(s) return fmt("%q", s) end
local function work(x) return sin(x) + sin(x + 1) + sin(x + 2) end
local function loop(n)
  local len = 0
  for i = 1, n do
    len = len + #fmtq(strs[i % 16 + 1]) + work(i) + sin(i + 3)
  end
  return len
end
return function(reps) local s = 0 for r = 1, reps do s = s + loop(n) end return s end
]]}

local ORDER = {"helpers", "methods", "recursion", "zones", "cformat"}
if arg[3] then  -- a comma-separated subset of the workloads
  local only = {}
  for w in arg[3]:gmatch("[^,]+") do
    assert(W[w], "bench/accuracy/inline.lua: unknown workload '" .. w .. "'")
    only[#only + 1] = w
  end
  ORDER = only
end

-- -- The child: runs a workload for SECS seconds under one profiler ------------

local CHILD = [[
local wname, prof_kind, secs, n = arg[1], arg[2], tonumber(arg[3]), 2000
local src = io.read("*a")
if prof_kind == "time" or prof_kind == "timeid" then  -- unprofiled time per rep
  jit.zone = function() end
  local sin = prof_kind == "time" and math.sin or function(x) return x end
  local run = assert(loadstring(src, "=" .. wname))(sin, n)
  run(20)
  local best = 1e9
  for r = 1, 5 do local t0 = os.clock() run(200) best = math.min(best, os.clock() - t0) end
  print("#time", best)
  return
end
if prof_kind == "jitp" or prof_kind == "none" then
  -- jit.zone: ljprof's when profiled by it; a no-op otherwise
  jit.zone = jit.zone or function() end
end
local zone_lib
if prof_kind ~= "jitp" and prof_kind ~= "none" then
  local ljprof = require("ljprof")
  jit.zone = ljprof.zone
end
local run = assert(loadstring(src, "=" .. wname))(math.sin, n)
-- calibrate reps to ~secs/8 per call of run
local reps = 1
while true do
  local t0 = os.clock()
  run(reps)
  local d = os.clock() - t0
  if d > 0.02 then reps = math.max(1, math.floor(reps * secs / 8 / d)) break end
  reps = reps * 2
end
local counts, total = {}, 0
local function add(stack, w)
  counts[stack] = (counts[stack] or 0) + w
  total = total + w
end
local p, jp
if prof_kind == "jitp" then
  jp = require("jit.profile")
  jp.start("fi1", function(th, s) add(jp.dumpstack(th, "f;", -100), s) end)
elseif prof_kind ~= "none" then
  p = require("ljprof")
  p.record({clock = "wall", interval = 1, inline = prof_kind, fmt = "f;"})
end
local t1 = os.clock()
repeat run(reps) until os.clock() - t1 >= secs
if jp then jp.stop() end
if p then
  p.stop()
  for _, e in ipairs(p.summary()) do add(e.stack, e.count) end
  local st = p.stats()
  print("#stats", st.inline_frames, st.inline_samples, st.inline_estimated)
end
for s, c in pairs(counts) do print(c .. "\t" .. s) end
]]

local function tmpdir()
  local f = io.popen("mktemp -d")
  local d = f:read("*l")
  f:close()
  return d
end

local dir = tmpdir()
local function write(path, s) local f = assert(io.open(path, "w")) f:write(s) f:close() end
write(dir .. "/child.lua", CHILD)

local function child(wname, kind, secs)
  write(dir .. "/w.lua", W[wname].src)
  -- "snapshots:next": the default mode with LJPROF_INLINE's other rule
  local mode, rule = kind:match("^(%w+):(%w+)$")
  local f = assert(io.popen(string.format("%s%s %s/child.lua %s %s %s < %s/w.lua",
    rule and "LJPROF_INLINE=" .. rule .. " " or "", LUAJIT, dir, wname, mode or kind, secs, dir)))
  local out = f:read("*a")
  f:close()
  return out
end

-- Shares of the names: the innermost frame among the workload's names
-- (depth for the recursion workload: the number of visit frames).
local function shares(wname, out)
  local w = W[wname]
  local c, tot, meta = {}, 0, nil
  for line in out:gmatch("[^\n]+") do
    local a, b, d = line:match("^#stats\t(.-)\t(%d+)\t(%d+)$")
    if a then
      meta = {mode = a, inl = tonumber(b), est = tonumber(d)}
    else
      local n, st = line:match("^(%d+)\t(.*)$")
      if n then
        n = tonumber(n)
        local key
        if w.depth then
          local k = 0
          for _ in st:gmatch("visit") do k = k + 1 end
          key = k > 0 and ("d" .. k) or nil
        else
          -- a function named by its place ("helpers:4") counts as the one
          -- defined on that line: this measures where the time went, the
          -- names are another matter (the docs say which were named)
          local names, byline, ln = {}, {}, 0
          for _, x in ipairs(w.names) do names[x] = true end
          for l in (w.src .. "\n"):gmatch("([^\n]*)\n") do
            ln = ln + 1
            local nm = l:match("^local function ([%w_]+)%(") or l:match("^function %w+:([%w_]+)%(")
            if nm then byline[ln] = nm end
          end
          for fr in st:gmatch("[^;]+") do
            local nm = fr:match("([%w_]+)$")
            local line = fr:match(":(%d+)$")
            if line and byline[tonumber(line)] then nm = byline[tonumber(line)] end
            if names[nm] then key = nm end
          end
        end
        if key then c[key] = (c[key] or 0) + n tot = tot + n end
      end
    end
  end
  for k, v in pairs(c) do c[k] = v / tot end
  return c, tot, meta
end

local function tvd(a, b, names)
  local s = 0
  for _, k in ipairs(names) do s = s + math.abs((a[k] or 0) - (b[k] or 0)) end
  return s / 2
end

-- Truth: sin calls per name, scaled by a sin call's cost, and the loop's
-- own cost (measured: the workload's time per iteration less its sin
-- calls) charged to the loop's function.
local function truth(wname)
  local w = W[wname]
  local t = {}
  if wname == "cformat" then
    -- fmtq's share measured by timing: the loop with and without the
    -- format call, unprofiled, same process
    local code = [[
local sin, fmt = math.sin, string.format
local strs = {}
for i = 1, 16 do strs[i] = string.rep("ab\"c\n", 8) .. i end
local function fmtq(s) return fmt("%q", s) end
local function work(x) return sin(x) + sin(x + 1) + sin(x + 2) end
local function a(n) local l = 0 for i = 1, n do l = l + #fmtq(strs[i % 16 + 1]) end return l end
local function b(n) local l = 0 for i = 1, n do l = l + work(i) end return l end
local function c(n) local l = 0 for i = 1, n do l = l + sin(i + 3) + i end return l end
local function time(f) local best = 1e9 for r = 1, 5 do local t0 = os.clock() f(300000) best = math.min(best, os.clock() - t0) end return best end
print(time(a), time(b), time(c))
]]
    write(dir .. "/t.lua", code)
    local f = io.popen(LUAJIT .. " " .. dir .. "/t.lua")
    local ta, tb, tc = f:read("*n", "*n", "*n")
    f:close()
    local s = ta + tb + tc
    return {fmtq = ta / s, work = tb / s, loop = tc / s}
  end
  local function time(kind)
    return tonumber(child(wname, kind, 0):match("#time\t(%S+)"))
  end
  local ts, ti = time("time"), time("timeid")
  local o = math.min(math.max(ti / ts, 0), 1)      -- the non-sin fraction
  local tot, nodes = 0, 0
  for _, k in ipairs(w.names) do tot = tot + w.calls[k] end
  for d = 1, 7 do nodes = nodes + 2 ^ (d - 1) end
  for i, k in ipairs(w.names) do
    t[k] = (1 - o) * w.calls[k] / tot
    if w.depth then t[k] = t[k] + o * 2 ^ (i - 1) / nodes
    elseif i == 1 then t[k] = t[k] + o end
  end
  w.overhead = o
  return t
end

local KINDS = {"recorded", "snapshots", "exact", "off", "jitp"}
if arg[4] then  -- profilers compared, e.g. snapshots,snapshots:next,exact
  KINDS = {}
  for k in arg[4]:gmatch("[^,]+") do KINDS[#KINDS + 1] = k end
end

local res = {}
for _, wname in ipairs(ORDER) do
  local tr = truth(wname)
  res[wname] = {truth = tr, runs = {}}
  for _, kind in ipairs(KINDS) do
    local tv, n, inl, est = {}, 0, 0, 0
    local last
    for r = 1, RUNS do
      local sh, tot, meta = shares(wname, child(wname, kind, SECS))
      tv[#tv + 1] = tvd(sh, tr, W[wname].names)
      n = n + tot
      if meta then inl, est = inl + meta.inl, est + meta.est end
      last = sh
    end
    table.sort(tv)
    res[wname].runs[kind] = {tvd = tv, n = n, inl = inl, est = est, last = last}
    io.stderr:write(string.format("%-10s %-9s TVD %s  (%d samples)\n", wname, kind,
      table.concat((function() local o = {} for i, x in ipairs(tv) do o[i] = string.format("%.3f", x) end return o end)(), " "), n))
  end
end
os.execute("rm -rf '" .. dir .. "'")

-- -- Report ------------------------------------------------------------------
local function pct(x) return string.format("%.1f", 100 * (x or 0)) end
print(string.format("Generated by `bench/accuracy/inline.lua %d %d` (%s, %s). Functions LuaJIT inlines " ..
  "into compiled code, five workloads (the file's header says what each is): each function's " ..
  "own work is calls of `math.sin` on distinct arguments, so the truth is each function's share of " ..
  "the calls, with the rest of the loop's time (measured unprofiled with the identity in place of " ..
  "`sin`) charged to the loop's function; cformat's truth is timed, its three parts in separate " ..
  "loops. Each profiler ran %d times, %d s of CPU each, ljprof on the wall clock at 1 ms, jit.p " ..
  "with `fi1` (ITIMER_PROF: one tick per 4 ms here) and `dumpstack(\"f;\")`. TVD of the function " ..
  "shares (for recursion: of the depth shares) against the truth. A function named by its place " ..
  "(`helpers:4`) counts as the one defined on that line.", RUNS, SECS, os.date("!%Y-%m-%d %H:%M UTC"),
  (io.popen("git rev-parse --short HEAD 2>/dev/null"):read("*l") or "?"), RUNS, SECS))
print()
print("| workload | truth (shares %) | profiler | TVD (median, min-max of " .. RUNS .. ") | shares of the last run (%) | samples | inlined (estimated) |")
print("|---|---|---|---|---|---|---|")
for _, wname in ipairs(ORDER) do
  local r = res[wname]
  local names = W[wname].names
  local tt = {}
  for _, k in ipairs(names) do tt[#tt + 1] = k .. " " .. pct(r.truth[k]) end
  for i, kind in ipairs(KINDS) do
    local x = r.runs[kind]
    local sh = {}
    for _, k in ipairs(names) do sh[#sh + 1] = pct(x.last[k]) end
    local med = x.tvd[math.floor((#x.tvd + 1) / 2)]
    print(string.format("| %s | %s | %s | %.3f (%.3f-%.3f) | %s | %d | %s |",
      i == 1 and wname or "", i == 1 and table.concat(tt, ", ") or "",
      kind == "jitp" and "jit.p (f)" or "ljprof " .. kind, med, x.tvd[1], x.tvd[#x.tvd],
      table.concat(sh, " / "), x.n, kind == "jitp" and "" or string.format("%d (%d)", x.inl, x.est)))
  end
end
