-- Cost gate workload: a program with N distinct functions (default 2,000)
-- kept under integer keys (no by-value name finds them), and trace churn:
-- K of them (default 300) get hot loops, compiled, then flushed, ROUNDS times.
local N, K, ROUNDS = tonumber((...) or 2000), tonumber(select(2, ...) or 300),
                     tonumber(select(3, ...) or 3)
local src = {"local F = {}"}
for i = 1, N do
  src[#src + 1] = string.format(
    "F[%d] = function(n) local s = %d for j = 1, n do s = s + j %% 7 end return s end", i, i)
end
src[#src + 1] = "return F"
local F = assert(loadstring(table.concat(src, "\n"), "=many"))()
local s = 0
for r = 1, ROUNDS do
  for k = 1, K do s = s + F[1 + (k * 7919 + r) % N](2000) end
  jit.flush()
end
print("many", N, s)
