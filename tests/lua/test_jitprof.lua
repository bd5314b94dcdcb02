-- jit/prof.lua, the -jprof front end: run real `luajit -jprof=...`
-- subprocesses on a deterministic workload and compare the report's
-- structure with `luajit -jp=...` on the same workload.
local t = require("t")

local function tmpname() return os.tmpname() end

local function write(path, text)
  local f = assert(io.open(path, "w")); f:write(text); f:close()
end

local function read(path)
  local f = io.open(path, "r"); if not f then return nil end
  local s = f:read("*a"); f:close(); return s
end

-- Two interpreted functions with a fixed 3:1 cost ratio (~0.5 s of CPU).
local workload = tmpname() .. ".lua"
write(workload, [[
jit.off()
local function heavy(n) local s = 0 for i = 1, n do s = s + i % 7 end return s end
local function light(n) local s = 0 for i = 1, n do s = s + i % 5 end return s end
local r = 0
for k = 1, 200 do r = r + heavy(300000) + light(100000) end
io.write("result ", r, "\n")
]])

local function run(opt, script, extra)
  local out = tmpname()
  local cmd = string.format("luajit %s %s%s > %s 2>&1", opt, script, extra or "", out)
  local ok = os.execute(cmd)
  local text = read(out) or ""
  os.remove(out)
  return text, ok
end

-- The report's lines, up to ljprof's own "Hot but interpreted" section
-- (after a blank line), which -jp does not have.
local function lines(text)
  local r = {}
  text = text:gsub("\n\nHot but interpreted.*$", "\n")
  for l in text:gmatch("[^\n]+") do r[#r + 1] = l end
  return r
end

t.case("hot but interpreted: its own section after the -jp lines", function()
  local text = run("-jprof", workload)
  local sec = text:match("\n\n(Hot but interpreted.*)$")
  t.ok(sec, "section present:\n" .. text)
  if sec then
    t.ok(sec:find("\n%s?%d+%%  [^\n]*:%d+  no trace aborts reported") ~= nil,
      "jit.off functions listed without aborts:\n" .. sec)
  end
  t.ok(not run("-jprof=r", workload):find("Hot but", 1, true), "not in raw mode")
end)

t.case("default report: percent lines, heavy first, like -jp", function()
  local mine = run("-jprof", workload)
  local theirs = run("-jp", workload)
  local l1, l2 = lines(mine), lines(theirs)
  t.eq(l1[1], l2[1], "program output first")
  t.ok(l1[2] and l1[2]:match("^%s?%d+%%  heavy$"), "top entry: " .. tostring(l1[2]))
  t.ok(l2[2] and l2[2]:match("^%s?%d+%%  heavy$"), "jit.p top entry: " .. tostring(l2[2]))
  for i = 2, #l1 do
    t.ok(l1[i]:match("^%s?%d+%%  %S") ~= nil, "line grammar: " .. l1[i])
  end
  -- The share, from enough samples not to flake: ~125 timer signals at
  -- 2 ms (CPU timers fire at most every 4 ms here), so 3:1 is 75% +- 4%.
  local share = lines(run("-jprof=i2", workload))[2]
  local pct = tonumber(share:match("(%d+)%%"))
  t.ok(pct >= 55 and pct <= 95, "heavy share " .. pct .. "% (expected about 75%)")
end)

t.case("raw counts (r) and minimum (m0)", function()
  local l = lines(run("-jprof=rm0", workload))
  t.ok(l[2]:match("^%s*%d+  heavy$") ~= nil, "raw line: " .. tostring(l[2]))
end)

t.case("split by VM state (vf, fv)", function()
  local l = lines(run("-jprof=vf", workload))
  t.ok(l[2]:match("^%s?%d+%%  Interpreted$") ~= nil, "first level is a VM state: " .. tostring(l[2]))
  t.ok(l[3]:match("^  %-%- %s?%d+%%  heavy$") ~= nil, "second level: " .. tostring(l[3]))
  l = lines(run("-jprof=fv", workload))
  t.ok(l[2]:match("^%s?%d+%%  heavy$") ~= nil, "first level: " .. tostring(l[2]))
  t.ok(l[3]:match("^  <%- %s?%d+%%  Interpreted$") ~= nil, "second level: " .. tostring(l[3]))
end)

t.case("lines (l) and depth (2, -2)", function()
  local l = lines(run("-jprof=l", workload))
  t.ok(l[2]:match("^%s?%d+%%  [^:]+%.lua:2$") ~= nil, "hot line is line 2: " .. tostring(l[2]))
  l = lines(run("-jprof=2", workload))
  t.ok(l[2]:match("^%s?%d+%%  heavy < [^ ]+$") ~= nil, "callee < caller: " .. tostring(l[2]))
  l = lines(run("-jprof=-2", workload))
  t.ok(l[2]:match("^%s?%d+%%  [^ ]+ > heavy$") ~= nil, "caller > callee: " .. tostring(l[2]))
end)

t.case("folded stacks (G) to a file", function()
  local out = tmpname()
  local text = run("-jprof=G," .. out, workload)
  t.eq(lines(text)[1]:match("^result"), "result", "program output on stdout")
  local folded = read(out) or ""
  os.remove(out)
  local n = 0
  for l in folded:gmatch("[^\n]+") do
    n = n + 1
    t.ok(l:match("^[^ ]+ %d+$") or l:match("^.+ %d+$"), "folded line: " .. l)
  end
  t.ok(n >= 2, "at least two stacks")
  t.ok(folded:find(";heavy %d+\n") ~= nil, "root-first stacks end in the leaf")
end)

t.case("profile written on os.exit", function()
  local script = tmpname() .. ".lua"
  write(script, [[
jit.off()
local function spin(n) local s = 0 for i = 1, n do s = s + i % 3 end return s end
for k = 1, 300 do spin(200000) end
os.exit(3)
]])
  local out = tmpname()
  local _, ok = run("-jprof=r," .. out, script)
  local text = read(out) or ""
  os.remove(out); os.remove(script)
  t.ok(text:match("^%s*%d+  spin\n") ~= nil, "report written before os.exit: " .. text)
end)

t.case("unsupported option: one clear line", function()
  local text = run("-jprof=z", workload)
  t.ok(text:find("option 'z' is not supported yet", 1, true) ~= nil, text)
end)

os.remove(workload)
t.done()
