-- The real-program mixes of the accuracy harness (bench/accuracy/accuracy.lua):
-- workloads shaped like programs rather than like the calibrated component
-- mixes, on purpose in the cases the component mixes avoid. Every driver
-- here is left to the JIT (no jit.off): a compiled frame loop calling three
-- subsystems; four parts run in interleaved slices from a plain main chunk;
-- a C module behind a small Lua wrapper called from a compiled loop; a real
-- C library (lua-cjson, when installed) behind a wrapper. C library calls
-- are made from compiled code, GC runs under traces, time is spent in C
-- functions called from traces.
--
-- Truth as in harness.lua: each call of a named function is timed in-run
-- (CPU clock outside, wall clock inside, clock_gettime through the FFI,
-- compiled into the drivers' traces); its share is the sum of its calls'
-- times over the time of the whole pass; the rest (the loops, clock reads,
-- bookkeeping between top-ups) is "other". A sample belongs to the
-- innermost frame of its stack key that names one of the mix's functions
-- (or its "file:line" fallback); none: "other".
local comp = require("components")
local jnow_wall, jnow_cpu = comp.jnow_wall, comp.jnow_cpu

local M = {}

local function zeros(n)
  local t = {}
  for i = 1, n do t[i] = 0 end
  return t
end

-- -- 1. frame loop: ai, phys, render ------------------------------------------

-- ai: time in math.sin / math.cos inside a compiled loop (libm, called
-- from the trace).
local function rm_ai(n)
  local s = 0.0
  for i = 1, n do
    local a = i * 0.001
    s = s + math.sin(a) * math.cos(a * 0.5 + s * 1e-9)
  end
  return s
end

-- phys: small tables allocated in a compiled loop (they escape: no
-- allocation sinking), so the GC runs under the trace.
local RM_BODIES = {}
local function rm_phys(n)
  local bodies = RM_BODIES
  for i = 1, n do
    local b = {x = i * 0.5, y = i * 0.25, vx = 1.0, vy = -1.0}
    bodies[i % 64 + 1] = b
  end
  return #bodies
end

-- render: string.format in a compiled loop, then table.concat.
local function rm_render(n)
  local parts = {}
  for i = 1, n do
    parts[i] = string.format("%d:%.2f;", i, i * 0.37)
  end
  return #table.concat(parts, "|")
end

-- The frame loop (compiled): one frame = ai, phys, render, each timed.
local function rm_frames(nframes, size, wall, cpu)
  local W0, C0 = jnow_wall(), jnow_cpu()
  local n_ai, n_phys, n_render = size[1], size[2], size[3]
  for _ = 1, nframes do
    local c0 = jnow_cpu()
    local w0 = jnow_wall()
    rm_ai(n_ai)
    local w1 = jnow_wall()
    local c1 = jnow_cpu()
    rm_phys(n_phys)
    local w2 = jnow_wall()
    local c2 = jnow_cpu()
    rm_render(n_render)
    local w3 = jnow_wall()
    local c3 = jnow_cpu()
    wall[1] = wall[1] + (w1 - w0); cpu[1] = cpu[1] + (c1 - c0)
    wall[2] = wall[2] + (w2 - w1); cpu[2] = cpu[2] + (c2 - c1)
    wall[3] = wall[3] + (w3 - w2); cpu[3] = cpu[3] + (c3 - c2)
  end
  return jnow_wall() - W0, jnow_cpu() - C0
end

-- -- 2. four parts in slices from a main chunk ---------------------------------

-- A compiled numeric loop.
local function mp_num(n)
  local s = 0.0
  for i = 1, n do s = s + (i % 5) * 0.25 - s * 1e-9 end
  return s
end

-- The same kind of loop, never compiled (jit.off).
local function mp_interp(n)
  local s = 0
  for i = 1, n do s = s + i % 7 end
  return s
end
jit.off(mp_interp)

-- A compiled loop of string.rep, then one table.concat of the results.
local function mp_rep(n)
  local parts = {}
  for i = 1, n do parts[i] = string.rep("xy", 40 + i % 13) end
  return #table.concat(parts)
end

-- A compiled allocation loop (GC under the trace).
local MP_KEEP = {}
local function mp_alloc(n)
  local keep = MP_KEEP
  for i = 1, n do keep[i % 64 + 1] = {i, i + 1, x = i} end
  return #keep
end

-- The main chunk: a plain top-level loop over the slices, each slice
-- running the four parts in turn (timed). Loaded from source, so that it is
-- a real main chunk (no name of its own, not jit.off).
local MAIN_SRC = [[
local mp_num, mp_interp, mp_rep, mp_alloc, jnow_wall, jnow_cpu, nslices, size, wall, cpu = ...
local W0, C0 = jnow_wall(), jnow_cpu()
for _ = 1, nslices do
  local c0 = jnow_cpu()
  local w0 = jnow_wall()
  mp_num(size[1])
  local w1 = jnow_wall()
  local c1 = jnow_cpu()
  mp_interp(size[2])
  local w2 = jnow_wall()
  local c2 = jnow_cpu()
  mp_rep(size[3])
  local w3 = jnow_wall()
  local c3 = jnow_cpu()
  mp_alloc(size[4])
  local w4 = jnow_wall()
  local c4 = jnow_cpu()
  wall[1] = wall[1] + (w1 - w0); cpu[1] = cpu[1] + (c1 - c0)
  wall[2] = wall[2] + (w2 - w1); cpu[2] = cpu[2] + (c2 - c1)
  wall[3] = wall[3] + (w3 - w2); cpu[3] = cpu[3] + (c3 - c2)
  wall[4] = wall[4] + (w4 - w3); cpu[4] = cpu[4] + (c4 - c3)
end
return jnow_wall() - W0, jnow_cpu() - C0
]]
local rm_main = assert(loadstring(MAIN_SRC, "=rm_main"))
local function rm_slices(nslices, size, wall, cpu)
  return rm_main(mp_num, mp_interp, mp_rep, mp_alloc, jnow_wall, jnow_cpu, nslices, size,
                 wall, cpu)
end

-- -- 3./4. C code behind a Lua wrapper, and a pure Lua function -----------------

-- The pure Lua function of both mixes: a compiled integer/float loop.
local function rm_lua(n)
  local s, t = 0, 0.0
  for i = 1, n do
    s = (s + i * 7) % 1000003
    t = t + s * 1e-6
  end
  return t
end

local ok_ctest, ctest = pcall(require, "ljp_ctest")
-- The wrapper: one call into the test C module (three C frames deep,
-- tests/native/ctest.c), as a binding's Lua side looks.
local function rm_caller(n)
  local r = ctest.run(n)
  return r
end

-- The C-module loop (compiled): the wrapper, then the Lua function, each
-- timed; called through upvalues, so the call sites name rm_caller, rm_lua.
local function rm_cmod_loop(iters, size, wall, cpu)
  local W0, C0 = jnow_wall(), jnow_cpu()
  local na, nb = size[1], size[2]
  for _ = 1, iters do
    local c0 = jnow_cpu()
    local w0 = jnow_wall()
    rm_caller(na)
    local w1 = jnow_wall()
    local c1 = jnow_cpu()
    rm_lua(nb)
    local w2 = jnow_wall()
    local c2 = jnow_cpu()
    wall[1] = wall[1] + (w1 - w0); cpu[1] = cpu[1] + (c1 - c0)
    wall[2] = wall[2] + (w2 - w1); cpu[2] = cpu[2] + (c2 - c1)
  end
  return jnow_wall() - W0, jnow_cpu() - C0
end

local ok_cjson, cjson = pcall(require, "cjson")
-- The wrapper of the cjson mix: encode a document, decode the result (the
-- document's size is the size parameter: records of a few fields).
local JSON_DOCS = {}
local function json_doc(n)
  local d = JSON_DOCS[n]
  if not d then
    d = {}
    for i = 1, n do
      d[i] = {id = i, name = "item" .. i, price = i * 1.25, tags = {"a", "b", "c"},
              ok = i % 2 == 0}
    end
    JSON_DOCS[n] = d
  end
  return d
end
local function rm_codec(doc)
  local s = cjson.encode(doc)
  local o = cjson.decode(s)
  return #s + #o
end

local function rm_json_loop(iters, size, wall, cpu)
  local W0, C0 = jnow_wall(), jnow_cpu()
  local doc, nb = json_doc(size[1]), size[2]
  for _ = 1, iters do
    local c0 = jnow_cpu()
    local w0 = jnow_wall()
    rm_codec(doc)
    local w1 = jnow_wall()
    local c1 = jnow_cpu()
    rm_lua(nb)
    local w2 = jnow_wall()
    local c2 = jnow_cpu()
    wall[1] = wall[1] + (w1 - w0); cpu[1] = cpu[1] + (c1 - c0)
    wall[2] = wall[2] + (w2 - w1); cpu[2] = cpu[2] + (c2 - c1)
  end
  return jnow_wall() - W0, jnow_cpu() - C0
end

-- -- The mixes ---------------------------------------------------------------
-- name, title, what (prose), parts = {{id=, fn=, name= (function name in
-- stack keys), what=, n= (initial size), ms= (target cost per call)}...},
-- run(units, size, wall, cpu) -> pass wall, pass CPU (one unit = one frame,
-- slice or iteration: one call of every part), units = fixed count per pass
-- (the slices) or nil (as many as the pass length asks for).

M.mixes = {
  {name = "frame-loop", run = rm_frames,
   title = "compiled frame loop: ai (math.sin/cos), phys (small tables, GC), " ..
           "render (string.format + table.concat)",
   parts = {
     {id = "ai", fn = rm_ai, name = "rm_ai", n = 20000, ms = 0.45,
      what = "math.sin/math.cos in a compiled loop"},
     {id = "phys", fn = rm_phys, name = "rm_phys", n = 5000, ms = 0.30,
      what = "small tables allocated in a compiled loop (GC)"},
     {id = "render", fn = rm_render, name = "rm_render", n = 1000, ms = 0.22,
      what = "string.format in a compiled loop, then table.concat"},
   }},
  {name = "main-slices", run = rm_slices, units = 40,
   title = "four parts in 40 interleaved slices from a plain main chunk",
   parts = {
     {id = "num", fn = mp_num, name = "mp_num", n = 100000, ms = 0.30,
      what = "compiled numeric loop"},
     {id = "interp", fn = mp_interp, name = "mp_interp", n = 100000, ms = 0.20,
      what = "the same kind of loop, jit.off(fn)"},
     {id = "rep", fn = mp_rep, name = "mp_rep", n = 5000, ms = 0.25,
      what = "compiled loop of string.rep, then one table.concat"},
     {id = "alloc", fn = mp_alloc, name = "mp_alloc", n = 20000, ms = 0.25,
      what = "compiled allocation loop (GC)"},
   }},
  ok_ctest and {name = "c-module", run = rm_cmod_loop,
   title = "C module (ljp_ctest.run, 3 C frames deep) behind a Lua wrapper, and a " ..
           "pure Lua function, from a compiled loop",
   parts = {
     {id = "cmod", fn = rm_caller, name = "rm_caller", n = 300000, ms = 0.55,
      what = "wrapper `rm_caller(n)`: `local r = ctest.run(n); return r`"},
     {id = "lua", fn = rm_lua, name = "rm_lua", n = 100000, ms = 0.45,
      what = "compiled integer/float loop"},
   }} or nil,
}
if ok_cjson then
  M.mixes[#M.mixes + 1] = {name = "cjson", run = rm_json_loop,
   title = "lua-cjson encode + decode behind a Lua wrapper, and a pure Lua function, " ..
           "from a compiled loop",
   parts = {
     {id = "json", fn = function(n) return rm_codec(json_doc(n)) end, name = "rm_codec",
      n = 50, ms = 0.55,
      what = "wrapper `rm_codec(doc)`: `cjson.encode(doc)`, `cjson.decode` of the result " ..
             "(size n: records in the document)"},
     {id = "lua", fn = rm_lua, name = "rm_lua", n = 100000, ms = 0.45,
      what = "compiled integer/float loop"},
   }}
end
M.missing = {}
if not ok_ctest then M.missing[#M.missing + 1] = "c-module (ljp_ctest not loadable)" end
if not ok_cjson then M.missing[#M.missing + 1] = "cjson (lua-cjson not installed)" end

-- The source line of each mix function, for the "file:line" fallback names.
local function frame_map(mix)
  local map = {}
  for _, pt in ipairs(mix.parts) do
    map[pt.name] = pt.id
  end
  local fns = {rm_ai = rm_ai, rm_phys = rm_phys, rm_render = rm_render, mp_num = mp_num,
               mp_interp = mp_interp, mp_rep = mp_rep, mp_alloc = mp_alloc,
               rm_caller = rm_caller, rm_lua = rm_lua, rm_codec = rm_codec}
  for _, pt in ipairs(mix.parts) do
    local info = debug.getinfo(fns[pt.name], "S")
    local src = info.source:gsub("^@", ""):gsub("^.*/", "")
    map[src .. ":" .. info.linedefined] = pt.id
  end
  return map
end

function M.buckets(mix)
  local b = {}
  for i, pt in ipairs(mix.parts) do b[i] = pt.id end
  b[#b + 1] = "other"
  return b
end

local function normalise(t, buckets)
  local sum, r = 0, {}
  for _, b in ipairs(buckets) do sum = sum + (t[b] or 0) end
  for _, b in ipairs(buckets) do r[b] = sum > 0 and (t[b] or 0) / sum or 0 end
  return r
end

local function tvd(p, q, buckets)
  local d = 0
  for _, b in ipairs(buckets) do d = d + math.abs((p[b] or 0) - (q[b] or 0)) end
  return d / 2
end

local function noise_tvd(q, n, buckets)
  if not n or n <= 0 then return nil end
  local d = 0
  for _, b in ipairs(buckets) do
    d = d + math.sqrt(2 / math.pi) * math.sqrt(q[b] * (1 - q[b]) / n)
  end
  return d / 2
end

local function attribute(entries, map, buckets)
  local counts, cache, total = {}, {}, 0
  for _, b in ipairs(buckets) do counts[b] = 0 end
  for _, e in ipairs(entries) do
    local b = comp.bucket_of(e.stack, map, cache)
    counts[b] = counts[b] + e.count
    total = total + e.count
  end
  return {counts = counts, shares = normalise(counts, buckets), total = total, bucket_of = cache}
end

-- -- Calibration ---------------------------------------------------------------
-- Each part's size n is scaled until one call costs about its `ms` of
-- thread CPU time (the call made directly, JIT on); then the cost of one
-- unit (one call of every part through the mix's driver) is measured.
-- Returns {size = {n per part}, cost = {s per call per part}, unit = s}.
function M.calibrate(mix, log)
  local size, cost = {}, {}
  for k, pt in ipairs(mix.parts) do
    local n = pt.n
    local function t(calls)
      local c0 = jnow_cpu()
      for _ = 1, calls do pt.fn(n) end
      return (jnow_cpu() - c0) / calls
    end
    t(5)
    for _ = 1, 4 do n = math.max(1, math.floor(n * pt.ms * 1e-3 / math.max(t(5), 1e-7) + 0.5)) end
    local per = {}
    for r = 1, 5 do per[r] = t(10) end
    table.sort(per)
    size[k], cost[k] = n, per[3]
  end
  local w, c = zeros(#mix.parts), zeros(#mix.parts)
  mix.run(3, size, w, c)
  local _, C = mix.run(10, size, w, c)
  log(string.format("  %-12s %s; %.3f ms per unit\n", mix.name, (function()
    local s = {}
    for k, pt in ipairs(mix.parts) do s[k] = string.format("%s n=%d %.3f ms", pt.id, size[k], cost[k] * 1e3) end
    return table.concat(s, ", ")
  end)(), C / 10 * 1e3))
  return {size = size, cost = cost, unit = C / 10}
end

-- -- One pass ------------------------------------------------------------------
-- The mix's driver with the profilers running (started in order, stopped in
-- reverse), from a jit.flush(): the traces are compiled within the pass,
-- with the profilers on, the same way for every profiler. Units: the mix's
-- fixed count (main-slices: 40 slices, each sized to 1/40 of the pass, its
-- parts rescaled at that size), or
-- as many as the pass length asks for at the calibrated cost; when the
-- calls took less CPU time than `secs`, more units follow (at most 4
-- top-ups; main-slices: more slices of the same size).
-- Returns {truth = {wall=, cpu=}, seconds = {wall=, cpu=}, units=,
-- results = {{profiler=, result=, attr=, tvd=, noise=}...}, buckets=}.
function M.run_pass(mix, cal, profilers, secs)
  local np = #mix.parts
  local buckets = M.buckets(mix)
  local size, units = {}, nil
  if mix.units then
    local scale = secs / mix.units / cal.unit
    for k = 1, np do size[k] = math.max(1, math.floor(cal.size[k] * scale + 0.5)) end
    units = mix.units
    -- Costs are not linear in n over a 10-100x scale-up (GC, buffer
    -- growth): rescale each part at its slice size (one call, twice,
    -- unprofiled) to its calibrated share of a slice.
    local sum = 0
    for k = 1, np do sum = sum + cal.cost[k] end
    for k, pt in ipairs(mix.parts) do
      local want = cal.cost[k] / sum * secs / mix.units
      for _ = 1, 2 do
        local c0 = jnow_cpu()
        pt.fn(size[k])
        local t = jnow_cpu() - c0
        size[k] = math.max(1, math.floor(size[k] * want / math.max(t, 1e-7) + 0.5))
      end
    end
  else
    for k = 1, np do size[k] = cal.size[k] end
    units = math.max(1, math.floor(secs / cal.unit + 0.5))
  end
  local wall, cpu = zeros(np), zeros(np)
  collectgarbage()
  collectgarbage()
  jit.flush()
  for _, p in ipairs(profilers) do p.start() end
  local W, C = mix.run(units, size, wall, cpu)
  local done, round = units, 0
  while C < 0.98 * secs and round < 4 do
    round = round + 1
    local w0, c0 = jnow_wall(), jnow_cpu()
    local more = math.max(1, math.ceil((secs - C) / (C / done)))
    local bw, bc = jnow_wall() - w0, jnow_cpu() - c0
    local w2, c2 = mix.run(more, size, wall, cpu)
    W, C, done = W + bw + w2, C + bc + c2, done + more
  end
  local res = {}
  for i = #profilers, 1, -1 do res[i] = profilers[i].stop() end
  local truth, secs2 = {}, {wall = W, cpu = C}
  for clock, per in pairs({wall = wall, cpu = cpu}) do
    local t, sum = {}, 0
    for k, pt in ipairs(mix.parts) do t[pt.id] = per[k]; sum = sum + per[k] end
    t.other = math.max(0, secs2[clock] - sum)
    truth[clock] = normalise(t, buckets)
  end
  local map = frame_map(mix)
  local out = {truth = truth, seconds = secs2, units = done, size = size, results = {},
               buckets = buckets}
  for i, p in ipairs(profilers) do
    local attr = attribute(res[i].entries, map, buckets)
    local q = truth[p.clock]
    out.results[i] = {profiler = p, result = res[i], attr = attr,
                      tvd = tvd(attr.shares, q, buckets),
                      noise = noise_tvd(q, res[i].draws, buckets)}
  end
  return out
end

return M
