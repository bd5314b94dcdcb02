-- ljprof report --diff (jit/prof/diff.lua, the differential SVG of
-- jit/prof/svg.lua): synthetic profiles with known numbers (normalized
-- shares, the order of rows, a function that vanished, functions matched
-- across an edit that moved their first line, the colours of the graph);
-- then a workload run twice by the ljprof command, the second time with
-- one function made slower on purpose: the report shows it first and the
-- graph paints it red. Never asserts on time; writes only in a temporary
-- directory it removes.
local t = require("t")
local diff = require("jit.prof.diff")
local svg = require("jit.prof.svg")

local dir = t.tmpdir()
local CLI = t.BUILD .. "/ljprof"
local function sh(cmd)  -- status, combined output
  local p = io.popen(cmd .. " 2>&1; echo \"rc=$?\"")
  local out = p:read("*a")
  p:close()
  local rc = tonumber(out:match("rc=(%d+)%s*$"))
  return rc, (out:gsub("rc=%d+%s*$", ""))
end

-- Data rows of the text report: {name, self before, after, delta, ...}.
local function rows(text)
  local r = {}
  for l in text:gmatch("[^\n]+") do
    local a, b, d, n, ta, tb, td, tn, name = l:match(
      "^%s*([%d.]+)%%%s+([%d.]+)%%%s+([%+%-][%d.]+)%%%s+([%d.]+)%%%s+([%d.]+)%%%s+([%d.]+)%%%s+" ..
      "([%+%-][%d.]+)%%%s+([%d.]+)%%%s+(.+)$")
    if a then
      r[#r + 1] = {name = name, a = tonumber(a), b = tonumber(b), d = tonumber(d),
                   ta = tonumber(ta), tb = tonumber(tb), td = tonumber(td),
                   noise = tonumber(n), tnoise = tonumber(tn)}
    end
  end
  return r
end

-- The fill of the frame whose tooltip starts with label, as r, g, b.
local function fill_of(doc, label)
  local at = doc:find("<title>" .. label:gsub("%p", "%%%0") .. "\n")
  if not at then return nil end
  local r, g, b = doc:match('fill="#(%x%x)(%x%x)(%x%x)"', at)
  if not r then return nil end
  return tonumber(r, 16), tonumber(g, 16), tonumber(b, 16)
end

local function frames(list)
  local f = {}
  for i, x in ipairs(list) do x.id = i; f[i] = x end
  return f
end

-- main > parse | render | gone; render made slower; gone removed.
local FR = frames({
  {lua = true, file = "app.lua", line = 0, linedefined = 0},
  {lua = true, file = "app.lua", line = 3, linedefined = 2, name = "parse"},
  {lua = true, file = "app.lua", line = 6, linedefined = 5, name = "render"},
  {lua = true, file = "app.lua", line = 9, linedefined = 8, name = "gone"},
  {lua = false, name = "string.rep"},
})
local A = {frames = FR, total = 200, samples = {
  {stack = {1, 2}, vmstate = "I", count = 100},
  {stack = {1, 3}, vmstate = "I", count = 60},
  {stack = {1, 3, 5}, vmstate = "C", count = 20},
  {stack = {1, 4}, vmstate = "I", count = 20},
}}
-- After: twice the samples (a longer run); render's lines moved by an
-- edit (first line 5 -> 7): still the same function.
local FR2 = frames({
  {lua = true, file = "app.lua", line = 0, linedefined = 0},
  {lua = true, file = "app.lua", line = 3, linedefined = 2, name = "parse"},
  {lua = true, file = "app.lua", line = 8, linedefined = 7, name = "render"},
  {lua = false, name = "string.rep"},
})
local B = {frames = FR2, total = 400, samples = {
  {stack = {1, 2}, vmstate = "I", count = 100},
  {stack = {1, 3}, vmstate = "I", count = 260},
  {stack = {1, 3, 4}, vmstate = "C", count = 40},
}}

t.case("synthetic: normalized shares, grew most first, vanished last", function()
  local d = diff.compare(A, B)
  t.eq(d.scale, 2, "before scaled by 400 / 200")
  local text = diff.text(d, {before = "a.ljprof", after = "b.ljprof"})
  t.ok(text:find("^Diff: a%.ljprof %(1 profile, 200 samples%) %-> b%.ljprof %(1 profile, 400 samples%)\n"),
       "header names both profiles:\n" .. text)
  t.ok(text:find("Shares are of each side's own total samples (normalized", 1, true),
       "says it is normalized:\n" .. text)
  local r = rows(text)
  t.eq(r[1] and r[1].name, "render", "the function whose share grew most first:\n" .. text)
  t.eq(r[1] and r[1].a, 30.0, "render before: 60 of 200")
  t.eq(r[1] and r[1].b, 65.0, "render after: 260 of 400")
  t.eq(r[1] and r[1].d, 35.0, "render: +35 points")
  t.eq(r[1] and r[1].ta, 40.0, "render total before: 80 of 200")
  t.eq(r[1] and r[1].tb, 75.0, "render total after: 300 of 400")
  t.eq(r[#r] and r[#r].name, "parse", "the one that shrank most last:\n" .. text)
  t.eq(r[#r] and r[#r].d, -25.0, "parse: 50% -> 25%")
  local gone
  for _, x in ipairs(r) do if x.name == "gone" then gone = x end end
  t.ok(gone and gone.a == 10 and gone.b == 0, "a function that vanished is listed: 10% -> 0")
  -- one row per function: render's two first lines matched by file and name
  local n = 0
  for _, x in ipairs(r) do if x.name:find("^render") then n = n + 1 end end
  t.eq(n, 1, "render matched across the edit that moved it")
end)

t.case("synthetic: the differential graph (red grew, blue shrank, grey unchanged)", function()
  local d = diff.compare(A, B)
  local doc = svg.render(diff.profile(d), {clock = "cpu", interval_us = 1000,
    program = "app.lua", diff_scale = d.scale})
  t.ok(doc:find("Differential flame graph", 1, true), "titled as a diff")
  t.ok(doc:find("before scaled x2 to the same total", 1, true), "the legend says how it is scaled")
  local r, g, b = fill_of(doc, "app.lua:render")
  t.ok(r == 255 and g < 200 and g == b, "render red: " .. tostring(r) .. "," .. tostring(g))
  r, g, b = fill_of(doc, "app.lua:parse")
  t.ok(b == 255 and r < 215 and r == g, "parse blue: " .. tostring(r) .. "," .. tostring(b))
  r, g, b = fill_of(doc, "app.lua:0")
  t.ok(r == 0xe8 and g == 0xe8 and b == 0xe8, "the root chunk unchanged: grey")
  t.ok(not doc:find("<title>app.lua:gone\n", 1, true), "a vanished frame has no width")
  t.ok(doc:find("before: 120.0 (scaled), after: 260, change: +140.0", 1, true) or
       doc:find("before: 160.0 (scaled), after: 300, change: +140.0", 1, true),
       "the tooltip gives before, after and the change")
  -- Same shape, twice the samples: nothing changed.
  local same = diff.compare(A, {frames = A.frames, total = 400, samples = {
    {stack = {1, 2}, vmstate = "I", count = 200}, {stack = {1, 3}, vmstate = "I", count = 120},
    {stack = {1, 3, 5}, vmstate = "C", count = 40}, {stack = {1, 4}, vmstate = "I", count = 40}}})
  for _, x in ipairs(diff.rows(same)) do
    t.ok(math.abs(x.delta) < 1e-9 and math.abs(x.tdelta) < 1e-9, "no change: " .. x.name)
  end
end)

t.case("critical values: normal and Student's t", function()
  t.ok(math.abs(diff.critical(0.05, math.huge) - 1.95996) < 1e-4, "z 0.975")
  t.ok(math.abs(diff.critical(0.05, 4) - 2.77645) < 1e-4, "t(4) 0.975")
  t.ok(math.abs(diff.critical(0.01, 1) - 63.6567) < 1e-3, "t(1) 0.995")
  t.ok(math.abs(diff.critical(0.001, 10) - 4.5869) < 1e-3, "t(10) 0.9995")
end)

-- Generated profiles (a fixed seed: the same numbers every time): five
-- functions under a main chunk, each profile with run-to-run variation
-- (each function's work times 1 + 1% x a normal deviate) and sampling
-- noise (N samples drawn at random by the shares); hotmul scales hot's
-- work (1.1: 10% more).
local GEN_NAMES = {"hot", "parse", "check", "emit", "misc"}
local GEN_BASE = {0.30, 0.25, 0.20, 0.15, 0.10}
local function gauss()
  return math.sqrt(-2 * math.log(1 - math.random())) * math.cos(2 * math.pi * math.random())
end
local function generated(n, hotmul)
  local w, sum = {}, 0
  for j, b in ipairs(GEN_BASE) do
    w[j] = b * (1 + 0.01 * gauss()) * (j == 1 and hotmul or 1)
    sum = sum + w[j]
  end
  local cum, c = {}, 0
  for j = 1, #w do c = c + w[j] / sum; cum[j] = c end
  local counts = {0, 0, 0, 0, 0}
  for _ = 1, n do
    local u, j = math.random(), 1
    while j < #cum and u > cum[j] do j = j + 1 end
    counts[j] = counts[j] + 1
  end
  local fr = {{id = 1, lua = true, file = "app.lua", line = 0, linedefined = 0}}
  local samples = {}
  for j, name in ipairs(GEN_NAMES) do
    fr[j + 1] = {id = j + 1, lua = true, file = "app.lua", line = j * 10 + 1,
                 linedefined = j * 10, name = name}
    samples[#samples + 1] = {stack = {1, j + 1}, vmstate = "N", zone = "", count = counts[j]}
  end
  return {frames = fr, samples = samples, total = n}
end

t.case("several profiles per side: identical sides show nothing, a 10% change always", function()
  math.randomseed(27)
  for trial = 1, 10 do
    local A, A2, B = {}, {}, {}
    for i = 1, 5 do
      A[i], A2[i], B[i] = generated(20000, 1), generated(20000, 1), generated(20000, 1.1)
    end
    local same = diff.compare_sets(A, A2)
    local text = diff.text(same)
    t.eq(#rows(text), 0, "trial " .. trial .. ": 5 vs 5 identical, nothing significant:\n" .. text)
    t.ok(text:find("(no function changed beyond the noise)", 1, true), "says so")
    t.ok(text:find("5 profiles, 100,000 samples", 1, true), "header: profiles and samples")
    local changed = diff.compare_sets(A, B)
    text = diff.text(changed)
    local r = rows(text)
    t.eq(r[1] and r[1].name, "hot", "trial " .. trial .. ": hot's 10% reported first:\n" .. text)
    t.ok(r[1] and r[1].d > r[1].noise, "beyond its noise")
  end
end)

-- The family of tests counts each test once (Bonferroni): a leaf
-- function's total is its self (the same counts in every profile), and a
-- share that is 0 or 100% in every profile (the main chunk's total) tests
-- nothing. Before, every function counted two tests: 12 for the generated
-- profiles' 6 functions, a threshold of 2.87 standard errors instead of
-- 2.58, and a real 5 vs 5 diff of five leaf loops missed what 8 tests find
-- sooner (bench/diff_power.lua).
t.case("several profiles per side: each test counted once in the family", function()
  math.randomseed(29)
  local A, B = {}, {}
  for i = 1, 5 do A[i], B[i] = generated(20000, 1), generated(20000, 1.1) end
  local d = diff.compare_sets(A, B)
  local _, tests = diff.rows(d)
  t.eq(tests.tests, 5, "five leaf functions: five tests (their totals are their selves; main's total is 100%)")
  t.ok(diff.text(d):find("over 5 tests", 1, true), "the header says so")
  -- a function with a callee: its self and total are two tests
  local function nested(k)
    local fr = frames({
      {lua = true, file = "app.lua", line = 0, linedefined = 0},
      {lua = true, file = "app.lua", line = 3, linedefined = 2, name = "outer"},
      {lua = true, file = "app.lua", line = 6, linedefined = 5, name = "inner"},
    })
    return {frames = fr, total = 1000, samples = {
      {stack = {1, 2}, vmstate = "N", zone = "", count = 300 + k},
      {stack = {1, 2, 3}, vmstate = "N", zone = "", count = 500 - k},
      {stack = {1}, vmstate = "I", zone = "", count = 200}}}
  end
  local NA, NB = {}, {}
  for i = 1, 3 do NA[i], NB[i] = nested(i * 7), nested(i * 5) end
  _, tests = diff.rows(diff.compare_sets(NA, NB))
  t.eq(tests.tests, 4, "outer's self and total, inner's one, main's self (main's total is 100%)")
end)

t.case("several profiles per side: one profile per side says the spread is unknown", function()
  math.randomseed(28)
  local text = diff.text(diff.compare(generated(20000, 1), generated(20000, 1)))
  t.ok(text:find("One profile on a side: only sampling noise", 1, true), "said:\n" .. text)
end)

t.case("several profiles per side: the command, directories and lists; grey within the noise", function()
  math.randomseed(29)
  local raw = require("jit.prof.raw")
  local meta = {clock = "wall", interval_us = 250, program = "app.lua"}
  for _, side in ipairs({"a", "b", "c"}) do
    assert(os.execute("mkdir -p " .. t.q(dir .. "/" .. side)) == 0)
    for i = 1, 5 do
      t.write(dir .. "/" .. side .. "/" .. i .. ".ljprof",
              raw.render(generated(20000, side == "c" and 1.1 or 1), meta))
    end
  end
  local rc, text = sh(string.format("%s report --diff %s %s", t.q(CLI), t.q(dir .. "/a"),
                                    t.q(dir .. "/b")))
  t.eq(rc, 0, "report --diff a/ b/:\n" .. text)
  t.eq(#rows(text), 0, "identical sides: nothing\n" .. text)
  local list = {}
  for i = 1, 5 do list[i] = dir .. "/c/" .. i .. ".ljprof" end
  rc, text = sh(string.format("%s report --diff %s %s", t.q(CLI), t.q(dir .. "/a"),
                              t.q(table.concat(list, ","))))
  t.eq(rc, 0, "report --diff a/ c1,...,c5:\n" .. text)
  t.eq(rows(text)[1] and rows(text)[1].name, "hot", "hot first:\n" .. text)
  t.ok(text:find("-> " .. dir .. "/c/1.ljprof", 1, true) or text:find("5 profiles", 1, true),
       "header")
  rc = sh(string.format("%s report --diff %s %s -o %s", t.q(CLI), t.q(dir .. "/a"),
                        t.q(dir .. "/b"), t.q(dir .. "/same.svg")))
  t.eq(rc, 0, "svg of identical sides")
  local doc = t.read(dir .. "/same.svg") or ""
  for _, name in ipairs(GEN_NAMES) do
    local r, g, b = fill_of(doc, "app.lua:" .. name)
    t.ok(r == 0xe8 and g == 0xe8 and b == 0xe8, name .. " grey (within the noise): " ..
         tostring(r) .. "," .. tostring(g) .. "," .. tostring(b))
  end
  rc = sh(string.format("%s report --diff %s %s -o %s", t.q(CLI), t.q(dir .. "/a"),
                        t.q(dir .. "/c"), t.q(dir .. "/changed.svg")))
  doc = t.read(dir .. "/changed.svg") or ""
  local r, g = fill_of(doc, "app.lua:hot")
  t.ok(r == 255 and g and g < 255, "hot red")
  local mr, mg, mb = fill_of(doc, "app.lua:misc")
  t.ok(mr == 0xe8 and mg == 0xe8 and mb == 0xe8 or (mb == 255 and mr < 255),
       "misc grey or blue, never red")
end)

-- The real thing: the same workload twice, render three times slower the
-- second time.
local SCRIPT = dir .. "/work.lua"
t.write(SCRIPT, [[
local slow = tonumber(arg[1]) or 1
local function parse(n) local s = 0 for i = 1, n do s = s + i % 7 end return s end
local function render(n) local s = 0 for i = 1, n do s = s + i % 5 end return s end
local function check(n) local s = 0 for i = 1, n do s = s + i % 3 end return s end
jit.off()
local r = 0
for _ = 1, 150 do r = r + parse(100000) + render(100000 * slow) + check(100000) end
print(r > 0)
]])

t.case("a workload run twice, one function made slower: it comes first", function()
  local before, after = dir .. "/before.ljprof", dir .. "/after.ljprof"
  local rc, out = sh(string.format("cd %s && %s %s -q -c wall -r 1000 -o %s work.lua 1", t.q(dir),
    t.CHILD_ENV, t.q(CLI), t.q(before)))
  t.eq(rc, 0, "before run:\n" .. out)
  rc, out = sh(string.format("cd %s && %s %s -q -c wall -r 1000 -o %s work.lua 3", t.q(dir),
    t.CHILD_ENV, t.q(CLI), t.q(after)))
  t.eq(rc, 0, "after run:\n" .. out)
  local text
  rc, text = sh(string.format("%s report --diff %s %s", t.q(CLI), t.q(before), t.q(after)))
  t.eq(rc, 0, "report --diff:\n" .. text)
  io.write(text)
  local r = rows(text)
  t.eq(r[1] and r[1].name, "render", "the slowed function first:\n" .. text)
  t.ok(r[1] and r[1].d > 10, "its share grew by more than 10 points")
  local last = r[#r] and r[#r].name
  t.ok(last == "parse" or last == "check", "one of the others shrank most: " .. tostring(last))
  local graph = dir .. "/diff.svg"
  rc, out = sh(string.format("%s report --diff %s %s -o %s -o %s", t.q(CLI), t.q(before),
    t.q(after), t.q(graph), t.q(dir .. "/diff.txt")))
  t.eq(rc, 0, "report --diff -o diff.svg -o diff.txt:\n" .. out)
  t.ok(out:find("^Diff: %d+ samples %-> %d+ samples %-> ") ~= nil, "one summary line: " .. out)
  local doc = t.read(graph) or ""
  local red, g = fill_of(doc, "work.lua:render")
  t.ok(red == 255 and g < 255, "render is red in the graph")
  local rr, _, bb = fill_of(doc, "work.lua:parse")
  t.ok(bb == 255 and rr < 255, "parse is blue in the graph")
  t.eq(t.read(dir .. "/diff.txt"), text, "the .txt output is the report")
end)

t.case("report --diff: bad uses are one line each, status 2", function()
  local before = dir .. "/before.ljprof"
  local cases = {
    {"report --diff " .. t.q(before), "report --diff needs two sides, before and after: each a raw profile, a directory of them or a comma-separated list (1 given)"},
    {"report --diff " .. t.q(before) .. " " .. t.q(before) .. " -o x.pb.gz",
     "x.pb.gz: report --diff writes text or svg (got pprof)"},
    {"report --diff " .. t.q(before) .. " " .. t.q(dir .. "/none.ljprof"), "cannot read raw profile"},
    {"report --diff " .. t.q(before) .. " " .. t.q(SCRIPT), "expected 'LJPROF-RAW <version>'"},
  }
  for _, c in ipairs(cases) do
    local rc, out = sh(t.q(CLI) .. " " .. c[1])
    t.eq(rc, 2, c[2] .. ": status")
    t.ok(out:find(c[2], 1, true) ~= nil, c[2] .. ": " .. out)
    t.eq(select(2, out:gsub("\n", "")), 1, "one line: " .. out)
  end
  local rc, help = sh(t.q(CLI) .. " report --help")
  t.eq(rc, 0, "report --help")
  t.ok(help:find("--diff", 1, true) ~= nil, "report --help mentions --diff")
end)

os.execute("rm -rf " .. t.q(dir))
t.done()
