-- Accuracy of functions LuaJIT inlines into traces (issue "The function
-- that ran, not the trace it ran in"): five workloads, each profiled by
-- ljprof (inline=recorded, the default; inline=snapshots; inline=exact;
-- inline=off) and by
-- jit.profile in jit.p's mode ("f", dumpstack per callback), with TVD of
-- the profile's shares against the truth.
--
-- Truth, outside any profiler's influence but in the profiled run's own
-- process (so the machine's load touches both alike): every function's
-- own work is mostly math.sin calls on distinct arguments (compiled to
-- calls of libm's sin that the JIT cannot merge or drop), beside its
-- table loads and stores, metatable lookups, calls and returns. Each
-- function's own time is timed, unprofiled, 5 rounds before and 5 after
-- the profiled part (variants round-robin, medians): the loop with only
-- that function's body kept (the others' bodies knocked out, their calls
-- kept) less the loop with all of them knocked out (the loop's own
-- time). Recursion: the leaves' time is the walk's less the walk with
-- empty leaves; the rest (less the driver's loop) is the inner nodes',
-- shared by node count. Checked two ways, printed under the table: the
-- parts' sum against the whole, and a second truth timed another way
-- (each function knocked out of the whole; the leaves timed apart).
-- Before (sin calls per function, the non-sin time given to the loop's
-- function) methods' step took 28% where its timed own time is 15-19%.
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
-- INLINE_CLOCK=cpu: ljprof on the CPU clock (default wall). On a loaded
-- machine the wall clock's ticks that expire while the process waits for
-- a CPU are taken where it resumes, many ticks on one PC: zones alone,
-- load 10, 1.5 s, recorded: wall 5 runs of 9 off by 0.13-0.49 (hc 44%,
-- hb 73%), cpu 0 of 8 (hb 30% at most).
-- INLINE_RUNS=1 prints each run on stderr: its TVD, its shares, and how
-- much slower its profiled part ran than the unprofiled workload (a run
-- far off whose speed is normal ran the same code as its truth).
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

-- knock: how each function but the loop's is knocked out for the truth
-- (its body replaced, its call kept): a pattern and its replacement.
W.helpers = {
  names = {"update", "ha", "hb", "hc"},
  calls = {update = 2, ha = 6, hb = 3, hc = 1},
  knock = {
    ha = {"local function ha%(x%) return .- end\n", "local function ha(x) return 0 end\n"},
    hb = {"local function hb%(x%) return .- end\n", "local function hb(x) return 0 end\n"},
    hc = {"local function hc%(x%) return .- end\n", "local function hc(x) return 0 end\n"}},
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
  knock = {
    add = {"function V:add%(o%).-\n", "function V:add(o) return self end\n"},
    scale = {"function V:scale%(k%).-\n", "function V:scale(k) return self end\n"},
    norm = {"function V:norm%(%).-\n", "function V:norm() return self end\n"}},
  -- before each timed sample the timing's variants put the vectors back
  -- to where the workload keeps them (taken from a copy of it run 40000
  -- iterations): norm's sin(x * y) costs what x and y make it cost
  -- (glibc's sin takes longer past 1e8), and with scale knocked out they
  -- would grow
  reset = "for i = 1, 64 do ps[i].x, ps[i].y, ps[i].n = SS[i].x, SS[i].y, 0 end\n",
  prep = "local SS = assert(loadstring(%q))(sin, n)\n",
  prep_src = "local sin, n = ...\n" .. read_lib("methods.lua") .. "\nfor r = 1, 20 do step(n) end\nreturn ps\n",
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
-- the recursion's truth: its leaves' bodies, its inner nodes' bodies,
-- and the whole walk less the driver's loop (visit(x, d) returning 1)
W.recursion.variants = {
  kleaf = {{"    t%[1%] = t%[1%] %+ sin%(x%) [^\n]*\n", ""}},
  kinner = {{"  t%[1%] = t%[1%] %+ sin%(x %+ d%)\n", ""}},
  kboth = {{"    t%[1%] = t%[1%] %+ sin%(x%) [^\n]*\n", ""}, {"  t%[1%] = t%[1%] %+ sin%(x %+ d%)\n", ""}},
  driver = {{"local function visit%(x, d%)\n.-\nend\n", "local function visit(x, d) return 1 end\n"}},
  -- 64 leaves a tree, called from the driver's loop
  leaves = {{"for r = 1, reps %* n / 64 do s = s %+ visit%(r, 1%) end",
    "for r = 1, reps * n do s = s + visit(r, 7) end"}}}

W.zones = {
  names = {"update", "ha", "hb", "hc"},
  calls = {update = 2, ha = 6, hb = 3, hc = 1},
  knock = W.helpers.knock,
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
  calls = {loop = 1, fmtq = 0, work = 3},
  knock = {
    fmtq = {"local function fmtq%(s%) return .- end\n", "local function fmtq(s) return s end\n"},
    work = {"local function work%(x%) return .- end\n", "local function work(x) return 0 end\n"}},
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

-- The timed variants of a workload: "full" (the workload), "o" .. name
-- (only that function's body kept, the others' knocked out), "k" ..
-- name (that one knocked out), "kall" (all of them: the loop alone);
-- the recursion's its own (W.recursion.variants).
local function gsub1(src, pat, rep)
  local out, k = src:gsub(pat, function() return rep end)
  assert(k == 1, "bench/accuracy/inline.lua: a knock-out pattern matched " .. k .. " times: " .. pat)
  return out
end
local function variants(w)
  local v = {full = w.src}
  if w.variants then
    for name, subs in pairs(w.variants) do
      local s = w.src
      for _, p in ipairs(subs) do s = gsub1(s, p[1], p[2]) end
      v[name] = s
    end
    return v
  end
  local all = w.src
  for i = 2, #w.names do
    local k = w.knock[w.names[i]]
    v["k" .. w.names[i]] = gsub1(w.src, k[1], k[2])
    all = gsub1(all, k[1], k[2])
    local only = w.src
    for j = 2, #w.names do
      if j ~= i then only = gsub1(only, w.knock[w.names[j]][1], w.knock[w.names[j]][2]) end
    end
    v["o" .. w.names[i]] = only
  end
  v.kall = all
  if w.reset then
    for name, src in pairs(v) do
      v[name] = gsub1(src, "return function%(reps%) ",
        string.format(w.prep, w.prep_src) .. "return function(reps) " .. w.reset)
    end
  end
  return v
end

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
local wname, prof_kind, secs, rounds, n = arg[1], arg[2], tonumber(arg[3]), tonumber(arg[4]), 2000
local job = assert(loadstring(io.read("*a")))()
local lf = io.open("/proc/loadavg")
print("#load", lf and lf:read("*n") or -1)
if lf then lf:close() end
if prof_kind == "jitp" or prof_kind == "none" then
  -- jit.zone: ljprof's when profiled by it; a no-op otherwise
  jit.zone = jit.zone or function() end
else
  jit.zone = require("ljprof").zone
end
local run = assert(loadstring(job.main, "=" .. wname))(math.sin, n)
-- The truth's timing, in this process, unprofiled: each variant with
-- math.sin and with the identity in its place ("/id"), round-robin,
-- `rounds` rounds before the profiled run and as many after it.
local id = function(x) return x end
local T = {}
for name, src in pairs(job.variants) do
  for _, f in ipairs({{"", math.sin}, {"/id", id}}) do
    if f[1] == "" or name == "full" or name == "driver" then
      T[#T + 1] = {key = name .. f[1], run = assert(loadstring(src, "=" .. wname))(f[2], n), t = {}}
    end
  end
end
table.sort(T, function(a, b) return a.key < b.key end)
local function timing(k)
  for _, v in ipairs(T) do v.run(1) end  -- (re)compiled: jit.p flushes
  for _, v in ipairs(T) do               -- reps for >= 5 ms a sample
    if not v.reps then
      v.reps = 1
      while true do
        local t0 = os.clock()
        v.run(v.reps)
        if os.clock() - t0 >= 0.005 then break end
        v.reps = v.reps * 2
      end
    end
  end
  for r = 1, k do
    for _, v in ipairs(T) do
      local t0 = os.clock()
      v.run(v.reps)
      v.t[#v.t + 1] = (os.clock() - t0) / v.reps
    end
  end
end
if rounds > 0 then timing(rounds) end
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
  p.record({clock = os.getenv("INLINE_CLOCK") or "wall", interval = 1, inline = prof_kind, fmt = "f;"})
end
local t1, done = os.clock(), 0
repeat run(reps) done = done + reps until os.clock() - t1 >= secs
print("#prof", (os.clock() - t1) / done)
if jp then jp.stop() end
if p then
  p.stop()
  for _, e in ipairs(p.summary()) do add(e.stack, e.count) end
  local st = p.stats()
  print("#stats", st.inline_frames, st.inline_samples, st.inline_estimated)
end
if rounds > 0 then timing(rounds) end
local function median(t, i, j)
  local c = {}
  for x = i, j do c[#c + 1] = t[x] end
  table.sort(c)
  local m = #c
  return m % 2 == 1 and c[(m + 1) / 2] or (c[m / 2] + c[m / 2 + 1]) / 2
end
for _, v in ipairs(T) do  -- median of all, of before, of after
  print("#t", v.key, median(v.t, 1, #v.t), median(v.t, 1, rounds), median(v.t, rounds + 1, #v.t))
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

local TROUNDS = 5  -- timing rounds of the truth, before and after the profiled run
local function child(wname, kind, secs)
  local job = {"return {main = ", string.format("%q", W[wname].src), ", variants = {"}
  for name, src in pairs(variants(W[wname])) do
    job[#job + 1] = string.format("[%q] = %q, ", name, src)
  end
  job[#job + 1] = "}}"
  write(dir .. "/w.lua", table.concat(job))
  -- "snapshots:next": the default mode with LJPROF_INLINE's other rule
  local mode, rule = kind:match("^(%w+):(%w+)$")
  local f = assert(io.popen(string.format("%s%s %s/child.lua %s %s %s %d < %s/w.lua",
    rule and "LJPROF_INLINE=" .. rule .. " " or "", LUAJIT, dir, wname, mode or kind, secs,
    TROUNDS, dir)))
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

-- Truth, timed in the profiled run's own process (before and after it,
-- unprofiled). f: "" with math.sin, "/id" with the identity in its place.
-- A function's own time is the time of the loop with only that
-- function's body kept (the others' knocked out, their calls kept) less
-- the loop with all of them knocked out (the scaffold: the loop's own
-- time). Checked by the sum of the parts against the whole (additivity)
-- and by a second truth: each function's time in context, the whole
-- less the whole with that function knocked out.
-- Recursion: the leaves' own time is the walk's less the walk with empty
-- leaves; the rest of the walk (less the driver's loop: visit returning
-- 1) is the inner nodes' (their bodies, their calls of their children,
-- their returns), shared by the depths by their number of nodes (every
-- inner node runs the same code). Additivity: leaves' bodies (the whole
-- less empty leaves) + inner nodes' bodies (less empty inner bodies) +
-- the bare walk (both empty, less the driver) against the walk; second
-- truth: the leaves timed apart (64 a tree called from the driver's
-- loop, less 64 times the driver's loop).
local function owns(w, T, f)
  local o, o2, full = {}, {}, T["full" .. f]
  local function t(k) return assert(T[k .. f], k .. f) end
  if w.depth then
    local visit = full - t("driver")
    local inner = t("kleaf") - t("driver")
    local leaves = t("leaves") - 64 * t("driver")
    for d = 1, 6 do
      o["d" .. d] = inner * 2 ^ (d - 1) / 63
      o2["d" .. d] = (visit - leaves) * 2 ^ (d - 1) / 63
    end
    o.d7, o2.d7 = full - t("kleaf"), leaves
    local parts = (full - t("kleaf")) + (full - t("kinner")) + (t("kboth") - t("driver"))
    return o, parts / visit - 1, visit, o2
  end
  local sum = 0
  for i, k in ipairs(w.names) do
    o[k] = i == 1 and t("kall") or t("o" .. k) - t("kall")
    o2[k] = i == 1 and t("kall") or full - t("k" .. k)
    sum = sum + o[k]
  end
  return o, sum / full - 1, full, o2
end

local function norm(w, o)
  local s, r = 0, {}
  for _, k in ipairs(w.names) do s = s + math.max(o[k], 0) end
  for _, k in ipairs(w.names) do r[k] = math.max(o[k], 0) / s end
  return r
end

local function tvd(a, b, names)
  local s = 0
  for _, k in ipairs(names) do s = s + math.abs((a[k] or 0) - (b[k] or 0)) end
  return s / 2
end

-- One child's truth and its checks: v.add (the parts' sum against the
-- whole), v.cross (TVD between the truth and the second truth), v.o (the
-- non-sin share: the workload's time with the identity in place of sin
-- against with sin), v.bycalls (TVD between the truth and the shares of
-- sin calls alone), v.drift (the workload's time after the profiled run
-- against before), v.load.
local function truth(wname, out)
  local w = W[wname]
  local T, Tb, Ta = {}, {}, {}
  for k, a, b, c in out:gmatch("#t\t(%S+)\t(%S+)\t(%S+)\t(%S+)") do
    T[k], Tb[k], Ta[k] = tonumber(a), tonumber(b), tonumber(c)
  end
  assert(T.full, "bench/accuracy/inline.lua: the child printed no timing:\n" .. out)
  local o1, add1, whole, o2 = owns(w, T, "")
  local wholeid = T["full/id"] - (w.depth and T["driver/id"] or 0)
  local ncalls = 0
  for _, k in ipairs(w.names) do ncalls = ncalls + w.calls[k] end
  local t1, t2 = norm(w, o1), norm(w, o2)
  local sc = {}
  for _, k in ipairs(w.names) do sc[k] = w.calls[k] / ncalls end
  return t1, {add = add1, cross = tvd(t1, t2, w.names), o = wholeid / whole,
    bycalls = tvd(t1, sc, w.names), drift = Ta.full / Tb.full - 1,
    load = tonumber(out:match("#load\t(%S+)")) or -1, t2 = t2,
    slow = (tonumber(out:match("#prof\t(%S+)")) or 0) / T.full - 1}
end

local KINDS = {"recorded", "snapshots", "exact", "off", "jitp"}
if arg[4] then  -- profilers compared, e.g. snapshots,snapshots:next,exact
  KINDS = {}
  for k in arg[4]:gmatch("[^,]+") do KINDS[#KINDS + 1] = k end
end

local function sorted(t) table.sort(t) return t end
local function med(t) t = sorted(t) return t[math.floor((#t + 1) / 2)] end
local function mmr(t, f)  -- "median (min..max)"
  t = sorted(t)
  f = f or "%.3f"
  return string.format(f .. " (" .. f .. " to " .. f .. ")", t[math.floor((#t + 1) / 2)], t[1], t[#t])
end

local res = {}
for _, wname in ipairs(ORDER) do
  local names = W[wname].names
  local R = {runs = {}, truths = {}, checks = {}}
  res[wname] = R
  for _, kind in ipairs(KINDS) do
    local tv, tv2, n, inl, est = {}, {}, 0, 0, 0
    local last
    for r = 1, RUNS do
      local out = child(wname, kind, SECS)
      local tr, v = truth(wname, out)
      local sh, tot, meta = shares(wname, out)
      tv[#tv + 1] = tvd(sh, tr, names)
      tv2[#tv2 + 1] = tvd(sh, v.t2, names)
      if os.getenv("INLINE_RUNS") then
        local o = {}
        for _, k in ipairs(names) do o[#o + 1] = string.format("%.1f", 100 * (sh[k] or 0)) end
        io.stderr:write(string.format("  %s %s TVD %.3f, profiled part %+.0f%% against unprofiled, shares %s\n",
          wname, kind, tv[#tv], 100 * v.slow, table.concat(o, " / ")))
      end
      R.truths[#R.truths + 1] = tr
      R.checks[#R.checks + 1] = v
      n = n + tot
      if meta then inl, est = inl + meta.inl, est + meta.est end
      last = sh
    end
    table.sort(tv)
    R.runs[kind] = {tvd = tv, tvd2 = sorted(tv2), n = n, inl = inl, est = est, last = last}
    io.stderr:write(string.format("%-10s %-9s TVD %s  (%d samples)\n", wname, kind,
      table.concat((function() local o = {} for i, x in ipairs(tv) do o[i] = string.format("%.3f", x) end return o end)(), " "), n))
  end
  -- the truth shown: each name's median over the runs' truths
  R.truth = {}
  for _, k in ipairs(names) do
    local x = {}
    for _, t in ipairs(R.truths) do x[#x + 1] = t[k] end
    R.truth[k] = med(x)
  end
end
os.execute("rm -rf '" .. dir .. "'")

-- -- Report ------------------------------------------------------------------
local function pct(x) return string.format("%.1f", 100 * (x or 0)) end
local loads = {}
for _, wname in ipairs(ORDER) do
  for _, v in ipairs(res[wname].checks) do loads[#loads + 1] = v.load end
end
print(string.format("Generated by `bench/accuracy/inline.lua %d %d` (%s, %s; load average %s). Functions " ..
  "LuaJIT inlines into compiled code, five workloads (the file's header says what each is), each " ..
  "function's own work calls of `math.sin` on distinct arguments. The truth is timed in each " ..
  "profiled run's own process, unprofiled, %d rounds before and %d after the profiled part (each " ..
  "variant's median): a function's own time is the time of the loop with only that function's body " ..
  "kept (the others' knocked out, their calls kept) less the loop with all of them knocked out, " ..
  "which is the loop's own time; recursion: the leaves' time is the walk's less the walk with empty " ..
  "leaves, the rest of the walk (less the driver's loop) is the inner nodes', shared by node count. " ..
  "Each profiler ran %d times, %d s of CPU each, ljprof on the " ..
  (os.getenv("INLINE_CLOCK") or "wall") .. " clock at 1 ms, jit.p with `fi1` " ..
  "(ITIMER_PROF: one tick per 4 ms here) and `dumpstack(\"f;\")`. TVD of the function shares (for " ..
  "recursion: of the depth shares) against the truth timed in the same process; the truth shown is " ..
  "each name's median over the workload's %d runs. A function named by its place (`helpers:4`) " ..
  "counts as the one defined on that line.",
  RUNS, SECS, os.date("!%Y-%m-%d %H:%M UTC"),
  (io.popen("git rev-parse --short HEAD 2>/dev/null"):read("*l") or "?"),
  mmr(loads, "%.1f"), TROUNDS, TROUNDS, RUNS, SECS, RUNS * #KINDS))
print()
print("| workload | truth (shares %) | profiler | TVD (median, min-max of " .. RUNS .. ") | against the second truth | shares of the last run (%) | samples | inlined (estimated) |")
print("|---|---|---|---|---|---|---|---|")
for _, wname in ipairs(ORDER) do
  local r = res[wname]
  local names = W[wname].names
  local tt = {}
  for _, k in ipairs(names) do tt[#tt + 1] = k .. " " .. pct(r.truth[k]) end
  for i, kind in ipairs(KINDS) do
    local x = r.runs[kind]
    local sh = {}
    for _, k in ipairs(names) do sh[#sh + 1] = pct(x.last[k]) end
    local m = x.tvd[math.floor((#x.tvd + 1) / 2)]
    print(string.format("| %s | %s | %s | %.3f (%.3f-%.3f) | %.3f | %s | %d | %s |",
      i == 1 and wname or "", i == 1 and table.concat(tt, ", ") or "",
      kind == "jitp" and "jit.p (f)" or "ljprof " .. kind, m, x.tvd[1], x.tvd[#x.tvd],
      x.tvd2[math.floor((#x.tvd2 + 1) / 2)],
      table.concat(sh, " / "), x.n, kind == "jitp" and "" or string.format("%d (%d)", x.inl, x.est)))
  end
end
print()
print("The truth's checks, per workload over its " .. RUNS * #KINDS .. " runs (median (min to max)): " ..
  "*additivity*, the parts' sum against the whole (recursion: leaves' bodies, inner nodes' bodies " ..
  "and the bare walk, each timed by knocking it out, against the walk); *second truth*, TVD between " ..
  "the truth and one timed another way (each function in context: the whole less the whole with " ..
  "that function knocked out; recursion: the leaves timed apart, called from the driver's loop); " ..
  "*non-sin share*, the workload's time with the identity in place of `sin` against with `sin`; " ..
  "*by calls*, TVD between the truth and the shares of `sin` calls; *drift*, the workload's time " ..
  "after the profiled part against before it; *load average* at each run's start.")
print()
print("| workload | additivity | second truth (TVD) | second truth (shares %) | non-sin share | by calls (TVD) | drift | load average |")
print("|---|---|---|---|---|---|---|---|")
for _, wname in ipairs(ORDER) do
  local c = res[wname].checks
  local function col(k, f, scale)
    local x = {}
    for _, v in ipairs(c) do x[#x + 1] = v[k] * (scale or 1) end
    return mmr(x, f)
  end
  local t2 = {}
  for _, k in ipairs(W[wname].names) do
    local x = {}
    for _, v in ipairs(c) do x[#x + 1] = v.t2[k] end
    t2[#t2 + 1] = pct(med(x))
  end
  print(string.format("| %s | %s%% | %s | %s | %s%% | %s | %s%% | %s |", wname,
    col("add", "%+.1f", 100), col("cross"), table.concat(t2, " / "),
    col("o", "%.1f", 100), col("bycalls"), col("drift", "%+.1f", 100), col("load", "%.1f")))
end
