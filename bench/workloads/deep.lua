-- Workload "deep" for the per-sample cost measurement (not an overhead
-- workload): recurse to a given Lua stack depth, then run a busy leaf, so
-- that every sample sees the same stack.
--   luajit deep.lua DEPTH ITERATIONS [lua|c]
-- DEPTH counts this script's frames (main chunk + recursion + leaf).
-- Leaf "lua" (default): an interpreted loop of ITERATIONS steps. Leaf "c":
-- ITERATIONS calls of zlib's compress2 on 256 KB (through the FFI), so
-- that samples land in C code with native frames above the Lua leaf
-- (compress2, deflate and zlib's internal functions).
-- The JIT is off, so a sample's safe point is reached at once.
jit.off()

local depth = tonumber(arg and arg[1]) or 10
local iters = tonumber(arg and arg[2]) or 200000000
local kind = arg and arg[3] or "lua"

local leaf
if kind == "lua" then
  leaf = function(n)
    local x = 0
    for i = 1, n do x = x + i % 7 end
    return x
  end
elseif kind == "c" then
  local ffi = require("ffi")
  ffi.cdef[[
  int compress2(uint8_t *dest, unsigned long *destLen, const uint8_t *source,
                unsigned long sourceLen, int level);
  ]]
  local z = ffi.load("z")
  local N = 256 * 1024
  local src = ffi.new("uint8_t[?]", N)
  local x = 1
  for i = 0, N - 1 do  -- 16 letters, Park-Miller sequence: deflate works
    x = (x * 16807) % 2147483647
    src[i] = 97 + x % 16
  end
  local dst = ffi.new("uint8_t[?]", N + 1024)
  local len = ffi.new("unsigned long[1]")
  leaf = function(n)
    local total = 0
    for _ = 1, n do
      len[0] = N + 1024
      assert(z.compress2(dst, len, src, N, 6) == 0, "compress2 failed")
      total = total + tonumber(len[0])
    end
    return total
  end
else
  error("deep.lua: leaf must be lua or c, not " .. tostring(kind))
end

-- No tail calls, so every level keeps its frame: main + (DEPTH-2) rec + leaf.
-- A tenth into the work, the profiling wrapper's mark (if any) notes the
-- counters: what follows is the steady state (bench/with_ljprof.lua).
local function rec(d, n)
  local r
  if d <= 1 then
    local w = math.floor(n / 10)
    r = leaf(w)
    if _LJPROF_BENCH_MARK then _LJPROF_BENCH_MARK() end
    r = r + leaf(n - w)
  else
    r = rec(d - 1, n)
  end
  return r
end

print("deep", depth, kind, rec(depth - 2, iters))
