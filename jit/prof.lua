----------------------------------------------------------------------------
-- ljprof high-level profiler, the -jp of ljprof:
--
--   luajit -jprof[=letters[/key=value...][,output...]] app.lua
--
-- Examples:
--   luajit -jprof app.lua                          top functions
--   luajit -jprof=vf,out.txt app.lua               by VM state, to a file
--   luajit -jprof=G,app.folded app.lua             -jp's folded stacks
--   luajit -jprof=vf/clock=wall/format=svg,out.svg app.lua
--   luajit -jprof=l,report.txt,app.svg,app.pb.gz app.lua   three outputs
--
-- Letters: exactly those of LuaJIT's -jp, with the same defaults, the same
-- interplay and the same text layout (see jit/prof/text.lua):
--   f  functions: name, else chunk:line (default)
--   F  functions with the chunk prefixed (chunk:name)
--   l  lines: chunk:line
--   <n>   stack depth n, callee < caller (default 1; n up to 100000)
--   -<n>  stack depth n, caller > callee
--   s  split after the first stack level (depth at least 2)
--   p  full chunk paths
--   v  split by VM state (vf: state first; fv: state second)
--   z  split by zone ("(none)" for samples without one)
--   r  raw sample counts instead of percentages
--   a  annotate source excerpts (3 lines of context), A whole files
--   G  folded stacks "a;b;c count" (the -jp G text)
--   m<n>  minimum percentage shown (default 3)
--   i<n>  sampling interval in ms (default 10)
-- Unknown letters are an error (-jp ignores them).
--
-- Then, ljprof's own options, any number of /key=value items:
--   /clock=cpu|wall|itimer|thread   the timer (default cpu: thread CPU time)
--   /format=text|folded|speedscope|pprof|svg|raw
--   /duration=<seconds>   sample only the first N seconds
--   /rate=<Hz>            samples per second (instead of i<n>)
--   /native=on|off|show   native (C) frames above the Lua frame that called
--                         them (default on): on records them for the stack
--                         formats (folded, speedscope, pprof, svg, raw and
--                         the G letter) while the other text views show Lua
--                         frames only (the Lua function, not
--                         "libm.so.6+0x702c0", tops the report); show keeps
--                         them in the text views too; off records none
--   /zones=root           zones as the outermost frame ("[zone AI]") in the
--                         folded, speedscope, pprof and svg outputs
--   /calls=on|off         count every call of every function exactly (a call
--                         hook; the JIT is off while counting, then put
--                         back) and report calls, sampled self and total
--                         time and time per call, per function and per
--                         source line (jit/prof/calls.lua)
--   /aborts=on|off        also record why LuaJIT aborted traces, for the
--                         text report's "Hot but interpreted" section (a
--                         handler on every trace event: luacheck compiles
--                         and aborts ~230,000 traces a run; off by default,
--                         when nothing is paid per trace event)
--   /inline=snapshots|exact|off   frames LuaJIT inlined into a trace:
--                         snapshots (default) from the trace's snapshots,
--                         compiled code unchanged; exact: LuaJIT's
--                         profiling mode (as -jp's), a snapshot at every
--                         function change, exact per function but the
--                         compiled code changes; off: the trace's frame
--   /private=on|off       output files 0600 (owner only) instead of 0644;
--                         either way the umask does not change the mode
--
-- Outputs: every word after the options is one output file ("-" is
-- stdout); none: $LUAJIT_PROFILEFILE, else stdout. With one output, its
-- format is /format= if given; otherwise each output's format comes from
-- its name (.speedscope.json, .pb.gz, .svg, .folded, .ljprof, else text),
-- and /format= applies to the names without a known ending (not .txt).
-- The text format is the -jp report followed by ljprof's "Hot but
-- interpreted" section (not with r, G or annotation); with /calls=on it
-- is followed by the calls report instead (and a/A choose the calls
-- listing's excerpts or whole files in place of -jp's annotation);
-- folded uses the f/F/l/p letters for its frame labels; the other
-- formats come from the module jit.prof.<format>. Files are written
-- atomically (a temporary file renamed). Reading the letters and choosing
-- formats is jit/prof/options.lua's job, rendering and writing outputs
-- jit/prof/output.lua's, both shared with the ljprof command; this file
-- splits its /key=value options (each value checked by options.value,
-- the same check and line as the command's and LJPROF's for that key),
-- records and hands the profile over. A
-- run's start loads only the library and options.lua; the rest is loaded
-- when the profile is written.
-- Unwritable outputs, unavailable formats and bad options are reported in
-- one line before profiling starts.
--
-- The profile is written by stop(), at normal exit (lua_close), on
-- os.exit(), after an uncaught error (the exit status stays that of the
-- error), on Ctrl-C (luajit turns SIGINT into an "interrupted!" error; where
-- the interpreter does not raise it within 100 ms, as in a compiled loop,
-- the library ends the program as on SIGTERM: src/exit_signals.c) and,
-- when the ljprof library can trap signals (ljprof.on_signal), on SIGTERM,
-- SIGHUP (and SIGINT where luajit does not handle it): the library's
-- helper thread calls write_after_signal below in a Lua state of its own,
-- at once, even while the program is blocked or in compiled code, then
-- re-raises the signal's default action, so the exit status is unchanged.
----------------------------------------------------------------------------

-- ljprof's own Lua code in the program's state (loading these modules,
-- parsing the options, checking the outputs) runs with the JIT engine off,
-- put back as it was right after. The interpreter then counts none of it
-- on LuaJIT's hot counters, which all code shares (64 counters indexed by
-- bytecode address), and compiles none of it: the program starts with
-- the counters as it would have found them unprofiled, and its first
-- traces are not picked by where ljprof's start left them. (That is one
-- way a profiler moves the program's traces, not the only one: any
-- allocation before the program moves its bytecode; docs/performance.md,
-- *JIT perturbation*, and docs/instructions.md.)
local function jit_pause()
  local on = jit and jit.status and jit.status()
  if on then jit.off() end
  return on
end

local function jit_resume(on)
  if on then jit.on() end
end

-- A run's start loads the library and the option reader only: every
-- byte allocated before the program is loaded moves the program's
-- bytecode (about 90 KB for the model, views and writers, enough to give
-- richards another set of traces). The model and the writers are loaded
-- when the run is written (writers() below).
local ljprof, options
do
  local was = jit_pause()
  local ok, err = pcall(function()
    ljprof = require("ljprof")
    options = require("jit.prof.options")
  end)
  jit_resume(was)
  if not ok then error(err, 0) end
end

-- The output path (jit.prof.output, with the model and the views it
-- loads), loaded the first time a run is written, with the JIT off (a run
-- stopped early leaves the program's traces alone). write_outputs() loads
-- it, and the writer of each format, with package.path and cpath as they
-- were when the run started (the program may have changed them since).
local output
local start_paths
local function writers()
  if output then return end
  local was = jit_pause()
  local ok, err = pcall(function()
    output = require("jit.prof.output")
  end)
  jit_resume(was)
  if not ok then error(err, 0) end
end

local M = {}
local run        -- options of the active run, or nil
local exit_proxy -- __gc proxy of the active run: stops it at lua_close

local KEYS = options.keys_of("jprof")  -- the /key= items, from the one key table

local function fail(msg) error("jit.prof: " .. msg, 0) end

-- An output's file name when it is written: a run started from LJPROF
-- (jit/prof/auto.lua) names its outputs by templates (%p %s %t %n), which
-- the library fills for the state and the interval the file holds; any
-- other run's names are kept as given.
-- The program's name where no script set arg[0] (a C host under
-- LD_PRELOAD): the thread's command name, as the periodic files have it.
local function program_comm()
  local f = io.open("/proc/self/comm")
  local name = f and f:read("*l")
  if f then f:close() end
  return name or "?"
end

local function file_name(path)
  return ljprof.output_name and ljprof.output_name(path) or path
end

-- "/key=value/..." -> {clock=, format=, duration=, rate=, ...}: each key
-- one of the table's with a /key= spelling, its value checked by
-- options.value (the message every front end gives for that key).
local function parse_keys(s)
  local kv = {}
  for item in s:gmatch("/([^/]*)") do
    if item ~= "" then
      local k, val = item:match("^([%w_]+)=(.*)$")
      if not k then
        fail("bad option '/" .. item .. "' (accepted after the letters: " .. KEYS .. ")")
      end
      local key = options.KEYS[k]
      if not key or key.jprof ~= "/" .. k .. "=" then
        fail("unknown option '/" .. item .. "' (accepted after the letters: " .. KEYS .. ")")
      end
      local v, err = options.value(k, val)
      if v == nil then fail(err) end
      kv[k] = v
    end
  end
  return kv
end

-- Parse options and outputs into a run description.
local function parse(opts, outputs)
  opts = opts and tostring(opts) or "f"
  local letters, rest = opts:match("^([^/]*)(.*)$")
  local r = {view = options.parse(letters), outputs = {}}
  local kv = parse_keys(rest)
  r.kv = kv
  if r.view.interval then
    local ok, err = options.value("i", "i" .. r.view.interval)
    if not ok then fail(err) end
  end
  if kv.rate and r.view.interval then
    fail("both i" .. r.view.interval .. " and /rate=" .. kv.rate ..
      " set the interval (accepted: one of them)")
  end
  if #outputs == 0 then outputs = {os.getenv("LUAJIT_PROFILEFILE") or "-"} end
  local stacks = false
  for _, path in ipairs(outputs) do
    local fmt = options.format(path, kv.format, #outputs)
    r.outputs[#r.outputs + 1] = {path = path, format = fmt}
    if fmt ~= "text" then stacks = true end
  end
  r.view.native = kv.native == "show" or nil  -- native frames in text views
  r.record_depth = (stacks or kv.calls == "on") and -options.MAX_DEPTH or
                   options.record_depth(r.view, kv.native ~= "off")
  return r
end

-- The option parser alone ("letters/key=value...", outputs): the run
-- description, or an error "jit.prof: <one line>". For other front ends
-- (an environment variable) and the fuzz tests.
function M.parse_options(opts, outputs)
  return parse(opts, outputs or {})
end

-- Collect the profile of run r and write its outputs (ljprof's functions
-- read the run: after stop, or in the exit helper's state, the same run):
-- jit/prof/output.lua's write_run, loaded now. Each failure is one line.
local function write_outputs(r)
  local path, cpath = package.path, package.cpath
  if start_paths then package.path, package.cpath = start_paths[1], start_paths[2] end
  local ok, errs = pcall(function()
    writers()
    return output.write_run(r, file_name)
  end)
  package.path, package.cpath = path, cpath
  if not ok then
    io.stderr:write("jit.prof: no profile written: ", tostring(errs):match("^[^\n]*"), "\n")
    return
  end
  for _, line in ipairs(errs) do io.stderr:write("jit.prof: ", line, "\n") end
end

-- The same, in a Lua state of ljprof's own (ljprof.write_apart calls
-- write_after_signal below there, with the run's spec): the program's heap
-- is neither walked nor grown, and the garbage of building the views is
-- collected as they are built. At lua_close the outputs are written from
-- a __gc, during which LuaJIT collects nothing: written here, every
-- temporary of a large profile stayed until the end (luacheck looped for
-- 20 s: 27 MB more at the peak). false when that state cannot be made or
-- cannot load this module: then write_outputs(r) writes them here.
local function write_apart(r)
  if not ljprof.write_apart then return false end
  local path, cpath = package.path, package.cpath
  if start_paths then package.path, package.cpath = start_paths[1], start_paths[2] end
  local ok = ljprof.write_apart("jit.prof", "write_after_signal", r.spec)
  package.path, package.cpath = path, cpath
  return ok
end

function M.stop()
  if not run then return end
  local r = run
  run, exit_proxy = nil, nil
  if r.progress then r.progress:close() end
  -- An exit signal from here on waits until the outputs are written,
  -- then kills (on_signal(nil) below).
  if ljprof.on_signal then pcall(ljprof.on_signal, false) end
  ljprof.stop()  -- first: counting calls ends here
  if not write_apart(r) then write_outputs(r) end
  if ljprof.on_signal then pcall(ljprof.on_signal, nil) end
end

-- The exit helper's writer (ljprof.on_signal): called in a Lua state of
-- its own, on a thread of its own, after SIGTERM, SIGHUP or SIGINT, while
-- the program may be blocked or running compiled code; the library then
-- re-raises the signal with its default action. Also stop's writer, in a
-- state of its own on the program's thread (write_apart above). spec: the
-- program's name, the options and the outputs, NUL-separated (what start
-- was given).
function M.write_after_signal(spec)
  local parts = {}
  for w in (spec .. "\0"):gmatch("([^%z]*)%z") do parts[#parts + 1] = w end
  local outputs = {}
  for k = 3, #parts do outputs[#outputs + 1] = parts[k] end
  local r = parse(parts[2], outputs)
  r.program, r.apart = parts[1], true  -- (a state of ljprof's own)
  write_outputs(r)
end

-- The run description of start(opts, outputs), checked: every output
-- writable and its format available (one line naming what cannot work).
local function prepare(opts, outputs)
  local r = parse(opts, outputs)
  for _, o in ipairs(r.outputs) do  -- say what cannot work before starting
    local ok, err = options.check(file_name(o.path))
    if not ok then fail(err) end
    ok, err = options.available(o.format)
    if not ok then fail(err) end
  end
  r.program = type(arg) == "table" and arg[0] or program_comm()
  return r
end

function M.start(opts, ...)
  if run then M.stop() end
  local outputs = {}
  for i = 1, select("#", ...) do
    local o = select(i, ...)
    if o ~= nil and o ~= "" then outputs[#outputs + 1] = tostring(o) end
  end
  -- (the JIT is back on before the recording starts: /calls=on turns it
  -- off itself, and puts back at stop what it found)
  local was = jit_pause()
  local ok, r = pcall(prepare, opts, outputs)
  jit_resume(was)
  if not ok then error(r, 0) end
  start_paths = {package.path, package.cpath}
  if r.kv.private then ljprof.output_private(r.kv.private == "on") end
  local ropt = {fmt = options.KEY_FMT, depth = r.record_depth, clock = r.kv.clock,
                duration = r.kv.duration, native = r.kv.native ~= "off",
                calls = r.kv.calls == "on", aborts = r.kv.aborts == "on",
                inline = r.kv.inline}
  if r.kv.rate then ropt.rate = r.kv.rate
  elseif r.view.interval then ropt.interval = r.view.interval end
  -- With /calls=on, every call from the start on is counted: the real
  -- recording starts last, and the setup runs during a first, empty run
  -- (exit signals can only be trapped while a profile runs; the trap
  -- stays across the restart). The state's ljprof context exists from
  -- then on, so that the exit proxy below, a newer userdata, is finalized
  -- before it at lua_close.
  local counting = ropt.calls
  ropt.calls = false
  local rok, rerr = pcall(ljprof.record, ropt)
  if not rok then  -- one line, without this file's position
    error((tostring(rerr):gsub("^[^\n]-:%d+: ", "")), 0)
  end
  ropt.calls = counting
  run = r
  -- The ljprof command's progress line: a thread writes the sample count
  -- to the file the command passed, about once a second (src/spawn.c).
  local progress = os.getenv("LJPROF_PROGRESS")
  if progress and ljprof.progress then r.progress = ljprof.progress(progress) end
  -- Code written for jit.zone gets ljprof's zones, which are read when the
  -- tick happens (only if it has not loaded jit.zone already). Loaded when
  -- the program asks for it: a program without zones pays nothing.
  if not package.loaded["jit.zone"] and not package.preload["jit.zone"] then
    package.preload["jit.zone"] = function() return require("jit.prof.zone") end
  end
  -- SIGINT is trapped only where nobody handles it (luajit's own handler
  -- is installed while -j options and the script run).
  local spec = {r.program, opts and tostring(opts) or "f"}
  for _, o in ipairs(outputs) do spec[#spec + 1] = o end
  r.spec = table.concat(spec, "\0")
  if ljprof.on_signal then
    local ok, err = pcall(ljprof.on_signal, {"TERM", "HUP", "INT"}, "jit.prof",
                          "write_after_signal", r.spec)
    if not ok then  -- profiling goes on; a kill loses the profile
      local line = "jit.prof: no profile on SIGTERM/SIGHUP: " ..
                   tostring(err):match("^[^\n]*")
      -- once per process (LD_PRELOAD starts every state of a host)
      if ljprof.auto_notice then ljprof.auto_notice(line)
      else io.stderr:write(line, "\n") end
    end
  end
  -- Stop (and write) at lua_close, and before os.exit, which skips it.
  -- Only the active run's proxy stops: a proxy left from an earlier start
  -- may be collected at any time and must not end a later run.
  local proxy = newproxy(true)
  exit_proxy = proxy
  getmetatable(proxy).__gc = function()
    if exit_proxy == proxy then M.stop() end
  end
  if not M.os_exit then
    M.os_exit = os.exit
    os.exit = function(...)
      M.stop()
      return M.os_exit(...)
    end
  end
  if counting then
    ljprof.stop()
    ljprof.record(ropt)  -- same options: cannot fail now; nothing after it
  end
end

return M
