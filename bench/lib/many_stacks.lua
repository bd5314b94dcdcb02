-- K^3 distinct stacks (top[a] -> mid[b] -> leaf[c], interpreted) for S
-- seconds of CPU: `luajit many_stacks.lua K S`. The text of this file is
-- the start of the programs of bench/hot_traces.lua and
-- tests/lua/test_memory.lua, which append what they measure.
local K, S = tonumber(arg[1]), tonumber(arg[2])
jit.off()
local L1, L2, L3 = {}, {}, {}
for i = 1, K do
  L3[i] = loadstring("local n = ... local s = 0 for j = 1, n do s = s + j end return s", "=leaf" .. i)
  L2[i] = loadstring("local f, n = ... local r = f(n) return r", "=mid" .. i)
  L1[i] = loadstring("local g, f, n = ... local r = g(f, n) return r", "=top" .. i)
end
local t0, r = os.clock(), 0
repeat
  for a = 1, K do local A = L1[a]
    for b = 1, K do local B = L2[b]
      for c = 1, K do r = r + A(B, L3[c], 300) end
    end
  end
until os.clock() - t0 >= S
