-- Workload "deep" for the per-sample cost measurement (not an overhead
-- workload): recurse to a given Lua stack depth, then run an interpreted
-- busy loop at the leaf, so that every sample sees the same stack.
--   luajit deep.lua DEPTH ITERATIONS
-- DEPTH counts this script's frames (main chunk + recursion + leaf).
-- The JIT is off, so a sample's safe point is reached at once.
jit.off()

local depth = tonumber(arg and arg[1]) or 10
local iters = tonumber(arg and arg[2]) or 200000000

local function leaf(n)
  local x = 0
  for i = 1, n do x = x + i % 7 end
  return x
end

-- No tail calls, so every level keeps its frame: main + (DEPTH-2) rec + leaf.
local function rec(d, n)
  local r
  if d <= 1 then r = leaf(n) else r = rec(d - 1, n) end
  return r
end

print("deep", depth, rec(depth - 2, iters))
