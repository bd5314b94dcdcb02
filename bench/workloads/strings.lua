-- Workload "strings": string and table building (string.format, tostring,
-- concatenation, table.concat, gsub, table.sort, hash-table counting),
-- ~0.7 s unprofiled. Mixes interpreted fast functions, C code and GC.
local function build(n)
  local t = {}
  for i = 1, n do
    t[#t + 1] = string.format("%d:%s", i, tostring(i * 1.5))
  end
  return table.concat(t, ",")
end

local function words(s)
  local count = {}
  for w in s:gmatch("[^,]+") do
    local k = w:sub(1, 3)
    count[k] = (count[k] or 0) + 1
  end
  local keys = {}
  for k in pairs(count) do keys[#keys + 1] = k end
  table.sort(keys)
  return #keys, count[keys[1]]
end

local function rewrite(s)
  return (s:gsub("(%d+):", "<%1>"))
end

local total = 0
for _ = 1, 9 do
  local s = build(100000)
  local nk, c1 = words(s)
  total = total + #s + nk + c1 + #rewrite(s)
end
print("strings", total)
