-- Profiling started from the environment (LJPROF; jit/prof/auto.lua,
-- src/auto.c, src/preload.c), in child processes:
--   * luajit -l ljprof.auto app.lua, and bad LJPROF values (one line, the
--     program runs unprofiled, its output unchanged);
--   * LD_PRELOAD=libljprof.so in a C host that knows nothing of ljprof
--     (tests/embed/plain_host.c, linked with LuaJIT only), one state after
--     another and on threads, in a host that dlopens LuaJIT after start
--     (tests/embed/dlopen_host.c, as nginx's load_module), and in the
--     luajit executable, from a clean environment (env -i); without
--     LJPROF the preload changes nothing;
--   * the control signal: snapshots of a running process (every state of
--     it, one of them blocked), pause and resume (a phase run while
--     paused has no sample), a program that handles the signal itself;
--   * periodic export: files of each interval, rotation by count and by
--     size, ljprof's memory flat however many distinct stacks pass.
-- No assertion on time: the children move from phase to phase when the
-- test tells them (files in the test's directory), and a wait that lasts
-- 60 s is a hang. Every file goes to a directory of its own, removed at
-- the end; only processes this test started are signalled, by pid.
local t = require("t")

local q = t.q
local dir = t.tmpdir()
local LJ = t.LUAJIT
local LIB = os.getenv("LJPROF_LIB") or (t.BUILD .. "/libljprof.so")
local HOST = os.getenv("LJPROF_PLAIN_HOST") or (t.BUILD .. "/tests/plain_host")
-- What a clean environment needs to find ljprof's Lua files (and luajit).
local CLEAN = string.format("env -i PATH=%s LUA_PATH=%s LUA_CPATH=%s", q(os.getenv("PATH")),
  q(t.SRC .. "/?.lua;" .. t.SRC .. "/jit/?.lua;;"), q(t.BUILD .. "/lib?.so;;"))

local function path(name) return dir .. "/" .. name end

local function sh(cmd) return (t.sh_in(dir, cmd)) end

local function exists(p)
  local f = io.open(p)
  if f then f:close() end
  return f ~= nil
end

local function lines(s)
  local l = {}
  for x in (s or ""):gmatch("[^\n]+") do l[#l + 1] = x end
  return l
end

local function ls(pattern)  -- file names in dir matching a Lua pattern
  local l = {}
  for name in sh("ls -1"):gmatch("[^\n]+") do
    if name:match(pattern) then l[#l + 1] = name end
  end
  table.sort(l)
  return l
end

local function clean()
  sh("rm -f -- *.folded *.pb.gz *.txt go_* stop* out* err* pid* status* fifo*")
end

-- Wait until pred() is true; a wait of 60 s is a hang (then false).
local function wait_for(pred, what)
  for _ = 1, 1200 do
    if pred() then return true end
    os.execute("sleep 0.05")
  end
  t.ok(false, "waited 60 s for " .. what)
  return false
end

-- Start cmd (a shell command line) in the background with its output
-- in out<tag> and err<tag>; returns a handle with the pid of the program
-- itself (exec keeps it) and its exit status once it ends.
local function spawn(cmd, tag)
  tag = tag or ""
  os.execute(string.format("cd %s && rm -f pid%s status%s && { (sh -c 'echo $$ >pid%s; exec \"$@\"' sh %s " ..
                           ">out%s 2>err%s; echo $? >status%s) >/dev/null 2>&1 & }",
                           q(dir), tag, tag, tag, cmd, tag, tag, tag))
  local h = {tag = tag}
  wait_for(function() h.pid = tonumber(t.read(path("pid" .. tag)) or "") return h.pid end, "the pid")
  function h.out() return t.read(path("out" .. tag)) or "" end
  function h.err() return t.read(path("err" .. tag)) or "" end
  function h.kill(sig) if h.pid then os.execute("kill -" .. sig .. " " .. h.pid .. " 2>/dev/null") end end
  function h.wait()
    if not wait_for(function() return exists(path("status" .. tag)) end, "the end of " .. cmd) then
      h.kill("KILL")
      return "hung"
    end
    return tonumber(t.read(path("status" .. tag)))
  end
  return h
end

-- Samples per frame name in a folded file: {name = count}.
local function folded(file)
  local n = {}
  for _, l in ipairs(lines(t.read(file))) do
    local stack, c = l:match("^(.*) (%d+)$")
    if stack then
      for fr in (stack .. ";"):gmatch("([^;]*);") do n[fr] = (n[fr] or 0) + tonumber(c) end
    end
  end
  return n
end

t.write(path("busy.lua"), [[
local function busy(n) local s = 0 for i = 1, n do s = s + i % 7 end return s end
local t0, r = os.clock(), 0
while os.clock() - t0 < 0.3 do r = r + busy(1e4) end
print("busy done")
]])

-- Phases, each a function of its own (named by its call site), run one
-- after the other: phase X runs until the test creates go_<next>, or
-- "stop" after the last, and is announced once it ran 300 times. The
-- driver stays interpreted, so that safe points come at once.
t.write(path("phases.lua"), [[
local d = debug.getinfo(1, "S").source:match("^@(.*)/phases%.lua$")
local list = {...}
local function exists(p) local f = io.open(p) if f then f:close() end return f ~= nil end
local function phaseA() local s = 0 for i = 1, 20000 do s = s + i % 7 end return s end
local function phaseB() local s = 0 for i = 1, 20000 do s = s + i % 11 end return s end
local function phaseW() local s = 0 for i = 1, 20000 do s = s + i % 3 end return s end
local function phaseC() local s = 0 for i = 1, 20000 do s = s + i % 13 end return s end
local function one(x)
  if x == "A" then phaseA() elseif x == "B" then phaseB()
  elseif x == "W" then phaseW() else phaseC() end
end
local function run(x, until_file)
  local n = 0
  repeat
    one(x)
    n = n + 1
    if n == 300 then io.stdout:write(x, "\n") io.stdout:flush() end
  until n > 300 and exists(d .. "/" .. until_file)
end
jit.off(run)
jit.off(one)
for i, x in ipairs(list) do run(x, list[i + 1] and "go_" .. list[i + 1] or "stop") end
print("done")
]])

-------------------------------------------------------------------------------

t.case("luajit -l ljprof.auto: the program unchanged, its profile written", function()
  clean()
  local plain = sh(LJ .. " busy.lua")
  local out = sh(t.CHILD_ENV .. "LJPROF=" .. q("rate=1000,clock=wall,output=" .. dir ..
    "/a-%p-%s-%n.folded,output=" .. dir .. "/a.txt") .. " " .. LJ .. " -l ljprof.auto busy.lua")
  t.eq(out, plain, "output")
  local files = ls("^a%-%d+%-1%-1%.folded$")
  t.eq(#files, 1, "one folded file a-<pid>-1-1.folded: " .. table.concat(ls("^a"), " "))
  if files[1] then t.ok((folded(path(files[1])).busy or 0) > 0, "samples in busy") end
  t.ok((t.read(path("a.txt")) or ""):find("busy", 1, true), "text report names busy")
  -- Unset: the defaults (99 Hz, ljprof-%p-%t.pb.gz in the working directory).
  clean()
  sh("rm -f ljprof-*.pb.gz")
  out = sh(t.CHILD_ENV .. LJ .. " -l ljprof.auto busy.lua")
  t.eq(out, plain, "output with the defaults")
  local pb = ls("^ljprof%-%d+%-%d+T%d+%.%d+Z%.pb%.gz$")
  t.eq(#pb, 1, "ljprof-<pid>-<time>.pb.gz: " .. table.concat(ls("^ljprof"), " "))
  if pb[1] then t.eq((t.read(path(pb[1])) or ""):sub(1, 2), "\31\139", "gzip") end
  sh("rm -f ljprof-*.pb.gz")
  out = sh(t.CHILD_ENV .. "LJPROF=off " .. LJ .. " -l ljprof.auto busy.lua")
  t.eq(out, plain, "LJPROF=off: output")
  t.eq(#ls("^ljprof"), 0, "LJPROF=off: no file")
end)

local VIEW = "-jp's view letters f F l s p v z r a A G <n> -<n> m<n> (depth up to 100000); " ..
             "-jprof's also take i<n>, the interval"
local BAD = {
  {"rate=fast", "bad rate 'fast' (accepted: 0.017 to 100000 samples per second)"},
  {"interval=0", "bad interval '0' (accepted: 0.01 to 60000 milliseconds)"},
  {"rate=1e9", "bad rate '1e9'"},
  {"clock=gpu", "bad clock 'gpu'"},
  {"output=x%q.folded", "placeholder '%q' unknown"},
  {"every=0", "bad every '0'"},
  {"every=5,output=x.folded", "has no %n or %t"},
  {"keep=3", "keep=3 without every="},
  {"maxbytes=10Q,every=1", "bad maxbytes '10Q'"},
  {"signal=TERM", "bad signal 'TERM'"},
  {"signal=RTMIN+99", "bad signal 'RTMIN+99'"},
  {"control=reboot", "bad control 'reboot'"},
  {"start=paused", "start=paused without control=toggle"},
  {"rate=10,interval=5", "both rate=10 and interval=5"},
  {"format=xml", "bad format 'xml'"},
  {"view=vfq", "'q'"},
  {"calls=on,every=1", "calls=on with every="},
  {"off,rate=5", "bad item 'off'"},
  {"frobnicate", "bad item 'frobnicate'"},
  {"foo=1", "unknown item 'foo=1'"},
  {"native=", "bad native ''"},
  -- each key's message in full (the front ends share them: test_options)
  {"clock=gpu", "ljprof: LJPROF: bad clock 'gpu' (accepted: cpu, wall, itimer, thread); not profiling"},
  {"format=xml", "ljprof: LJPROF: bad format 'xml' (accepted: text, folded, speedscope, pprof, svg, raw); not profiling"},
  {"native=maybe", "ljprof: LJPROF: bad native 'maybe' (accepted: on, off, show); not profiling"},
  {"zones=leaf", "ljprof: LJPROF: bad zones 'leaf' (accepted: root, off); not profiling"},
  {"calls=yes", "ljprof: LJPROF: bad calls 'yes' (accepted: on, off); not profiling"},
  {"aborts=yes", "ljprof: LJPROF: bad aborts 'yes' (accepted: on, off); not profiling"},
  {"private=yes", "ljprof: LJPROF: bad private 'yes' (accepted: on, off); not profiling"},
  {"inline=all", "ljprof: LJPROF: bad inline 'all' (accepted: recorded, snapshots, exact, off); not profiling"},
  {"view=vfq", "ljprof: LJPROF: bad view 'vfq' (letter 'q' unknown; accepted: " .. VIEW .. "); not profiling"},
  {"view=vi5", "ljprof: LJPROF: bad view 'vi5' (letter 'i': the interval is a key of its own here; accepted: " ..
               VIEW .. "); not profiling"},
  {"view=f999999", "ljprof: LJPROF: bad view 'f999999' (depth 999999 too deep; accepted: " .. VIEW ..
                   "); not profiling"},
  {"every=0", "ljprof: LJPROF: bad every '0' (accepted: 0.1 to 86400 seconds between exports); not profiling"},
  {"keep=0,every=1,output=k-%n.folded", "ljprof: LJPROF: bad keep '0' (accepted: 1 to 1000000 exports kept); not profiling"},
  {"maxbytes=1T,every=1", "ljprof: LJPROF: bad maxbytes '1T' (accepted: a size in bytes, with an optional k, M or G: 1048576, 500k, 100M, 2G); not profiling"},
  {"signal=TERM", "ljprof: LJPROF: bad signal 'TERM' (accepted: USR2 (the default), USR1, RTMIN+N (N from 0 to 30), a number from 1 to 64 not used for faults, children, exits, stops or sampling, or off); not profiling"},
  {"control=reboot", "ljprof: LJPROF: bad control 'reboot' (accepted: snapshot, toggle, off); not profiling"},
  {"start=later", "ljprof: LJPROF: bad start 'later' (accepted: running, paused); not profiling"},
  {"output=x%q.folded", "ljprof: LJPROF: bad output 'x%q.folded' (placeholder '%q' unknown; accepted: %p pid, %s state, %t time, %n sequence, %% a percent sign); not profiling"},
}

t.case("bad LJPROF values: one line naming the item, the program runs unprofiled", function()
  clean()
  local plain = sh(LJ .. " busy.lua 2>/dev/null")
  for _, c in ipairs(BAD) do
    local env = "LJPROF=" .. q(c[1] .. (c[1]:find("output=") and "" or ",output=" .. dir .. "/bad-%p.folded")) .. " "
    if c[1]:find("every=5,output") then env = "LJPROF=" .. q(c[1]) .. " " end
    local out = sh(t.CHILD_ENV .. env .. LJ .. " -l ljprof.auto busy.lua 2>err; echo status=$?")
    local err = lines(t.read(path("err")))
    t.eq(out, plain .. "status=0\n", c[1] .. ": output and status")
    t.eq(#err, 1, c[1] .. ": one line on stderr: " .. table.concat(err, " | "))
    t.ok(err[1] and err[1]:find("^ljprof: LJPROF: ") and err[1]:find("accepted", 1, true) and
         err[1]:find(c[2], 1, true) and err[1]:find("not profiling$"),
         c[1] .. ": the line names it and what is accepted: " .. tostring(err[1]))
    if c[2]:find("^ljprof: LJPROF: ") then t.eq(err[1], c[2], c[1] .. ": the whole line") end
  end
  t.eq(#ls("^bad"), 0, "no profile written")
  -- The same through LD_PRELOAD in a host with three states: said once.
  local o = sh(CLEAN .. " LJPROF='rate=fast' LD_PRELOAD=" .. q(LIB) .. " " .. q(HOST) ..
               " busy.lua 3 2>err; echo status=$?")
  t.eq(o, ("busy done\nhost: state 1: (no result)\nbusy done\nhost: state 2: (no result)\n" ..
           "busy done\nhost: state 3: (no result)\nstatus=0\n"), "host output")
  local err = lines(t.read(path("err")))
  t.eq(#err, 1, "host: one line for three states: " .. table.concat(err, " | "))
end)

t.case("LD_PRELOAD in a C host that knows nothing of ljprof", function()
  clean()
  t.ok(not sh("nm -D " .. q(HOST)):find("ljprof"), "the host names nothing of ljprof")
  t.ok(sh("ldd " .. q(HOST)):find("libluajit"), "the host links LuaJIT dynamically")
  t.write(path("state.lua"), [[
local function work(n) local s = 0 for i = 1, n do s = s + i % 7 end return s end
local t0, r = os.clock(), 0
while os.clock() - t0 < 0.3 do r = r + work(1e4) end
return "state " .. STATE .. " ok"
]])
  local plain = sh(CLEAN .. " " .. q(HOST) .. " state.lua 2 2>&1")
  t.eq(plain, "host: state 1: state 1 ok\nhost: state 2: state 2 ok\n", "unprofiled host")
  -- Without LJPROF: nothing changes, nothing is written.
  local o = sh(CLEAN .. " LD_PRELOAD=" .. q(LIB) .. " " .. q(HOST) .. " state.lua 2 2>&1")
  t.eq(o, plain, "LD_PRELOAD without LJPROF: same output, nothing on stderr")
  t.eq(sh(CLEAN .. " LD_PRELOAD=" .. q(LIB) .. " /bin/true; echo $?"), "0\n",
       "a program without LuaJIT runs with the library preloaded")
  -- Two states, one after the other: a file each (the second "-2").
  o = sh(CLEAN .. " LJPROF=" .. q("rate=1000,output=" .. dir .. "/h.folded") .. " LD_PRELOAD=" ..
         q(LIB) .. " " .. q(HOST) .. " state.lua 2 2>&1")
  t.eq(o, plain, "profiled host: same output")
  t.eq(table.concat(ls("^h"), " "), "h-2.folded h.folded", "a file per state")
  for _, f in ipairs(ls("^h")) do t.ok((folded(path(f)).work or 0) > 0, f .. ": samples in work") end
  -- Three states on three threads at once, named by %s.
  o = sh(CLEAN .. " LJPROF=" .. q("rate=1000,output=" .. dir .. "/th-%s.folded") .. " LD_PRELOAD=" ..
         q(LIB) .. " " .. q(HOST) .. " state.lua 3 threads 2>err")
  local got = lines(o)
  table.sort(got)
  t.eq(table.concat(got, "\n"), "host: state 1: state 1 ok\nhost: state 2: state 2 ok\nhost: state 3: state 3 ok",
       "threads: output")
  t.eq(table.concat(ls("^th"), " "), "th-1.folded th-2.folded th-3.folded", "threads: a file per state")
  for _, f in ipairs(ls("^th")) do t.ok((folded(path(f)).work or 0) > 0, f .. ": samples in work") end
  -- stderr: at most the one note that only one state is written on SIGTERM
  local err = lines(t.read(path("err")))
  t.ok(#err <= 1 and (not err[1] or err[1]:find("SIGTERM", 1, true)), "threads: stderr: " .. table.concat(err, " | "))
  -- States starting at once race for the process's exit-signal trap:
  -- two that both found it free made two helpers, and the host hung at
  -- close in about 1 run of 15. Twenty short runs of four threads, each
  -- bounded (a hang is status 137).
  t.write(path("quick.lua"), "local s = 0 for i = 1, 3e6 do s = s + i % 7 end return 'ok'\n")
  local hung = {}
  for k = 1, 20 do
    local rc = sh(CLEAN .. " LJPROF=" .. q("rate=1000,output=" .. dir .. "/q-%s.folded") .. " LD_PRELOAD=" ..
                  q(LIB) .. " timeout -s KILL 30 " .. q(HOST) .. " quick.lua 4 threads >/dev/null 2>&1; echo $?")
    if rc ~= "0\n" then hung[#hung + 1] = k .. ": " .. rc:gsub("\n", "") end
  end
  t.eq(table.concat(hung, ", "), "", "20 runs of 4 threaded states: every one ends, status 0")
end)

t.case("LD_PRELOAD in a host that dlopens LuaJIT after start (nginx's load_module)", function()
  -- ljprof is loaded before LuaJIT: its code is found at run time (a
  -- link-time address stayed 0: "auto.lua:290: ljprof: out of memory").
  clean()
  local host = os.getenv("LJPROF_DLOPEN_HOST") or (t.BUILD .. "/tests/dlopen_host")
  local mod = os.getenv("LJPROF_DLOPEN_MODULE") or (t.BUILD .. "/tests/ljp_dlopen_module.so")
  local lib = sh("ldd " .. q(mod)):match("=> (/%S*libluajit%S*)")
  t.ok(not sh("ldd " .. q(host)):find("luajit"), "the host does not link LuaJIT")
  t.ok(lib, "the module links libluajit: " .. tostring(lib))
  local chunk = "local function busy(n) local s = 0 for i = 1, n do s = s + i % 7 end return s end " ..
    "local t0, r = os.clock(), 0 while os.clock() - t0 < 0.2 do r = r + busy(1e4) end return 'chunk ok'"
  local function run(mode, what, env)
    return sh(CLEAN .. (env or "") .. " " .. q(host) .. " " .. mode .. " " .. q(what or "?") .. " " ..
              q(chunk) .. " 2>err; echo status=$?")
  end
  local plain = "dlopen host: chunk ok\nstatus=0\n"
  local cases = {{"module-global", mod}, {"lib-global", lib}, {"module-local", mod}, {"lib-local", lib}}
  for _, c in ipairs(cases) do
    t.eq(run(c[1], c[2]), plain, c[1] .. ": unprofiled")
    t.eq(run(c[1], c[2], " LD_PRELOAD=" .. q(LIB)), plain, c[1] .. ": LD_PRELOAD without LJPROF")
    t.eq(t.read(path("err")), "", c[1] .. ": LD_PRELOAD without LJPROF: nothing on stderr")
    local env = " LJPROF=" .. q("rate=1000,output=" .. dir .. "/" .. c[1] .. ".folded") .. " LD_PRELOAD=" .. q(LIB)
    t.eq(run(c[1], c[2], env), plain, c[1] .. ": profiled: same output and status")
    local err = t.read(path("err"))
    if c[1]:find("global") then
      -- nginx's way (RTLD_NOW | RTLD_GLOBAL), and the API from the process
      t.eq(err, "", c[1] .. ": nothing on stderr")
      t.ok((folded(path(c[1] .. ".folded")).busy or 0) > 0, c[1] .. ": samples in busy")
    elseif c[1] == "module-local" then
      -- LuaJIT out of reach of ljprof's calls: one line, not a crash
      t.ok(#lines(err) == 1 and err:find("^ljprof: LD_PRELOAD: LuaJIT %(") and
           err:find("RTLD_LOCAL", 1, true) and err:find("not profiling\n$"), c[1] .. ": one line: " .. err)
      t.ok(not exists(path(c[1] .. ".folded")), c[1] .. ": no profile")
    else
      -- dlsym(handle, "luaL_openlibs") is LuaJIT's own: not interposed
      t.eq(err, "", c[1] .. ": nothing on stderr")
      t.ok(not exists(path(c[1] .. ".folded")), c[1] .. ": no profile")
    end
  end
end)

t.case("LD_PRELOAD in the luajit executable (LuaJIT linked in: LUA_INIT)", function()
  clean()
  local plain = sh(CLEAN .. " " .. LJ .. " busy.lua 2>&1")
  local o = sh(CLEAN .. " LD_PRELOAD=" .. q(LIB) .. " " .. LJ .. " busy.lua 2>&1")
  t.eq(o, plain, "without LJPROF: unchanged")
  t.eq(#ls("%.folded$"), 0, "without LJPROF: no file")
  o = sh(CLEAN .. " LJPROF=" .. q("rate=1000,output=" .. dir .. "/lj-%p.folded") .. " LD_PRELOAD=" .. q(LIB) ..
         " " .. LJ .. " busy.lua 2>&1")
  t.eq(o, plain, "profiled: unchanged output")
  local f = ls("^lj%-%d+%.folded$")
  t.eq(#f, 1, "one file")
  if f[1] then t.ok((folded(path(f[1])).busy or 0) > 0, "samples in busy") end
  -- The program's LUA_INIT still runs, and the program sees it as it was.
  t.write(path("init.lua"), 'io.write("init ran; ")\n')
  t.write(path("env.lua"), 'print(os.getenv("LUA_INIT"))\n')
  for _, init in ipairs({"io.write('init ran; ')", "@" .. path("init.lua")}) do
    plain = sh(CLEAN .. " LUA_INIT=" .. q(init) .. " " .. LJ .. " env.lua 2>&1")
    o = sh(CLEAN .. " LUA_INIT=" .. q(init) .. " LJPROF=" .. q("output=" .. dir .. "/li.folded") ..
           " LD_PRELOAD=" .. q(LIB) .. " " .. LJ .. " env.lua 2>&1")
    t.eq(o, plain, "LUA_INIT " .. init)
    t.ok(plain:find("^init ran; "), "LUA_INIT ran: " .. plain)
    t.ok(exists(path("li.folded")), "LUA_INIT " .. init .. ": profiled")
    sh("rm -f li.folded")
  end
  -- With -l ljprof.auto as well: one run, not two.
  o = sh(CLEAN .. " LJPROF=" .. q("rate=1000,output=" .. dir .. "/both-%s.folded") .. " LD_PRELOAD=" ..
         q(LIB) .. " " .. LJ .. " -l ljprof.auto busy.lua 2>&1")
  t.eq(o, "busy done\n", "-l ljprof.auto under LD_PRELOAD")
  t.eq(table.concat(ls("^both"), " "), "both-1.folded", "one state, one file")
end)


-- stderr lines but the note that only the first state of a host is
-- written on SIGTERM (the exit helper serves one state).
local function ctl_lines(s)
  local l = {}
  for _, x in ipairs(lines(s)) do
    if not x:find("^jit%.prof: no profile on SIGTERM/SIGHUP") then l[#l + 1] = x end
  end
  return l
end

-- toggle(what) for process h: sends the control signal, waits for the
-- next line of pick(stderr) and checks it says "sampling <what><tail>";
-- count() is the toggles sent so far.
local function toggler(h, pick, tail)
  local n = 0
  local function toggle(what)
    n = n + 1
    h.kill("USR2")
    wait_for(function() return #pick(h.err()) >= n end, what)
    local l = pick(h.err())[n] or ""
    t.ok(l:find("^ljprof: SIGUSR2: sampling " .. what .. (tail or "")), "line " .. n .. ": " .. l)
  end
  return toggle, function() return n end
end

t.case("control signal: a snapshot of every state, one of them blocked", function()
  clean()
  sh("mkfifo fifo")
  t.write(path("ctl.lua"), [[
local d = debug.getinfo(1, "S").source:match("^@(.*)/ctl%.lua$")
local function exists(p) local f = io.open(p) if f then f:close() end return f ~= nil end
local function spin() local s = 0 for i = 1, 20000 do s = s + i % 7 end return s end
local function blocked() local f = io.open(d .. "/fifo") local l = f:read("*l") f:close() return l end
local function loop()
  local n = 0
  repeat
    spin()
    n = n + 1
    if n == 300 then io.stdout:write("state ", STATE, " ready\n") io.stdout:flush() end
  until n > 300 and exists(d .. "/stop")
end
jit.off(loop)
loop()
if STATE == 2 then blocked() end
return "state " .. STATE .. " done"
]])
  local h = spawn(string.format("%s LJPROF=%s LD_PRELOAD=%s %s %s 2 threads", CLEAN,
    q("rate=1000,clock=wall,output=" .. dir .. "/s-%s.folded"), q(LIB), q(HOST), q(path("ctl.lua"))), "c")
  wait_for(function() local o = h.out() return o:find("state 1 ready") and o:find("state 2 ready") end,
           "both states ready")
  h.kill("USR2")
  wait_for(function() return h.err():find("snapshot written") end, "the snapshot")
  local err = ctl_lines(h.err())
  t.eq(#err, 1, "one line: " .. table.concat(err, " | "))
  t.ok(err[1]:find("^ljprof: SIGUSR2: snapshot written: ") and err[1]:find(path("s-1.folded"), 1, true) and
       err[1]:find(path("s-2.folded"), 1, true), "the line names both files: " .. err[1])
  local snap = {}
  for k = 1, 2 do
    snap[k] = folded(path("s-" .. k .. ".folded")).spin or 0
    t.ok(snap[k] > 0, "state " .. k .. ": samples in spin")
  end
  -- State 1 ends (its final profile written at lua_close); state 2 then
  -- waits in open() of a FIFO, without running Lua: its snapshot comes
  -- all the same.
  t.write(path("stop"), "")
  wait_for(function() return h.out():find("host: state 1: state 1 done") end, "state 1 done")
  h.kill("USR2")
  wait_for(function() return #ctl_lines(h.err()) >= 2 end, "the second snapshot")
  err = ctl_lines(h.err())
  -- (%s counts the states as they were made: the threads' order)
  t.ok(err[2] and err[2]:find("^ljprof: SIGUSR2: snapshot written: " .. path("s-"):gsub("%p", "%%%0") ..
                              "[12]%.folded$"),
       "second snapshot: the blocked state only: " .. tostring(err[2]))
  sh("echo go > fifo")
  t.eq(h.wait(), 0, "host status")
  local out = lines(h.out())
  table.sort(out)
  t.eq(table.concat(out, "\n"), "host: state 1: state 1 done\nhost: state 2: state 2 done\n" ..
       "state 1 ready\nstate 2 ready", "host output")
  for k = 1, 2 do  -- the file at the end holds the whole run (snapshots are cumulative)
    t.ok((folded(path("s-" .. k .. ".folded")).spin or 0) >= snap[k], "state " .. k .. ": final >= snapshot")
  end
  err = ctl_lines(h.err())
  t.eq(#err, 2, "stderr: the two snapshot lines: " .. table.concat(err, " | "))
end)

t.case("control=toggle: a phase run while paused has no sample", function()
  for _, paused in ipairs({false, true}) do
    clean()
    local h = spawn(string.format("env %sLJPROF=%s %s -l ljprof.auto %s A B W C", t.CHILD_ENV,
      q("rate=1000,clock=wall,control=toggle,output=" .. dir .. "/tg.folded" .. (paused and ",start=paused" or "")),
      LJ, q(path("phases.lua"))), "t")
    local toggle, toggles = toggler(h, lines)
    wait_for(function() return h.out():find("A") end, "phase A")
    if not paused then toggle("paused") end
    t.write(path("go_B"), "")
    wait_for(function() return h.out():find("B") end, "phase B")
    t.write(path("go_W"), "")
    wait_for(function() return h.out():find("W") end, "phase W")
    toggle("resumed")
    t.write(path("go_C"), "")
    wait_for(function() return h.out():find("C") end, "phase C")
    t.write(path("stop"), "")
    t.eq(h.wait(), 0, "status")
    t.eq(h.out(), "A\nB\nW\nC\ndone\n", "the program's output")
    local f = folded(path("tg.folded"))
    local label = paused and "start=paused: " or ""
    if paused then
      t.eq(f.phaseA, nil, label .. "no sample of phase A (paused from the start)")
    else
      t.ok((f.phaseA or 0) > 0, label .. "samples of phase A")
    end
    t.eq(f.phaseB, nil, label .. "no sample of phase B (paused)")
    t.ok((f.phaseC or 0) > 0, label .. "samples of phase C (resumed)")
    t.eq(#lines(h.err()), toggles(), label .. "stderr: the toggle lines only")
  end
end)

-- States made after a toggle take the process's toggle state, not their
-- own start=: in a host that makes its states one after another, state 2
-- starts after state 1 was resumed, samples, and the next toggle pauses
-- it (out of step before: it started paused and that toggle "paused" a
-- paused state).
t.case("control=toggle: a state made after a resume samples, the next toggle pauses it", function()
  clean()
  t.write(path("tg2.lua"), [[
local d = debug.getinfo(1, "S").source:match("^@(.*)/tg2%.lua$")
local function exists(p) local f = io.open(p) if f then f:close() end return f ~= nil end
local function work() local s = 0 for i = 1, 20000 do s = s + i % 7 end return s end
local function idle() local s = 0 for i = 1, 20000 do s = s + i % 11 end return s end
local function phase(f, what, until_file)
  local n = 0
  repeat
    if f == work then work() else idle() end  -- (named by the call site)
    n = n + 1
    if n == 300 then io.stdout:write(what, "\n") io.stdout:flush() end
  until n > 300 and exists(d .. "/" .. until_file)
end
jit.off(phase)
if STATE == 1 then
  phase(work, "state 1 ready", "stop1")
else
  phase(work, "state 2 ready", "go_2")
  phase(idle, "state 2 idle", "stop2")
end
return "state " .. STATE .. " done"
]])
  local h = spawn(string.format("%s LJPROF=%s LD_PRELOAD=%s %s %s 2", CLEAN,
    q("rate=1000,clock=wall,control=toggle,start=paused,output=" .. dir .. "/tb-%s.folded"), q(LIB), q(HOST),
    q(path("tg2.lua"))), "b")
  local toggle = toggler(h, ctl_lines, " %(1 Lua state;")
  wait_for(function() return h.out():find("state 1 ready") end, "state 1 ready")
  toggle("resumed")
  t.write(path("stop1"), "")
  wait_for(function() return h.out():find("state 2 ready") end, "state 2 ready")
  toggle("paused")
  t.write(path("go_2"), "")
  wait_for(function() return h.out():find("state 2 idle") end, "state 2 idle")
  t.write(path("stop2"), "")
  t.eq(h.wait(), 0, "host status")
  local f = folded(path("tb-2.folded"))
  t.ok((f.work or 0) > 0, "state 2 sampled from its start (resumed before it was made): " ..
       tostring(f.work))
  t.eq(f.idle, nil, "state 2: no sample after the next toggle (paused)")
  t.eq(#ctl_lines(h.err()), 2, "stderr: the two toggle lines: " .. table.concat(ctl_lines(h.err()), " | "))
end)

-- A program spinning in a compiled loop reaches no safe point: its
-- samples wait in the ring. Snapshots and periodic exports count them all
-- the same, completed as the exit helper does (the trace's start function,
-- native frames): the loop calls access() through the FFI (compiled, no
-- exit to the interpreter) until the test creates "stop".
t.write(path("fspin.lua"), [[
local d = debug.getinfo(1, "S").source:match("^@(.*)/fspin%.lua$")
local ffi = require("ffi")
ffi.cdef("int access(const char *path, int mode);")
local C, stop = ffi.C, d .. "/stop"
local function spinner() local n = 0 while C.access(stop, 0) ~= 0 do n = n + 1 end return n end
io.stdout:write("spinning\n") io.stdout:flush()
spinner()
print("done")
]])

-- The spinning function's samples: spinner runs only in its compiled loop
-- from its first call on, and no safe point may ever see it: then it is
-- named by its chunk and first line (docs/design.md, "Trace events").
local function spinning(n) return (n.spinner or 0) + (n["fspin.lua:5"] or 0) end

t.case("a compiled loop with no safe point: snapshots and periodic files hold its samples", function()
  -- A snapshot (a copy): the pending samples, read, not taken.
  clean()
  local h = spawn(string.format("env %sLJPROF=%s %s -l ljprof.auto %s", t.CHILD_ENV,
    q("rate=1000,clock=wall,output=" .. dir .. "/fs.folded"), LJ, q(path("fspin.lua"))), "f")
  wait_for(function() return h.out():find("spinning") end, "spinning")
  os.execute("sleep 0.3")  -- (samples to wait; no assertion on their number)
  h.kill("USR2")
  wait_for(function() return h.err():find("snapshot") end, "the snapshot")
  t.ok(h.err():find("^ljprof: SIGUSR2: snapshot written: "), "snapshot line: " .. h.err())
  local snap = spinning(folded(path("fs.folded")))
  t.ok(snap > 0, "the snapshot holds samples of the spinning function: " .. snap)
  t.write(path("stop"), "")
  t.eq(h.wait(), 0, "status")
  t.eq(h.out(), "spinning\ndone\n", "the program's output")
  t.ok(spinning(folded(path("fs.folded"))) >= snap, "final >= snapshot (counted once)")
  -- every=: the files of the intervals written while it spins hold them
  -- (those that waited an interval; the rest come with the next).
  clean()
  h = spawn(string.format("env %sLJPROF=%s %s -l ljprof.auto %s", t.CHILD_ENV,
    q("rate=1000,clock=wall,every=0.2,output=" .. dir .. "/fe-%n.folded"), LJ, q(path("fspin.lua"))), "g")
  wait_for(function() return h.out():find("spinning") end, "spinning")
  local got
  wait_for(function()
    for _, name in ipairs(ls("^fe%-%d+%.folded$")) do
      if spinning(folded(path(name))) > 0 then got = name return true end
    end
  end, "an interval file with samples of the spinning function, while it spins")
  t.ok(got and not h.out():find("done"), "written while spinning: " .. tostring(got))
  t.write(path("stop"), "")
  t.eq(h.wait(), 0, "status")
  t.eq(h.err(), "", "stderr: nothing")
end)

t.case("control signal handled by the program: one line, profiling goes on", function()
  clean()
  local out = sh(t.CHILD_ENV .. "LJPROF=" .. q("rate=1000,output=" .. dir .. "/own.folded") .. " " .. LJ ..
    [[ -e "local ffi = require('ffi') ffi.cdef('typedef void (*sh)(int); sh signal(int, sh); void _exit(int);')]] ..
    [[ ffi.C.signal(12, ffi.C._exit)" -l ljprof.auto busy.lua 2>err]])
  t.eq(out, "busy done\n", "output")
  local err = lines(t.read(path("err")))
  t.eq(#err, 1, "one line: " .. table.concat(err, " | "))
  t.ok(err[1] and err[1]:find("^ljprof: LJPROF: the program already handles SIGUSR2: control by signal is off") and
       err[1]:find("accepted", 1, true), tostring(err[1]))
  t.ok((folded(path("own.folded")).busy or 0) > 0, "profiled all the same")
end)

-- Steps: step k makes 100 fresh functions with long chunk names of its
-- own, and runs them until the export file of interval k (or a later
-- one) exists; ljprof's memory (stats().bytes) is noted at each step.
t.write(path("steps.lua"), [[
local d = debug.getinfo(1, "S").source:match("^@(.*)/steps%.lua$")
local prefix, steps = ...
steps = tonumber(steps)
local function exists(p) local f = io.open(p) if f then f:close() end return f ~= nil end
local function seen(k)
  for j = k, k + 3 do if exists(d .. "/" .. prefix .. j .. ".folded") then return true end end
end
local lj = require("ljprof")
local bytes, long = {}, string.rep("x", 300)
local function step(k)
  local fs = {}
  for j = 1, 100 do
    fs[j] = loadstring("local s = 0 for i = 1, 3000 do s = s + i % 7 end return s",
                       "=" .. long .. "_" .. k .. "_" .. j)
  end
  repeat for j = 1, 100 do fs[j]() end until seen(k)
end
jit.off(step)
for k = 1, steps do
  bytes[k] = lj.stats().bytes
  step(k)
  if k == 3 then io.stdout:write("step 3\n") io.stdout:flush() end
end
local f = io.open(d .. "/bytes.txt", "w")
f:write(table.concat(bytes, " "), "\n")
f:close()
print("steps done")
]])

t.case("periodic export: a file per interval, rotation by count, memory flat", function()
  clean()
  local N = 30
  local h = spawn(string.format("env %sLJPROF=%s %s -l ljprof.auto %s e- %d", t.CHILD_ENV,
    q("rate=1000,clock=wall,every=0.2,keep=3,output=" .. dir .. "/e-%n.folded"), LJ, q(path("steps.lua")), N), "p")
  -- A snapshot while it runs: an export now.
  wait_for(function() return h.out():find("step 3") end, "step 3")
  h.kill("USR2")
  t.eq(h.wait(), 0, "status")
  t.eq(h.out(), "step 3\nsteps done\n", "the program's output")
  local err = lines(h.err())
  t.eq(#err, 1, "stderr: the snapshot line: " .. table.concat(err, " | "))
  t.ok(err[1] and err[1]:find("^ljprof: SIGUSR2: snapshot written: " .. path("e-"):gsub("%p", "%%%0") .. "%d+%.folded$"),
       "the snapshot is an export: " .. tostring(err[1]))
  -- keep=3: the three newest intervals, the last one written at exit.
  local files, nums = ls("^e%-%d+%.folded$"), {}
  for _, f in ipairs(files) do nums[#nums + 1] = tonumber(f:match("%d+")) end
  table.sort(nums)
  t.eq(#nums, 3, "three files kept: " .. table.concat(files, " "))
  t.ok(nums[3] and nums[3] >= N and nums[2] == nums[3] - 1 and nums[1] == nums[3] - 2,
       "the newest, consecutive: " .. table.concat(nums, " "))
  -- Each file holds its interval only: the steps its chunks name are the
  -- few around its number, never the first ones.
  for _, n in ipairs(nums) do
    local lo, hi = math.huge, 0
    for fr in pairs(folded(path("e-" .. n .. ".folded"))) do
      local k = tonumber(fr:match("^x+_(%d+)_%d+"))
      if k then lo, hi = math.min(lo, k), math.max(hi, k) end
    end
    -- (the newest is the one written at exit: the run's tail after the
    -- last export, which may hold no step at all on a loaded machine)
    t.ok((hi > 0 or n == nums[3]) and (hi == 0 or lo >= N - 4), "e-" .. n .. ".folded: steps " .. lo .. " to " .. hi)
  end
  -- ljprof's memory: the store is taken at each export, so 3,000 fresh
  -- functions with 300-byte names leave it where it was after the first
  -- steps (kept, they would add about 1 MB of names alone).
  local b = {}
  for x in (t.read(path("bytes.txt")) or ""):gmatch("%d+") do b[#b + 1] = tonumber(x) end
  t.eq(#b, N, "bytes noted at each step")
  local early, late = 0, 0
  for k = 2, 6 do early = math.max(early, b[k] or 0) end
  for k = N - 5, N do late = math.max(late, b[k] or 0) end
  print(string.format("  ljprof's memory (stats().bytes): step 2-6 max %d, step %d-%d max %d", early, N - 5, N, late))
  t.ok(late <= early + 256 * 1024, "memory flat: " .. early .. " -> " .. late)
end)

-- A program that labels its two kinds of work (ljprof.label), until the
-- test creates "stop".
t.write(path("labelled.lua"), [[
local d = debug.getinfo(1, "S").source:match("^@(.*)/labelled%.lua$")
local label = require("ljprof").label
local function exists(p) local f = io.open(p) if f then f:close() end return f ~= nil end
local function work(n) local s = 0 for i = 1, n do s = s + i % 7 end return s end
local n = 0
repeat
  label({endpoint = "/a"}, work, 20000)
  label({endpoint = "/b"}, work, 20000)
  n = n + 1
  if n == 300 then io.stdout:write("ready\n") io.stdout:flush() end
until n > 300 and exists(d .. "/stop")
print("done")
]])

local go = (sh("command -v go"):match("^(/%S+)"))
-- go tool pprof's output for one file (HOME and its cache in dir).
local function pprof(args, file)
  return sh(string.format("HOME=%s PPROF_TMPDIR=%s GOTOOLCHAIN=local GOFLAGS= %s tool pprof " ..
                          "-symbolize=none %s %s", q(dir), q(dir), go, args, q(file)))
end

t.case("periodic files and snapshots keep labels, thread, state and their own time span", function()
  if not go then
    t.ok(false, "`go` is not installed: go tool pprof is the oracle here (apt-get install -y golang-go)")
    return
  end
  for _, every in ipairs({true, false}) do
    clean()
    local h = spawn(string.format("env %sLJPROF=%s %s -l ljprof.auto %s", t.CHILD_ENV,
      q("rate=1000,clock=wall,output=" .. dir .. "/l-%n.pb.gz" .. (every and ",every=0.3,keep=4" or "")),
      LJ, q(path("labelled.lua"))), "l")
    wait_for(function() return h.out():find("ready") end, "ready")
    if every then wait_for(function() return exists(path("l-5.pb.gz")) end, "five periodic files") end
    h.kill("USR2")
    wait_for(function() return h.err():find("snapshot written") end, "the snapshot")
    t.write(path("stop"), "")
    t.eq(h.wait(), 0, "status")
    t.eq(h.out(), "ready\ndone\n", "the program's output")
    local files = ls("^l%-%d+%.pb%.gz$")
    t.ok(#files >= (every and 3 or 1), (every and "periodic" or "snapshot") .. ": files " .. table.concat(files, " "))
    local all = {}
    for _, f in ipairs(files) do
      local tags = pprof("-tags", path(f))
      all[#all + 1] = tags
      for _, want in ipairs({"endpoint:", "thread:", "luajit", "state:", "vmstate:"}) do
        t.ok(tags:find(want, 1, true) ~= nil, f .. ": -tags shows " .. want .. "\n" .. tags)
      end
      local top = pprof("-top", path(f))   -- "Duration: 299.31ms, Total samples = ..."
      local num, unit = top:match("Duration: ([%d%.]+)(m?s),")
      local ms = (tonumber(num) or 0) * (unit == "s" and 1000 or 1)
      t.ok(ms > 0, f .. ": a duration: " .. (top:match("Duration: [^\n]*") or "none"))
      -- Every file after the first holds an interval of its own (0.3 s;
      -- the last one written at exit too), the whole run lasted >= 1.5 s.
      if every and tonumber(f:match("%d+")) >= 2 then
        t.ok(ms < 1200, f .. ": the interval's span, not the run's: " .. ms .. " ms")
      end
    end
    -- (an interval may be short: the last one has a few samples of one kind)
    all = table.concat(all, "\n")
    t.ok(all:find(": /a\n") and all:find(": /b\n"), "both endpoints are in the files:\n" .. all)
  end
end)

t.case("periodic export: rotation by size", function()
  clean()
  local out = sh(string.format("%sLJPROF=%s %s -l ljprof.auto %s m- 5 2>err", t.CHILD_ENV,
    q("rate=1000,clock=wall,every=0.2,maxbytes=1,output=" .. dir .. "/m-%n.folded"), LJ, q(path("steps.lua"))))
  t.eq(out, "step 3\nsteps done\n", "output")
  t.eq(t.read(path("err")), "", "stderr")
  local files = ls("^m%-%d+%.folded$")
  t.eq(#files, 1, "maxbytes=1: the newest interval only: " .. table.concat(files, " "))
  t.ok(files[1] and tonumber(files[1]:match("%d+")) >= 5, "it is the last: " .. tostring(files[1]))
end)

sh("rm -rf " .. q(dir))
t.done()
