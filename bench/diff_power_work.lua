-- The workload of bench/diff_power.lua: five functions of 50/20/15/10/5%
-- of the work, each its own loop of register arithmetic (no memory
-- traffic, no allocation: other processes' cache and memory use slow
-- each function alike), called in rounds so every function runs
-- throughout the run. arg[1]: rounds; arg[2]: the factor of hot's work
-- (1.1: 10% more).
local rounds = tonumber(arg[1]) or 100
local hotf = tonumber(arg[2]) or 1
local UNIT = 20000

local function hot(n)
  local x = 1
  for i = 1, n do x = (x * 1103515245 + i) % 2147483648 end
  return x
end
local function second(n)
  local x = 3
  for i = 1, n do x = (x * 69069 + i) % 4294967296 end
  return x
end
local function third(n)
  local x = 5
  for i = 1, n do x = (x * 1664525 + 1013904223 + i) % 4294967296 end
  return x
end
local function fourth(n)
  local x = 7
  for i = 1, n do x = (x * 22695477 + i) % 2147483648 end
  return x
end
local function fifth(n)
  local x = 11
  for i = 1, n do x = (x * 134775813 + i) % 4294967296 end
  return x
end

-- Each round's length varies (a factor in [0.5, 1.5) for all five) and
-- its order is shuffled, so that no fixed period meets the cpu clock's
-- sampling at the kernel's tick (4 ms here). The sequence is the same in
-- every run (a fixed seed): every run does the same work.
math.randomseed(27)
local fns = {hot, second, third, fourth, fifth}
local parts = {50 * hotf, 20, 15, 10, 5}
local s = 0
for _ = 1, rounds do
  local f = 0.5 + math.random()
  local order = {1, 2, 3, 4, 5}
  for i = 5, 2, -1 do
    local j = math.random(i)
    order[i], order[j] = order[j], order[i]
  end
  for _, i in ipairs(order) do s = s + fns[i](math.floor(parts[i] * UNIT * f + 0.5)) end
end
io.write(s % 7, "\n")
io.stderr:write(string.format("cpu %.3f\n", os.clock()))
