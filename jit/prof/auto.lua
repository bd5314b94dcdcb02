----------------------------------------------------------------------------
-- jit.prof.auto: profiling started from the environment, without changing
-- the program. One variable, LJPROF, configures it, and every way in goes
-- through this module's parser and start:
--
--   luajit -l ljprof.auto app.lua          ljprof/auto.lua calls main()
--   LD_PRELOAD=libljprof.so host           src/preload.c requires
--                                          ljprof.auto in each new state
--
--   LJPROF="rate=99,clock=cpu,output=/var/tmp/ljprof/%p-%t.pb.gz,every=60"
--
-- Items are separated by commas, each key=value (docs/usage.md, "Starting
-- from the environment"):
--   clock=cpu|wall|itimer|thread      rate=HZ | interval=MS (default 99 Hz)
--   native=on|off|show   calls=on|off   zones=root|off   view=LETTERS
--   aborts=on|off                     why traces aborted (text reports)
--   inline=recorded|snapshots|exact|off  frames LuaJIT inlined into traces
--   private=on|off                    files 0600 instead of 0644
--   format=FORMAT        output=TEMPLATE (repeatable; format from the name)
--   every=SECONDS        periodic export of the profile since the last one
--   keep=N  maxbytes=SIZE   rotation of the periodic files (with every=)
--   signal=USR2|USR1|RTMIN+N|NUMBER|off   the control signal (USR2)
--   control=snapshot|toggle|off          what it does (snapshot)
--   start=running|paused                 paused: until the control signal
--   off                                  (alone) no profiling
-- Output templates: %p pid, %s the state's index in the process, %t the
-- start of the interval the file holds (UTC, 20250102T030405.678Z), %n
-- its number (1, 2, ...), %% a percent sign.
--
-- A bad value is one line on stderr naming the item and what is accepted
-- ("ljprof: LJPROF: bad rate 'fast' (accepted: ...); not profiling") and
-- the program runs unprofiled. The keys and the check of each value are
-- jit.prof.options' (KEYS, value): a key's line is the same as -jprof's
-- and the ljprof command's; what concerns several items is checked here. The run itself is jit.prof's (-jprof's):
-- outputs written at exit, os.exit, an error and the exit signals; the
-- library's export helper (src/auto.c) writes periodic files and
-- snapshots and acts on the control signal.
----------------------------------------------------------------------------

local M = {}
local options = require("jit.prof.options")

local KEYS = options.keys_of("env") .. "; or off alone"
local DEFAULT_OUTPUT = "ljprof-%p-%t.pb.gz"
local CONTROL = {off = 0, snapshot = 1, toggle = 2}

local function fail(msg)
  error("ljprof: LJPROF: " .. msg .. "; not profiling", 0)
end

-- The one check of a key's value (jit.prof.options.value: the same line
-- as -jprof's and ljprof's for the keys they share).
local function value(k, v)
  local x, err = options.value(k, v)
  if x == nil then fail(err) end
  return x
end

local SIGNAL_DEFAULT = 12  -- USR2

-- The placeholders of a checked output template.
local function template(v)
  return options.placeholders(v) or {}
end

-- Parse LJPROF's value: a run description, or nil for off; errors are
-- one line "ljprof: LJPROF: ...". Pure: no side effect (the fuzz tests
-- call it with anything).
function M.parse(s)
  s = tostring(s)
  local cfg = {outputs = {}, control = "snapshot", signal = SIGNAL_DEFAULT}
  local kv, seen = {}, {}
  local off = false
  for item in (s .. ","):gmatch("([^,]*),") do
    item = item:match("^%s*(.-)%s*$")
    if item == "off" then
      off = true
    elseif item ~= "" then
      local k, v = item:match("^([%w_]+)=(.*)$")
      if not k then
        fail(string.format("bad item '%s' (accepted: key=value items: %s)", item, KEYS))
      end
      seen[#seen + 1] = item
      local key = options.KEYS[k]
      if not key or key.env ~= k .. "=" then
        fail(string.format("unknown item '%s' (accepted: %s)", item, KEYS))
      end
      local x = value(k, v)
      if k == "rate" or k == "interval" or k == "every" or k == "keep" or k == "maxbytes" or
         k == "view" then
        cfg[k] = x
      elseif k == "output" then
        cfg.outputs[#cfg.outputs + 1] = x
      elseif k == "signal" then
        cfg.signal = x ~= "off" and x or nil
      elseif k == "control" then
        cfg.control = x
      elseif k == "start" then
        cfg.paused = x == "paused"
      else  -- -jprof's own /key= items
        kv[k] = x
      end
    end
  end
  if off then
    if #seen > 0 then
      fail(string.format("bad item 'off' with '%s' (accepted: off alone, or key=value items)", seen[1]))
    end
    return nil
  end
  if cfg.rate and cfg.interval then
    fail(string.format("both rate=%s and interval=%s set the interval (accepted: one of them)",
                       cfg.rate, cfg.interval))
  end
  if #cfg.outputs == 0 then cfg.outputs[1] = DEFAULT_OUTPUT end
  if cfg.every then
    if kv.calls == "on" then
      fail("calls=on with every= (accepted: one of them: call counts are per run)")
    end
    for _, o in ipairs(cfg.outputs) do
      local has = template(o)
      if not (has.n or has.t) then
        fail(string.format("output '%s' has no %%n or %%t, which every= needs " ..
                           "(accepted: a template naming each export apart, e.g. %s)",
                           o, DEFAULT_OUTPUT))
      end
      if o == "-" then fail("output '-' with every= (accepted: file names)") end
    end
  else
    if cfg.keep then fail("keep=" .. cfg.keep .. " without every= (accepted: keep= and maxbytes= with every=)") end
    if cfg.maxbytes then fail("maxbytes= without every= (accepted: keep= and maxbytes= with every=)") end
  end
  if cfg.paused and (cfg.control ~= "toggle" or not cfg.signal) then
    fail("start=paused without control=toggle and a signal (accepted: start=paused with control=toggle)")
  end
  if not cfg.signal then cfg.control = "off" end
  -- -jprof's options: letters, then /key=value items (jit.prof parses them)
  local parts = {cfg.view or "f"}
  for _, k in ipairs({"clock", "native", "zones", "format", "calls", "aborts", "inline", "private"}) do
    if kv[k] then parts[#parts + 1] = "/" .. k .. "=" .. kv[k] end
  end
  local rate = cfg.rate or (cfg.interval and 1000 / cfg.interval) or 99
  parts[#parts + 1] = "/rate=" .. string.format("%.17g", rate)
  cfg.opts = table.concat(parts)
  local ok, err = pcall(require("jit.prof").parse_options, cfg.opts, cfg.outputs)
  if not ok then fail((tostring(err):gsub("^jit%.prof: ", ""))) end
  return cfg
end

-- The name of state index's outputs: a template without %s gets "-<index>"
-- before its first dot (states after the first), so that states do not
-- write over each other.
function M.state_name(tmpl, index)
  if index <= 1 or template(tmpl).s or tmpl == "-" then return tmpl end
  local dir, base = tmpl:match("^(.*/)([^/]*)$")
  dir, base = dir or "", base or tmpl
  local dot = base:find(".", 2, true)
  if dot then return dir .. base:sub(1, dot - 1) .. "-" .. index .. base:sub(dot) end
  return dir .. base .. "-" .. index
end

local function notice(line)
  local ok, lj = pcall(require, "ljprof")
  if ok and type(lj) == "table" and lj.auto_notice then
    lj.auto_notice(line)
  else
    io.stderr:write(line, "\n")
  end
end

local function program_name()
  if type(arg) == "table" and arg[0] then return tostring(arg[0]) end
  local f = io.open("/proc/self/comm")
  local name = f and f:read("*l")
  if f then f:close() end
  return name or "?"
end

-- Start this state's run as cfg says (jit.prof's machinery, then the
-- library's export helper). Errors: one line "ljprof: LJPROF: ...".
function M.start(cfg)
  if M.running then return end
  local ljprof = require("ljprof")
  local prof = require("jit.prof")
  local index, why = ljprof.auto_attach(cfg.every or 0, cfg.keep or 0, cfg.maxbytes or 0)
  if not index then fail((tostring(why):gsub("^ljprof: ", ""))) end
  local outs = {}
  for i, o in ipairs(cfg.outputs) do outs[i] = M.state_name(o, index) end
  local ok, err = pcall(prof.start, cfg.opts, unpack(outs))
  if not ok then
    ljprof.auto_stop()
    fail((tostring(err):gsub("^jit%.prof: ", "")))
  end
  M.running = true
  local spec = {program_name(), cfg.opts}
  for _, o in ipairs(outs) do spec[#spec + 1] = o end
  local started, why = ljprof.auto_start(table.concat(spec, "\0"), CONTROL[cfg.control],
                                         cfg.signal or 0, cfg.paused or false)
  if not started then notice(why) end  -- the run goes on without it
  -- Before jit.prof's own stop (which writes): no more exports. A proxy
  -- made after jit.prof's is finalized before it at lua_close; os.exit
  -- wrapped after jit.prof wrapped it runs first.
  local proxy = newproxy(true)
  M.proxy = proxy
  getmetatable(proxy).__gc = function() ljprof.auto_stop() end
  local exit = os.exit
  os.exit = function(...)
    ljprof.auto_stop()
    return exit(...)
  end
end

-- LJPROF as the environment has it; unset: the defaults (the program
-- loaded this module to be profiled), "off": nothing. Never raises: a
-- bad value is one line and the program runs unprofiled.
function M.main()
  local env = os.getenv("LJPROF") or ""
  -- The parser runs with the JIT off, as jit.prof's own start does (see
  -- jit/prof.lua): it uses none of the hot counters the program will.
  local was = jit and jit.status and jit.status()
  if was then jit.off() end
  local ok, cfg = pcall(M.parse, env)
  if was then jit.on() end
  if ok and cfg then ok, cfg = pcall(M.start, cfg) end
  if not ok then notice(tostring(cfg)) end
  return M
end

return M
