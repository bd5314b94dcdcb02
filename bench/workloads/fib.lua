-- Workload "fib": recursive calls (naive Fibonacci, fib(30) 30 times),
-- ~0.7 s unprofiled, stacks ~30 Lua frames deep. fib runs interpreted
-- (jit.off(fib)): the worst case for a stack-dumping profiler, since every
-- sample reaches a safe point at once and dumps a deep stack. (Compiled, the
-- same code's run time varies by up to 2x between identical runs, because
-- LuaJIT randomises trace selection after aborts, which swamps overheads of
-- a few percent; compiled code is covered by mandelbrot.)
local function fib(n)
  if n < 2 then return n end
  return fib(n - 1) + fib(n - 2)
end
jit.off(fib)

local sum = 0
for _ = 1, 30 do sum = sum + fib(30) end
print("fib", sum)
