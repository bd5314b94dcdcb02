-- One function, one name (issue 27): a Lua frame is its prototype (chunk
-- and first line); every view, format and diff gives it one name, chosen
-- by a stable rule (jit.prof.model.unify_names). And no raw names in Lua
-- views: unnamed code of the interpreter or host ("luajit+0x92c0") is kept
-- out of -jp text views, symbol versions ("@@GLIBC_2.17") are dropped.
-- Synthetic profiles first, then a program that reaches one function
-- under several names (a table field, a method, an upvalue, a tail call,
-- pcall, a coroutine), profiled by luajit -jprof twice and rendered in
-- every format. Writes only in a temporary directory it removes.
local t = require("t")
local model = require("jit.prof.model")
local raw = require("jit.prof.raw")
local diff = require("jit.prof.diff")

local dir = t.tmpdir()
local CLI = t.BUILD .. "/ljprof"
local function sh(cmd) return t.sh_in(dir, cmd) end

local function frames(list)
  for i, x in ipairs(list) do x.id = i end
  return list
end

t.case("def_name: the name the source gives a function on its first line", function()
  local cases = {
    {"local function leave_scope(self, x)", "leave_scope"},
    {"function M.walk(node)", "walk"},
    {"function Device:step(dt) -- comment", "step"},
    {"function a.b.c:d()", "d"},
    {"local task_a = function()", "task_a"},
    {"  step = function(self)", "step"},
    {"M.run = function(...)", "run"},
    {"  [\"on_tick\"] = function(t)", "on_tick"},
    {"table.sort(t, function(a, b) return a < b end)", nil},
    {"return function(x)", nil},
    {"handlers[1] = function(n)", nil},
    {"local f, g = function() end, function() end", nil},
    {"local x = 1 -- function foo()", nil},
  }
  for _, c in ipairs(cases) do t.eq(model.def_name(c[1]), c[2], c[1]) end
end)

t.case("one prototype, two names in one profile: one name, frames merged", function()
  local p = {total = 30, frames = frames({
    {lua = true, file = "linearize.lua", line = 0, linedefined = 0},
    {lua = true, file = "linearize.lua", line = 233, linedefined = 231, name = "leave_scope"},
    {lua = true, file = "linearize.lua", line = 233, linedefined = 231},
    {lua = true, file = "linearize.lua", line = 240, linedefined = 231},
  }), samples = {
    {stack = {1, 2}, vmstate = "I", zone = "", count = 10},
    {stack = {1, 3}, vmstate = "I", zone = "", count = 15},
    {stack = {1, 4}, vmstate = "J", zone = "", count = 5},
  }}
  model.unify_names(p)
  local names = {}
  for _, fr in ipairs(p.frames) do
    if fr.linedefined == 231 then names[fr.name or "-"] = true end
  end
  t.same_keys(names, {leave_scope = true}, "names of linearize.lua:231")
  t.eq(#p.frames, 3, "the unnamed frame at line 233 merged into the named one")
  t.eq(#p.samples, 2, "equal samples merged")
  local sum = 0
  for _, s in ipairs(p.samples) do sum = sum + s.count end
  t.eq(sum, 30, "no sample lost")
  -- of several names the first in byte order (counts do not matter)
  local q = {total = 2, frames = frames({
    {lua = true, file = "a.lua", line = 3, linedefined = 2, name = "zeta"},
    {lua = true, file = "a.lua", line = 3, linedefined = 2, name = "alpha"},
  }), samples = {{stack = {1}, vmstate = "I", count = 5}, {stack = {2}, vmstate = "I", count = 1}}}
  model.unify_names(q)
  t.eq(q.frames[1].name, "alpha", "first in byte order")
end)

t.case("diff: one function named in one run and unnamed in the other is one row", function()
  local A = {total = 100, frames = frames({
    {lua = true, file = "sched_work.lua", line = 0, linedefined = 0},
    {lua = true, file = "sched_work.lua", line = 19, linedefined = 18, name = "task_a"},
  }), samples = {{stack = {1, 2}, vmstate = "I", count = 100}}}
  local B = {total = 100, frames = frames({
    {lua = true, file = "sched_work.lua", line = 0, linedefined = 0},
    {lua = true, file = "sched_work.lua", line = 19, linedefined = 18},
  }), samples = {{stack = {1, 2}, vmstate = "I", count = 100}}}
  local d = diff.compare(A, B)
  local names = {}
  for _, r in ipairs(diff.rows(d)) do names[#names + 1] = r.name end
  table.sort(names)
  t.eq(table.concat(names, ","), "sched_work.lua:0,task_a", "rows: the main chunk and task_a")
  local text = diff.text(d)
  t.ok(text:find("(no function changed beyond the noise)", 1, true), "nothing changed:\n" .. text)
end)

t.case("symbol versions dropped, unnamed host code out of Lua views", function()
  t.eq(model.drop_version("clock_nanosleep@@GLIBC_2.17"), "clock_nanosleep", "@@")
  t.eq(model.drop_version("memcpy@GLIBC_2.2.5"), "memcpy", "@")
  t.eq(model.drop_version("realloc@plt"), "realloc@plt", "plt kept")
  t.eq(model.drop_version("@0x7f0012"), "@0x7f0012", "an address")
  t.ok(model.unnamed_code({lua = false, name = "luajit+0x92c0"}), "luajit+0x92c0")
  t.ok(model.unnamed_code({lua = false, name = "@0x7f001234"}), "@0x")
  t.ok(not model.unnamed_code({lua = false, name = "libfoo.so.1+0x10"}), "a library's")
  t.ok(not model.unnamed_code({lua = false, name = "pcall"}), "pcall")
  t.ok(not model.unnamed_code({lua = false, native = true, name = "host+0x10"}), "native")
end)

-- One function reached under many names; a second, anonymous one (its
-- source gives no name) under two call-site names.
t.write(dir .. "/names_prog.lua", [[
local function work(n)
  local s = 0
  for i = 1, n do s = s + (i * 7) % 13 end
  return s
end
local M = {}
M.field_work = work
local obj = {}
function obj:method(n) return work(n) end
local up = work
local function via_upvalue(n) return up(n) end
local function task_a()
  for _ = 1, 1e9 do work(20000); coroutine.yield() end
end
local anon = {}
anon[1] = function(n) local s = 0 for i = 1, n do s = s + i % 7 end return s end
M.alias_one, M.alias_two = anon[1], anon[1]
local co = coroutine.wrap(task_a)
local t0 = os.clock()
while os.clock() - t0 < 0.6 do
  M.field_work(20000)
  obj:method(20000)
  via_upvalue(20000)
  pcall(work, 20000)
  co()
  M.alias_one(20000)
  M.alias_two(20000)
  os.execute("sleep 0")
end
]])

-- Lua frames' (chunk, first line) -> names, from a raw profile.
local function proto_names(p, into)
  into = into or {}
  for _, fr in ipairs(p.frames) do
    if fr.lua and fr.linedefined then
      local k = fr.file .. ":" .. fr.linedefined
      into[k] = into[k] or {}
      into[k][fr.name or "-"] = true
    end
  end
  return into
end

t.case("names_prog: every prototype one name in every format, the same in every run", function()
  local all = {}
  for run = 1, 2 do
    local out, rc = sh(t.CHILD_ENV .. t.q(t.LUAJIT) .. " -jprof=F/rate=1000,r" .. run ..
                       ".ljprof,r" .. run .. ".txt,r" .. run .. ".folded names_prog.lua")
    t.eq(rc, 0, "run " .. run .. ": " .. out)
    local p = raw.read(dir .. "/r" .. run .. ".ljprof")
    t.ok(p, "raw profile " .. run)
    for k, names in pairs(proto_names(p)) do
      local n, list = 0, {}
      for name in pairs(names) do n = n + 1; list[#list + 1] = name end
      t.eq(n, 1, "run " .. run .. ": " .. k .. " has one name: " .. table.concat(list, ", "))
    end
    proto_names(p, all)
    local text = t.read(dir .. "/r" .. run .. ".txt")
    t.ok(not text:find("names_prog.lua:1%s"),
         "work is not unnamed in the text view:\n" .. text)
    t.ok(text:find("names_prog.lua:work", 1, true), "work named:\n" .. text)
    t.ok(not text:find("luajit+0x", 1, true), "no luajit+0x in the text view:\n" .. text)
    local folded = t.read(dir .. "/r" .. run .. ".folded")
    t.ok(not folded:find("@@", 1, true) and not folded:find("@GLIBC", 1, true),
         "no symbol versions:\n" .. folded)
    t.ok(not folded:find("via_upvalue;", 1, true) or folded:find("via_upvalue;work", 1, true),
         "a tail call's name is not work's")
    -- the report of the raw file: the same names
    local rep = sh(CLI .. " report r" .. run .. ".ljprof -v F")
    t.ok(not rep:find("names_prog.lua:1%s"), "report: work named:\n" .. rep)
  end
  -- Over runs: the same name where the source names the function (an
  -- anonymous function's call-site names depend on which calls samples
  -- caught: alias_one or alias_two, one per run).
  t.same_keys(all["names_prog.lua:1"] or {}, {work = true}, "work's name")
  t.same_keys(all["names_prog.lua:12"] or {}, {task_a = true}, "the coroutine's task_a")
end)

-- The raw names the issue saw, in the text views (Lua views) and the
-- folded stacks of bench workloads and of a C host: no "luajit+0x..."
-- (the interpreter's unnamed pmain), no "[builtin#N]", no "@@GLIBC".
local function no_raw_names(what, text, folded)
  t.ok(not text:find("luajit+0x", 1, true) and not text:find("@0x", 1, true),
       what .. ": no unnamed interpreter code in the text view:\n" .. text)
  t.ok(not text:find("[builtin#", 1, true), what .. ": no [builtin#N]:\n" .. text)
  for _, s in ipairs({text, folded}) do
    t.ok(not s:find("@@", 1, true) and not s:find("@GLIBC", 1, true),
         what .. ": no symbol versions:\n" .. s:sub(1, 2000))
  end
end

t.case("bench workloads: no raw names in the Lua views", function()
  for _, w in ipairs({"coroutines", "mixed"}) do
    local script = t.SRC .. "/bench/workloads/" .. w .. ".lua"
    local out, rc = sh(t.CHILD_ENV .. t.q(t.LUAJIT) .. " -jprof=/rate=1000," .. w .. ".txt," ..
                       w .. ".folded " .. t.q(script))
    t.eq(rc, 0, w .. ": " .. out)
    no_raw_names(w, t.read(dir .. "/" .. w .. ".txt") or "", t.read(dir .. "/" .. w .. ".folded") or "")
  end
end)

t.case("a C host (LD_PRELOAD, LJPROF): pcall by name, no raw names", function()
  local host = os.getenv("LJPROF_PLAIN_HOST") or (t.BUILD .. "/tests/plain_host")
  t.write(dir .. "/host_work.lua", [[
local function busy(n) local s = 0 for i = 1, n do s = s + math.sin(i) end return s end
local t0 = os.clock()
while os.clock() - t0 < 0.5 do pcall(busy, 1e5) end
return "ok"
]])
  local out, rc = sh(t.CHILD_ENV .. "LD_PRELOAD=" .. t.q(t.BUILD .. "/libljprof.so") ..
                     " LJPROF='output=host.txt,output=host.folded' " .. t.q(host) .. " host_work.lua")
  t.eq(rc, 0, "host: " .. out)
  local text, folded = t.read(dir .. "/host.txt") or "", t.read(dir .. "/host.folded") or ""
  no_raw_names("C host", text, folded)
  t.ok(folded:find(";pcall;", 1, true), "pcall by name:\n" .. folded)
end)

t.case("a chunk read from a FIFO: the writer at exit does not open it again", function()
  -- Names come from the source's first lines (def_name), read by the
  -- writer at exit; a FIFO opened again there blocks with no writer on
  -- its other end: the program never ended (the SIGTERM of timeout too
  -- ran the writer).
  t.write(dir .. "/fifo_src.lua", "local function work() local s = 0 " ..
    "for i = 1, 2e7 do s = s + i % 3 end return s end\nprint(work())\n")
  local out, rc = sh("rm -f fifo.lua && mkfifo fifo.lua && (cat fifo_src.lua > fifo.lua &) && " ..
    t.CHILD_ENV .. "timeout -k 2 30 " .. t.q(t.LUAJIT) .. " -jprof=f,fifo.txt fifo.lua")
  t.eq(rc, 0, "exit status (124 or 137: it hung at exit)\n" .. out)
  t.ok((t.read(dir .. "/fifo.txt") or ""):find("work", 1, true), "the profile is written")
end)

os.execute("rm -rf " .. t.q(dir))
t.done()
