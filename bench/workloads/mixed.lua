-- Workload "mixed": compiled and interpreter-only code calling each
-- other, ~0.7 s unprofiled. `checksum` and `parse_record` run
-- interpreted (jit.off on the function); the loops that call them are
-- compiled, so control crosses between traces and the interpreter on
-- every call (each call exits the trace), and compiled helpers are called
-- from interpreted code.
local byte, sub = string.byte, string.sub

-- Compiled: a numeric helper called from interpreted code.
local function mix(h, x)
  h = (h * 31 + x) % 4294967296
  return h
end

-- Interpreted: a byte loop over a string.
local function checksum(s)
  local h = 0
  for i = 1, #s do h = mix(h, byte(s, i)) end
  return h
end
jit.off(checksum)

-- Interpreted: splits "a=1;b=2;..." into a table of numbers.
local function parse_record(s)
  local rec, pos = {}, 1
  while pos <= #s do
    local eq = s:find("=", pos, true)
    local semi = s:find(";", eq, true) or #s + 1
    rec[sub(s, pos, eq - 1)] = tonumber(sub(s, eq + 1, semi - 1))
    pos = semi + 1
  end
  return rec
end
jit.off(parse_record)

-- Compiled: builds records and sums over them, calling the interpreted
-- functions from a hot loop.
local function run(n)
  local total = 0
  for i = 1, n do
    local s = "id=" .. i .. ";x=" .. (i * 7) % 1000 .. ";y=" .. (i * 13) % 997
    local rec = parse_record(s)
    total = (total + rec.x * rec.y + checksum(s)) % 1000000007
    for k = 1, 40 do total = (total + k * rec.id) % 1000000007 end
  end
  return total
end

print("mixed", run(450000))
