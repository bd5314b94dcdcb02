-- Cost gate workload: samples at depth DEPTH (default 20) with a Lua
-- leaf, interpreted (jit.off) and compiled (the leaf's loop), REPS times.
local DEPTH, REPS = tonumber((...)) or 20, tonumber(select(2, ...) or 20)
local function leaf(n) local s = 0 for i = 1, n do s = s + i % 3 end return s end
local function leafi(n) local s = 0 for i = 1, n do s = s + i % 3 end return s end
jit.off(leafi)
local function down(d, n, f) if d == 0 then return f(n) end return down(d - 1, n, f) + 0 end
jit.off(down)
local s = 0
for _ = 1, REPS do s = s + down(DEPTH - 2, 2e5, leaf) + down(DEPTH - 2, 2e4, leafi) end
print("deep", s)
