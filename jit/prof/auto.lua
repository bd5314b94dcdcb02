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
--   inline=snapshots|exact|off        frames LuaJIT inlined into traces
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
-- the program runs unprofiled. The run itself is jit.prof's (-jprof's):
-- outputs written at exit, os.exit, an error and the exit signals; the
-- library's export helper (src/auto.c) writes periodic files and
-- snapshots and acts on the control signal.
----------------------------------------------------------------------------

local M = {}
local options = require("jit.prof.options")

local KEYS = "clock=, rate=, interval=, native=, calls=, aborts=, inline=, private=, zones=, view=, " ..
  "format=, output=, every=, keep=, maxbytes=, signal=, control=, start=; or off alone"
local DEFAULT_OUTPUT = "ljprof-%p-%t.pb.gz"
local CONTROL = {off = 0, snapshot = 1, toggle = 2}

local function fail(msg)
  error("ljprof: LJPROF: " .. msg .. "; not profiling", 0)
end

local function bad(key, val, accepted)
  fail(string.format("bad %s '%s' (accepted: %s)", key, val, accepted))
end

-- n (the number read from val, or nil) when it lies in [lo, hi]; else the
-- one line naming key and val.
local function within(key, val, n, lo, hi, accepted)
  if not n or not (n >= lo and n <= hi) then bad(key, val, accepted) end
  return n
end

-- A plain decimal number (no sign, hex, exponent, inf or nan), or nil.
local function decimal(s)
  if s:match("^%d+$") or s:match("^%d+%.%d*$") or s:match("^%.%d+$") then
    return tonumber(s)
  end
end

-- rate= or interval=: a plain decimal in the range every front end
-- accepts (options.period has the one check and message).
local function period(key, val)
  local n, err = options.period(key, val, decimal(val))
  if not n then fail(err) end
  return n
end

-- Linux's signal numbers (x86-64); SIGRTMIN as glibc has it.
local SIGNALS = {USR1 = 10, USR2 = 12}
local RTMIN, RTMAX = 34, 64
-- Not for control: faults, aborts, children, the exit signals, the
-- sampling signals (SIGURG by default, SIGPROF for itimer), stop, kill.
local REFUSED = {[1] = "HUP", [2] = "INT", [3] = "QUIT", [4] = "ILL",
  [5] = "TRAP", [6] = "ABRT", [7] = "BUS", [8] = "FPE", [9] = "KILL",
  [11] = "SEGV", [13] = "PIPE", [15] = "TERM", [17] = "CHLD", [18] = "CONT",
  [19] = "STOP", [20] = "TSTP", [21] = "TTIN", [22] = "TTOU", [23] = "URG",
  [24] = "XCPU", [25] = "XFSZ", [27] = "PROF", [31] = "SYS", [32] = "",
  [33] = ""}
local SIGNAL_FORMS = "USR2 (the default), USR1, RTMIN+N (N from 0 to " ..
  (RTMAX - RTMIN) .. "), a number from 1 to 64 not used for faults, " ..
  "children, exits, stops or sampling, or off"

local function signal_number(v)
  local name = v:upper():gsub("^SIG", "")
  local n
  if SIGNALS[name] then
    n = SIGNALS[name]
  elseif name:match("^RTMIN%+%d+$") then
    n = RTMIN + tonumber(name:match("%d+"))
  elseif name == "RTMIN" then
    n = RTMIN
  elseif v:match("^%d+$") then
    n = tonumber(v)
  end
  if not n or n < 1 or n > RTMAX or REFUSED[n] then bad("signal", v, SIGNAL_FORMS) end
  return n
end

-- A size: digits with an optional k, M or G (powers of 1024) and B.
local function size(key, v)
  local num, unit = v:match("^(%d+)([kKmMgG]?)[bB]?$")
  local n = num and tonumber(num)
  if n and #num <= 15 then
    n = n * (({k = 1024, m = 1024 ^ 2, g = 1024 ^ 3})[unit:lower()] or 1)
  end
  if not n or n < 1 or #num > 15 then
    bad(key, v, "a size in bytes, with an optional k, M or G: 1048576, 500k, 100M, 2G")
  end
  return n
end

-- The placeholders of an output template; one line for a bad one.
local PLACEHOLDERS = "%p pid, %s state, %t time, %n sequence, %% a percent sign"
local function template(v)
  local has = {}
  local i = 1
  while true do
    local k = v:find("%", i, true)
    if not k then break end
    local c = v:sub(k + 1, k + 1)
    if not ("pstn%"):find(c, 1, true) or c == "" then
      fail(string.format("bad output '%s' (placeholder '%%%s' unknown; accepted: %s)",
                         v, c, PLACEHOLDERS))
    end
    has[c] = true
    i = k + 2
  end
  return has
end

-- Parse LJPROF's value: a run description, or nil for off; errors are
-- one line "ljprof: LJPROF: ...". Pure: no side effect (the fuzz tests
-- call it with anything).
function M.parse(s)
  s = tostring(s)
  local cfg = {outputs = {}, control = "snapshot", signal = SIGNALS.USR2}
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
      if v == "" then bad(k, v, "a value after '" .. k .. "='") end
      seen[#seen + 1] = item
      if k == "clock" then
        local ok, accepted = options.clock(v)
        if not ok then bad(k, v, accepted) end
        kv.clock = v
      elseif k == "rate" then
        cfg.rate = period(k, v)
      elseif k == "interval" then
        cfg.interval = period(k, v)
      elseif k == "native" then
        if v ~= "on" and v ~= "off" and v ~= "show" then bad(k, v, "on, off, show") end
        kv.native = v
      elseif k == "calls" or k == "aborts" or k == "private" then
        if v ~= "on" and v ~= "off" then bad(k, v, "on, off") end
        kv[k] = v
      elseif k == "zones" then
        if v ~= "root" and v ~= "off" then bad(k, v, "root, off") end
        kv.zones = v
      elseif k == "inline" then
        if v ~= "snapshots" and v ~= "exact" and v ~= "off" then
          bad(k, v, "snapshots, exact, off")
        end
        kv.inline = v
      elseif k == "format" then
        local fmts = options.FORMATS
        local ok = false
        for _, f in ipairs(fmts) do ok = ok or f == v end
        if not ok then bad(k, v, table.concat(fmts, ", ")) end
        kv.format = v
      elseif k == "view" then
        if not v:match("^[%w<>%-]+$") or v:find("i") then
          bad(k, v, "-jp's view letters (f F l s p v z r a A G, depth <n>/-<n>, m<n>): " ..
            "the interval is rate= or interval=")
        end
        cfg.view = v
      elseif k == "output" then
        template(v)
        cfg.outputs[#cfg.outputs + 1] = v
      elseif k == "every" then
        cfg.every = within(k, v, decimal(v), 0.1, 86400, "0.1 to 86400 seconds between exports")
      elseif k == "keep" then
        cfg.keep = within(k, v, v:match("^%d+$") and tonumber(v), 1, 1000000, "1 to 1000000 exports kept")
      elseif k == "maxbytes" then
        cfg.maxbytes = size(k, v)
      elseif k == "signal" then
        if v == "off" then
          cfg.signal = nil
        else
          cfg.signal = signal_number(v)
        end
      elseif k == "control" then
        if not CONTROL[v] then bad(k, v, "snapshot, toggle, off") end
        cfg.control = v
      elseif k == "start" then
        if v ~= "running" and v ~= "paused" then bad(k, v, "running, paused") end
        cfg.paused = v == "paused"
      else
        fail(string.format("unknown item '%s' (accepted: %s)", item, KEYS))
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
