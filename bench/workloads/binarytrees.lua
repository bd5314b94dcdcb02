-- Workload "binarytrees": allocation and garbage collection (the Benchmarks
-- Game binary-trees, max depth 16), ~1 s unprofiled.
local function bottomup(depth)
  if depth == 0 then return {} end
  depth = depth - 1
  return { bottomup(depth), bottomup(depth) }
end

local function check(tree)
  if tree[1] then return 1 + check(tree[1]) + check(tree[2]) end
  return 1
end

local N = 16
local mindepth, maxdepth = 4, 16
local stretch = maxdepth + 1
io.write("stretch ", check(bottomup(stretch)), "\n")
local longlived = bottomup(maxdepth)
for depth = mindepth, maxdepth, 2 do
  local iters = 2 ^ (maxdepth - depth + mindepth)
  local c = 0
  for _ = 1, iters do c = c + check(bottomup(depth)) end
  io.write(iters, " trees of depth ", depth, " check ", c, "\n")
end
io.write("long lived ", N, " check ", check(longlived), "\n")
