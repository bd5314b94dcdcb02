----------------------------------------------------------------------------
-- jit.prof.wrap: exact per-call timing of chosen functions.
--
--   local update = ljprof.wrap(update, "physics")   -- or jit.prof.wrap.wrap
--   ...
--   for _, w in ipairs(ljprof.wrapped()) do print(w.name, w.count, w.mean) end
--
-- While ljprof is recording, each call of the wrapped function runs inside
-- zone `name` (so its samples carry that zone) and its wall time is
-- recorded: count, total, mean, max and p99 (from a log-scale histogram
-- with 8 buckets per power of two: within 9%). While ljprof is not
-- recording, the wrapper only checks that (zone.recording, one FFI call)
-- and calls the function: a few nanoseconds. An error in the wrapped function pops the zone
-- and is raised again with its message (the traceback starts at the
-- wrapper).
----------------------------------------------------------------------------

local zone = require("jit.prof.zone")
local ffi = require("ffi")

local M = {}

local recording = zone.recording

-- Wall time in ns, without allocation. Windows has no clock_gettime
-- (kernel32's QueryPerformanceCounter there; tests/windows, win-love).
local now_ns
if ffi.os == "Windows" then
  pcall(ffi.cdef, [[
    int QueryPerformanceCounter(int64_t *count);
    int QueryPerformanceFrequency(int64_t *freq);
  ]])
  local c = ffi.new("int64_t[1]")
  ffi.C.QueryPerformanceFrequency(c)
  local ns_per_count = 1e9 / tonumber(c[0])
  now_ns = function()
    ffi.C.QueryPerformanceCounter(c)
    return tonumber(c[0]) * ns_per_count
  end
else
  pcall(ffi.cdef, [[
    typedef struct { long tv_sec; long tv_nsec; } ljprof_wrap_timespec;
    int clock_gettime(int clk, ljprof_wrap_timespec *ts);
  ]])
  -- (the struct read as int32 halves)
  local words = ffi.new("int32_t[4]")
  local tsp = ffi.cast("ljprof_wrap_timespec *", words)
  now_ns = function()
    ffi.C.clock_gettime(1, tsp)  -- CLOCK_MONOTONIC
    return ((words[0] % 4294967296) + words[1] * 4294967296) * 1e9 +
           (words[2] % 4294967296)
  end
end

local BUCKETS_PER_2X = 8
local stats = {}          -- name -> {count, total, max, hist}

local function stat_of(name)
  local s = stats[name]
  if not s then
    s = {name = name, count = 0, total = 0, max = 0, hist = {}}
    stats[name] = s
  end
  return s
end

local log2 = math.log(2)
local function record(s, ns)
  s.count = s.count + 1
  s.total = s.total + ns
  if ns > s.max then s.max = ns end
  local b = ns > 1 and math.floor(math.log(ns) / log2 * BUCKETS_PER_2X) or 0
  s.hist[b] = (s.hist[b] or 0) + 1
end

-- Wrap fn: calls inside zone name, timed while ljprof records.
function M.wrap(fn, name)
  if type(fn) ~= "function" then
    error("ljprof.wrap: bad function (a function expected, got " .. type(fn) .. ")", 2)
  end
  if type(name) ~= "string" then
    error("ljprof.wrap: bad name (a string expected, got " .. type(name) .. ")", 2)
  end
  local s = stat_of(name)
  local function finish(t0, ok, ...)
    local t1 = now_ns()
    zone()
    record(s, t1 - t0)
    if not ok then error((...), 0) end
    return ...
  end
  return function(...)
    if not recording() then return fn(...) end
    zone(name)
    return finish(now_ns(), pcall(fn, ...))
  end
end

-- The recorded timings: {name=, count=, total=, mean=, max=, p99=} (ns),
-- most total time first.
function M.wrapped()
  local out = {}
  for _, s in pairs(stats) do
    if s.count > 0 then
      local keys = {}
      for b in pairs(s.hist) do keys[#keys + 1] = b end
      table.sort(keys)
      local need, seen, p99 = math.ceil(s.count * 0.99), 0, s.max
      for _, b in ipairs(keys) do
        seen = seen + s.hist[b]
        if seen >= need then
          p99 = math.min(s.max, 2 ^ ((b + 1) / BUCKETS_PER_2X))
          break
        end
      end
      out[#out + 1] = {name = s.name, count = s.count, total = s.total,
                       mean = s.total / s.count, max = s.max, p99 = p99}
    end
  end
  table.sort(out, function(a, b)
    if a.total ~= b.total then return a.total > b.total end
    return a.name < b.name
  end)
  return out
end

-- Forget the timings.
function M.reset()
  for _, s in pairs(stats) do
    s.count, s.total, s.max, s.hist = 0, 0, 0, {}
  end
end

return M
