-- The calibrated components of the accuracy harness and the driver loop
-- that runs them in a given order while timing every call.
--
-- Each component is one named Lua function with its own loop and one size
-- parameter n (the harness chooses n so that a call costs ~1 ms). The names
-- are unique (acc_*), so a stack key ("fZ;" format) shows which component a
-- sample belongs to. The driver calls each component through an upvalue of
-- the same name, so the stack dump names the frame after the component
-- (dumpstack's 'f' takes the name from the call site).
--
-- The driver M.drive runs interpreted (jit.off): no trace can start in it,
-- so no component is ever inlined into the driver loop, and every sample
-- taken inside a component has the component's frame on its stack.
--
-- The second driver, M.drive_jit (the "compiled-driver" mix), is the same
-- loop left to the JIT: its loop gets a root trace that calls into a
-- component and links to the component's loop trace, and the exit of a
-- component's loop gets a side trace that returns into the driver, reads
-- the clocks, takes the next call and links to the next component's loop
-- trace or falls back to the interpreter in the driver. Compiled code that
-- started in one component then runs on, or exits, outside it.
local ffi = require("ffi")

local M = {}

-- -- Clocks ---------------------------------------------------------------

-- clock_gettime through the FFI (ns resolution; CLOCK_MONOTONIC goes through
-- the vDSO, CLOCK_THREAD_CPUTIME_ID is a system call, ~0.6 us here).
-- The driver runs interpreted, where reading a 64-bit `long` field boxes it
-- in a new cdata: an allocation, and so a possible GC step inside the clock
-- read (inside a component's timing window, but on a driver stack). On a
-- little-endian LP64 system the struct is read as four int32 halves
-- instead, which are plain numbers: reading a clock allocates nothing.
pcall(ffi.cdef, "typedef struct { long tv_sec; long tv_nsec; } acc_timespec;")
pcall(ffi.cdef, "int clock_gettime(int clk, acc_timespec *ts);")
local CLOCK_MONOTONIC, CLOCK_THREAD_CPUTIME_ID = 1, 3
local clock_gettime = ffi.C.clock_gettime
local now_wall, now_cpu

if ffi.abi("le") and ffi.sizeof("long") == 8 then
  local words = ffi.new("int32_t[4]")              -- sec lo, sec hi, nsec lo, nsec hi
  local tsp = ffi.cast("acc_timespec *", words)    -- cast once, reused
  -- Wall (monotonic) time in seconds.
  function now_wall()
    clock_gettime(CLOCK_MONOTONIC, tsp)
    return (words[0] % 4294967296) + words[1] * 4294967296 + words[2] * 1e-9
  end
  -- CPU time of the calling thread in seconds.
  function now_cpu()
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, tsp)
    return (words[0] % 4294967296) + words[1] * 4294967296 + words[2] * 1e-9
  end
else
  local ts = ffi.new("acc_timespec")
  function now_wall()
    clock_gettime(CLOCK_MONOTONIC, ts)
    return tonumber(ts.tv_sec) + tonumber(ts.tv_nsec) * 1e-9
  end
  function now_cpu()
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, ts)
    return tonumber(ts.tv_sec) + tonumber(ts.tv_nsec) * 1e-9
  end
end
jit.off(now_wall)
jit.off(now_cpu)
M.now_wall, M.now_cpu = now_wall, now_cpu

-- The same clocks for the compiled driver, left to the JIT (a call to a
-- jit.off function would end every trace through the driver). Compiled,
-- they are inlined into the driver's traces: the FFI call to clock_gettime
-- and the reads of the result, no allocation.
local jnow_wall, jnow_cpu
if ffi.abi("le") and ffi.sizeof("long") == 8 then
  local words = ffi.new("int32_t[4]")
  local tsp = ffi.cast("acc_timespec *", words)
  function jnow_wall()
    clock_gettime(CLOCK_MONOTONIC, tsp)
    return (words[0] % 4294967296) + words[1] * 4294967296 + words[2] * 1e-9
  end
  function jnow_cpu()
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, tsp)
    return (words[0] % 4294967296) + words[1] * 4294967296 + words[2] * 1e-9
  end
else
  local ts = ffi.new("acc_timespec")
  function jnow_wall()
    clock_gettime(CLOCK_MONOTONIC, ts)
    return tonumber(ts.tv_sec) + tonumber(ts.tv_nsec) * 1e-9
  end
  function jnow_cpu()
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, ts)
    return tonumber(ts.tv_sec) + tonumber(ts.tv_nsec) * 1e-9
  end
end
M.jnow_wall, M.jnow_cpu = jnow_wall, jnow_cpu   -- also used by realmix.lua

-- -- (a) interpreted: an integer loop, never compiled ----------------------

local function acc_interp(n)
  local s = 0
  for i = 1, n do s = s + i % 7 end
  return s
end
jit.off(acc_interp)

-- -- (b) compiled: a floating-point loop that stays inside one trace -------

local function acc_jitloop(n)
  local s = 0.0
  for i = 1, n do s = s + i * 0.5 - s * 1e-9 end
  return s
end

-- -- (c) C-heavy: big string.rep / table.concat / string.format ------------
-- Interpreted on purpose: the interpreter calls these library functions as
-- C functions (a trace would call LuaJIT's internal buffer helpers instead),
-- so nearly all of the time is spent inside C library code (memcpy,
-- formatting, string interning), with a few bytecodes per iteration.

local C_PARTS = {}
for i = 1, 3000 do C_PARTS[i] = "part" .. i end
local c_serial = 0

local function acc_cfuncs(n)
  local len = 0
  for i = 1, n do
    c_serial = c_serial + 1
    local r = string.rep("abcdefgh", 4096 + i % 7)          -- ~32 KB
    local c = table.concat(C_PARTS, ",")                     -- ~25 KB
    -- The serial number at the end keeps every result distinct (LuaJIT
    -- hashes a few bytes of a long string, the last 4 among them).
    local f = string.format("%s|%s|%.3f|%d", r, c, i / 3, c_serial)
    len = len + #f
  end
  return len
end
jit.off(acc_cfuncs)

-- -- (d) allocation-heavy: tables and strings, so the GC runs ---------------

local function acc_alloc(n)
  local keep = {}
  for i = 1, n do
    local t = {i, i + 1, name = "n" .. i, sub = {x = i, y = i * 2}}
    keep[i % 32 + 1] = t                 -- escapes: no allocation sinking
  end
  return #keep
end

-- -- (e) recursive: naive Fibonacci, called in a loop ------------------------

local acc_fib
function acc_fib(k)
  if k < 2 then return k end
  return acc_fib(k - 1) + acc_fib(k - 2)
end

local function acc_recurse(n)
  local s = 0
  for _ = 1, n do s = s + acc_fib(15) end
  return s
end

-- -- (f) pcall and metamethods (__index, __add, __call) ----------------------
-- The work of each iteration runs inside pcall and through metamethods.
-- It never raises an error: an error thrown while a trace is recorded
-- aborts the trace with the same reason code (0) as a hook does, and the
-- perturbation count would no longer single out hooks.

local META = {}
META.__index = function(self, k) return #k end
META.__add = function(a, b) return rawget(a, "v") + b end
META.__call = function(self, x) return rawget(self, "v") * x end

local function meta_step(obj, i)
  local a = obj.missing        -- __index
  local b = obj + i            -- __add
  local c = obj(i)             -- __call
  return a + b + c
end

local function acc_meta(n)
  local obj = setmetatable({v = 3}, META)
  local s = 0
  for i = 1, n do
    local ok, r = pcall(meta_step, obj, i)
    if ok then s = s + r end
  end
  return s
end

-- -- (g) interpreted without jit.off: a loop that creates a closure --------
-- FNEW (creating a closure) is not compiled by LuaJIT 2.1 ("NYI: bytecode
-- 51"): every trace through this loop aborts, the loop is blacklisted and
-- runs interpreted. The tiny closure itself gets a trace (entered from the
-- interpreted loop, returning to it). Allocates a closure per iteration,
-- so the GC runs too. Used by the compiled-driver mix only.

local function acc_closure(n)
  local s = 0
  for i = 1, n do
    local f = function() return i end
    s = s + f()
  end
  return s
end

-- -- The component list ----------------------------------------------------
-- id: short label used in tables; names: the function names that identify
-- the component in a stack key; n: initial guess of the size parameter
-- (calibration rescales it to the target cost per call).

M.list = {
  {id = "interp",  what = "interpreted integer loop (jit.off)", fn = acc_interp,
   names = {"acc_interp"}, n = 100000},
  {id = "jitloop", what = "compiled floating-point loop", fn = acc_jitloop,
   names = {"acc_jitloop"}, n = 500000},
  {id = "cfuncs",  what = "string.rep/table.concat/string.format on ~30 KB strings (C)",
   fn = acc_cfuncs, names = {"acc_cfuncs"}, n = 5},
  {id = "alloc",   what = "allocation: tables and strings, GC", fn = acc_alloc,
   names = {"acc_alloc"}, n = 5000},
  {id = "recurse", what = "recursion: fib(15) in a loop", fn = acc_recurse,
   names = {"acc_recurse", "acc_fib"}, n = 5},
  {id = "meta",    what = "pcall + __index/__add/__call metamethods", fn = acc_meta,
   names = {"acc_meta"}, n = 10000},
}
-- Components used by some mixes only (not in M.list, whose every component
-- is in the "equal" mix of tests/lua/test_accuracy.lua).
M.extra = {
  {id = "closure", what = "interpreted (no jit.off): a loop creating a closure per " ..
   "iteration (FNEW is NYI, the loop is blacklisted); compiled-driver mix only",
   fn = acc_closure, names = {"acc_closure"}, n = 20000},
}
-- All components: M.list, then M.extra. Index k in a plan = index in M.all.
M.all = {}
for _, c in ipairs(M.list) do M.all[#M.all + 1] = c end
for _, c in ipairs(M.extra) do M.all[#M.all + 1] = c end
M.by_id = {}
for i, c in ipairs(M.all) do
  c.index = i
  M.by_id[c.id] = c
end

-- The name and the "file:line" fallback of every component function: when
-- dumpstack cannot name a frame from its call site, 'f' prints the chunk
-- name (path stripped by 'Z') and the line where the function is defined.
-- Returns name -> component id.
function M.frame_names()
  local map = {}
  local fns = {acc_interp = acc_interp, acc_jitloop = acc_jitloop, acc_cfuncs = acc_cfuncs,
               acc_alloc = acc_alloc, acc_recurse = acc_recurse, acc_fib = acc_fib,
               acc_meta = acc_meta, acc_closure = acc_closure}
  for _, c in ipairs(M.all) do
    for _, name in ipairs(c.names) do
      map[name] = c.id
      local info = debug.getinfo(fns[name], "S")
      local src = info.source:gsub("^@", ""):gsub("^.*/", "")
      map[src .. ":" .. info.linedefined] = c.id
    end
  end
  return map
end

-- -- The driver ------------------------------------------------------------
-- Runs seq[1..nseq] (component indices into M.all) with size parameters
-- size[index], timing each call with both clocks. Adds each call's time to
-- wall[index] and cpu[index] (seconds). Returns the wall and CPU time of the
-- whole loop. Interpreted (see the top of the file); every component is
-- called through an upvalue named after it.
local function drive(seq, nseq, size, wall, cpu)
  local W0, C0 = now_wall(), now_cpu()
  for i = 1, nseq do
    local k = seq[i]
    local n = size[k]
    -- CPU clock outside, wall clock inside: the wall window holds only the
    -- call (the CPU clock's system calls fall outside it).
    local c0 = now_cpu()
    local w0 = now_wall()
    if k == 1 then acc_interp(n)
    elseif k == 2 then acc_jitloop(n)
    elseif k == 3 then acc_cfuncs(n)
    elseif k == 4 then acc_alloc(n)
    elseif k == 5 then acc_recurse(n)
    elseif k == 6 then acc_meta(n)
    else acc_closure(n) end
    local w1 = now_wall()
    local c1 = now_cpu()
    wall[k] = wall[k] + (w1 - w0)
    cpu[k] = cpu[k] + (c1 - c0)
  end
  return now_wall() - W0, now_cpu() - C0
end
jit.off(drive)
M.drive = drive

-- The compiled driver: the same loop and the same timing, with the
-- JIT-able clocks, and not jit.off. Which traces it gets is LuaJIT's
-- business (see the top of the file); the harness only checks, in the
-- perturbation runs, that traces do start in it.
local function drive_jit(seq, nseq, size, wall, cpu)
  local W0, C0 = jnow_wall(), jnow_cpu()
  for i = 1, nseq do
    local k = seq[i]
    local n = size[k]
    local c0 = jnow_cpu()
    local w0 = jnow_wall()
    if k == 1 then acc_interp(n)
    elseif k == 2 then acc_jitloop(n)
    elseif k == 3 then acc_cfuncs(n)
    elseif k == 4 then acc_alloc(n)
    elseif k == 5 then acc_recurse(n)
    elseif k == 6 then acc_meta(n)
    else acc_closure(n) end
    local w1 = jnow_wall()
    local c1 = jnow_cpu()
    wall[k] = wall[k] + (w1 - w0)
    cpu[k] = cpu[k] + (c1 - c0)
  end
  return jnow_wall() - W0, jnow_cpu() - C0
end
M.drive_jit = drive_jit
M.drivers = {interpreted = drive, compiled = drive_jit}
-- The line ranges of the named functions of this file, for naming the
-- function a trace starts in: {{name=, source=, first=, last=}...}.
function M.function_ranges()
  local t = {}
  local fns = {drive = drive, drive_jit = drive_jit, jnow_wall = jnow_wall,
               jnow_cpu = jnow_cpu, now_wall = now_wall, now_cpu = now_cpu,
               acc_fib = acc_fib, meta_step = meta_step}
  for _, c in ipairs(M.all) do fns[c.names[1]] = c.fn end
  for name, fn in pairs(fns) do
    local info = debug.getinfo(fn, "S")
    t[#t + 1] = {name = name, source = info.source:gsub("^@", ""):gsub("^.*/", ""),
                 first = info.linedefined, last = info.lastlinedefined}
  end
  table.sort(t, function(a, b) return a.first < b.first end)
  return t
end
assert(#M.all == 7, "drive() and drive_jit() dispatch on exactly seven components")

-- The bucket of a stack key ("a;b;c", outermost first): the innermost
-- frame that map names, else "other"; cached per key in cache.
function M.bucket_of(stack, map, cache)
  local b = cache[stack]
  if not b then
    b = "other"
    local frames = {}
    for f in stack:gmatch("[^;]+") do frames[#frames + 1] = f end
    for i = #frames, 1, -1 do
      local id = map[frames[i]]
      if id then b = id; break end
    end
    cache[stack] = b
  end
  return b
end

return M
