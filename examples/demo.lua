-- demo.lua: a small program with a few distinct hot spots, profiled by
-- `./run demo`. Recursion, string building, table allocation (GC),
-- an interpreted function (jit.off) and a C-heavy function.

local function fib(n) if n < 2 then return n end return fib(n - 1) + fib(n - 2) end

local function build_strings(n)
  local t = {}
  for i = 1, n do t[#t + 1] = string.format("%d:%s", i, tostring(i * 1.5)) end
  return table.concat(t, ",")
end

local function allocate(n)
  local s = 0
  for i = 1, n do local t = {i, i + 1, {i}}; s = s + #t end
  return s
end

local function interpreted(n)
  local s = 0
  for i = 1, n do s = s + (i % 7) * (i % 3) end
  return s
end
jit.off(interpreted)

local function c_heavy(n)
  local s = 0
  for i = 1, n do s = s + #string.rep("ab", 5000 + i % 100):upper() end
  return s
end

local function main()
  local r = 0
  for _ = 1, 3 do
    r = r + fib(30)
    r = r + #build_strings(100000)
    r = r + allocate(600000)
    r = r + interpreted(3000000)
    r = r + c_heavy(3000)
  end
  return r
end

print("demo result: " .. main())
