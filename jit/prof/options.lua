----------------------------------------------------------------------------
-- jit.prof.options: what a run asks for, read before it starts. The one
-- option reader of the three front ends (-jprof, the ljprof command,
-- LJPROF): the key table and the check of a key's value; the -jp view
-- letters, the output formats and the file endings that choose them, the
-- stack key and depth a recording needs, and whether an output can be
-- written and its writer found.
--
--   local v = options.parse("vf")              -- -jp letters -> view
--   local x, err = options.value("rate", "99")  -- any key: value or its line
--   local fmt = options.format(path, forced, n)
--   local d = options.record_depth(v, natives)
--   local ok, err = options.check(path)         -- writable? (before a run)
--   local ok, err = options.available(fmt)      -- writer found?
--
-- Rules:
-- - This is the only part of the front end a starting run loads into the
--   program's state (with jit/prof.lua and the library). The model, the
--   views and the writers are loaded when the run is written. Whatever a
--   profiler allocates before the program is loaded moves the program's
--   bytecode, and LuaJIT's choice of traces follows the bytecode's
--   addresses (docs/performance.md, *JIT perturbation*): this module stays
--   small and loads nothing else. (The key table took it from 12.3 KB
--   kept after loading to 36.9 KB, and from 28.2 KB allocated while
--   loading to 78.5 KB; with what is only told of the keys moved to
--   jit.prof.keydocs, 28.9 KB kept, 61.3 KB allocated, and 1.64M
--   instructions to load instead of 1.80M: collectgarbage("count")
--   around require, after a full collection / with the collector
--   stopped; cachegrind. The control signal's table is made only when a
--   signal= is read.)
-- - parse() reads the letters exactly as LuaJIT's jit/p.lua does (same
--   order, same defaults, same interplay: s, fl, vf/fv, a/A, G); letters
--   -jp would ignore are an error (one line).
-- - An output's format comes from its name; a forced format (/format=,
--   -f) wins over the name when it is the only output, and otherwise
--   applies to the names without a known ending (.txt stays text).
-- - KEYS is the one table of option keys: every key any front end takes,
--   its accepted values and the spellings a run needs; documented() adds
--   what is only told (default, the command's spelling, why a front end
--   has none: jit.prof.keydocs). value() is the one check: each front end keeps
--   its surface (letters and /key=, --flags, key=value items), maps it
--   onto these keys and calls value(), so a key's bad value is the same
--   line everywhere: "bad <key> '<value>' (accepted: ...)". Numbers have
--   one reading (number()). What concerns several keys at once (rate=
--   with interval=, keep= without every=) stays with the front end.
-- - available() finds the writer module jit.prof.<format> without loading
--   it (package.loaded, package.preload, then package.path).
-- - Nothing here prints or exits: errors are one line.
----------------------------------------------------------------------------

local format = string.format

local M = {}

-- The stack key every run records (jit.prof.model splits it).
M.FIELD, M.FRAME = "\31", "\30"
M.KEY_FMT = "pf\31lZ\30"
M.MAX_DEPTH = 200             -- frames kept per sample for stack formats
M.NATIVE_MAX = 32             -- native frames per sample (src/ring.h)

M.ACCEPTED = "f F l s p v z r a A G <n> -<n> m<n> i<n>"
M.MAX_VIEW_DEPTH = 100000     -- |<n>| of the view letters (the library
                              -- takes 1000000, less NATIVE_MAX and G's 100)

-- What is wrong with -jp letters s, or nil: with_i, -jprof's letters,
-- where i<n> is the interval (key i); elsewhere (ljprof -v, LJPROF view=)
-- the letters are the view alone. The same order as parse() below.
local function letters_wrong(s, with_i)
  local why
  if with_i then s = s:gsub("i%d*", "") end
  s = s:gsub("m%d+", "")
  s = s:gsub("%-?%d+", function(d)
    if not why and math.abs(tonumber(d)) > M.MAX_VIEW_DEPTH then
      why = "depth " .. d .. " too deep"
    end
    return ""
  end)
  if why then return why end
  local c = s:match("[^fFlspvzraAG%-]")
  if c == "i" then return "letter 'i': the interval is a key of its own here" end
  if c then return "letter '" .. c .. "' unknown" end
end

-- Parse -jp option letters into a view (jit/p.lua prof_start, in order);
-- i<n> is read too (-jprof's interval). A bad letter is the view key's
-- one line (M.value("view", ...)), with "jit.prof: " before it.
function M.parse(mode)
  mode = mode or "f"
  local why = letters_wrong(mode, true)
  if why then error("jit.prof: " .. M.bad("view", mode, why), 0) end
  local v = {min = 3, depth = 1}
  mode = mode:gsub("i%d*", function(s)
    v.interval = math.max(1, tonumber(s:sub(2)) or 0)  -- "i", "i0": 1 ms
    return ""
  end)
  mode = mode:gsub("m(%d+)", function(s) v.min = tonumber(s); return "" end)
  mode = mode:gsub("%-?%d+", function(s) v.depth = tonumber(s); return "" end)
  local m = {}
  for c in mode:gmatch(".") do m[c] = c end
  v.letters = m
  v.states = m.z or m.v
  local scope = m.l or m.f or m.F or (v.states and "" or "f")
  v.fullpath = m.p ~= nil
  v.raw = m.r
  if m.s then
    v.split = 2
    if v.depth == -1 or m["-"] then v.depth = -2
    elseif v.depth == 1 then v.depth = 2 end
  elseif mode:find("[fF].*l") then
    scope = "l"
    v.split = 3
  else
    v.split = (scope == "" or mode:find("[zv].*[lfF]")) and 1 or 0
  end
  v.ann = m.A and 0 or (m.a and 3) or nil
  if v.ann then
    scope = "l"
    v.fmt = "ann"
    v.split = 0
    v.depth = 1
  elseif m.G and scope ~= "" then
    v.fmt = "G"
    v.label = scope
    v.depth = -100
    v.raw = true
    v.min = 0
  elseif scope == "" then
    v.fmt = false
  else
    v.fmt = "view"
    v.label = v.split == 3 and m.f or m.F or scope
  end
  v.scope = scope
  return v
end

-- Stack depth a recording needs for this view (stacks are the innermost
-- frames): a C leaf needs its Lua caller for annotation. natives: native
-- frames are recorded and hidden from this view, so up to NATIVE_MAX of
-- them may sit above the frames it shows.
function M.record_depth(v, natives)
  local d = v.fmt == "ann" and 16 or math.max(1, math.abs(v.depth))
  if natives and v.fmt ~= "G" and not v.native then d = d + M.NATIVE_MAX end
  return -d
end

-- The clocks, as every front end accepts them (src/clocks.c has the
-- library's own table, ljprof.clocks(); test_clocks checks they agree).
M.CLOCKS = {"cpu", "wall", "itimer", "thread"}

-- v if it names a clock, else nil and the "(accepted: ...)" text.
function M.clock(v)
  for _, c in ipairs(M.CLOCKS) do
    if c == v then return v end
  end
  return nil, table.concat(M.CLOCKS, ", ")
end

-- Output formats: module jit.prof.<name> renders each (text is
-- jit.prof.output's own), chosen explicitly or from the file name.
M.FORMATS = {"text", "folded", "speedscope", "pprof", "svg", "raw"}
local EXT = {
  {".speedscope.json", "speedscope"}, {".pb.gz", "pprof"}, {".svg", "svg"},
  {".folded", "folded"}, {".ljprof", "raw"}, {".txt", "text"},
}

-- The one reading of a number, for every key and front end: a plain
-- decimal, digits with an optional fraction and exponent (99, 0.5, .5,
-- 1e3); no sign, hex, inf, nan or spaces. nil otherwise.
function M.number(s)
  if type(s) ~= "string" then return nil end
  local m = s:match("^%d+%.?%d*") or s:match("^%.%d+")
  if not m then return nil end
  local e = s:sub(#m + 1)
  if e ~= "" and not e:match("^[eE][+-]?%d+$") then return nil end
  return tonumber(s)
end

-- The placeholders of an LJPROF output template: the set of those used
-- ({p = true, ...}), or nil and why not.
M.PLACEHOLDERS = "%p pid, %s state, %t time, %n sequence, %% a percent sign"
function M.placeholders(v)
  local has, i = {}, 1
  while true do
    local k = v:find("%", i, true)
    if not k then return has end
    local c = v:sub(k + 1, k + 1)
    if c == "" or not ("pstn%"):find(c, 1, true) then
      return nil, "placeholder '%" .. c .. "' unknown"
    end
    has[c] = true
    i = k + 2
  end
end

-- The control signal (LJPROF signal=): Linux's numbers (x86-64), SIGRTMIN
-- as glibc has it. Refused: faults, aborts, children, the exit signals,
-- the sampling signals (SIGURG by default, SIGPROF for itimer), stops,
-- kill. (Built when a signal= is read, not when a run starts.)
M.RTMIN, M.RTMAX = 34, 64
local function signal_number(v)
  if v == "off" then return "off" end
  local name = v:upper():gsub("^SIG", "")
  local n = ({USR1 = 10, USR2 = 12, RTMIN = M.RTMIN})[name]
  if not n and name:match("^RTMIN%+%d+$") then n = M.RTMIN + tonumber(name:match("%d+"))
  elseif not n and v:match("^%d+$") then n = tonumber(v) end
  local refused = {[1] = 1, [2] = 1, [3] = 1, [4] = 1, [5] = 1, [6] = 1, [7] = 1, [8] = 1,
    [9] = 1, [11] = 1, [13] = 1, [15] = 1, [17] = 1, [18] = 1, [19] = 1, [20] = 1, [21] = 1,
    [22] = 1, [23] = 1, [24] = 1, [25] = 1, [27] = 1, [31] = 1, [32] = 1, [33] = 1}
  if not n or n < 1 or n > M.RTMAX or refused[n] then return nil end
  return n
end

-- A size: digits with an optional k, M or G (powers of 1024) and B.
local function size(v)
  local num, unit = v:match("^(%d+)([kKmMgG]?)[bB]?$")
  if not num or #num > 15 then return nil end
  local n = tonumber(num) * (({k = 1024, m = 1024 ^ 2, g = 1024 ^ 3})[unit:lower()] or 1)
  if n >= 1 then return n end
end

-- The option keys: every key any front end accepts, the one table the
-- three read (-jprof: jit/prof.lua; the ljprof command: jit/prof/cli.lua;
-- LJPROF: jit/prof/auto.lua). Each has its accepted values (values: a
-- list; lo/hi: a number, M.number's reading, in that range, whole when
-- int; check: a function, value or nil [, why]), the text of what is
-- accepted, and its spelling in the front ends that list their keys in
-- an "unknown option" line: jprof, env (a string). M.value() below is the
-- one check; its message is the key's in every front end. form: how
-- -jprof's list of keys shows the value. What a reader is told besides
-- (default, the command's spelling, why a front end lacks a key) is in
-- jit.prof.keydocs, merged by M.documented(); test_options checks every
-- key through every front end that has it. Not options: ljprof -h, -V,
-- --env (what the command does instead of a run).
M.KEYS = {
  {key = "clock", values = M.CLOCKS, jprof = "/clock=", env = "clock="},
  {key = "rate", lo = 1 / 60, hi = 100000, form = "<Hz>",
   accepted = "0.017 to 100000 samples per second", jprof = "/rate=", env = "rate="},
  {key = "interval", lo = 0.01, hi = 60000, accepted = "0.01 to 60000 milliseconds",
   env = "interval="},
  {key = "i", lo = 1, hi = 60000, int = true, prefix = "i",
   accepted = "i1 to i60000 milliseconds; i and i0 mean 1 ms, as with -jp", jprof = "i<n>"},
  {key = "duration", lo = 1e-6, hi = 1e9, form = "<seconds>",
   accepted = "0.000001 to 1e9 seconds", jprof = "/duration="},
  {key = "view", check = function(v)
     local why = letters_wrong(v)
     if why then return nil, why end
     return v
   end,
   accepted = "-jp's view letters f F l s p v z r a A G <n> -<n> m<n> (depth up to 100000); " ..
     "-jprof's also take i<n>, the interval",
   jprof = "the letters before the first /", env = "view="},
  {key = "format", values = M.FORMATS, jprof = "/format=", env = "format="},
  {key = "output", check = function(v)
     local ok, why = M.placeholders(v)
     if ok then return v end
     return nil, why
   end,
   accepted = M.PLACEHOLDERS, env = "output=", jprof = "the words after the commas"},
  {key = "native", values = {"on", "off", "show"}, jprof = "/native=", env = "native="},
  {key = "zones", values = {"root", "off"}, jprof = "/zones=", env = "zones="},
  {key = "calls", values = {"on", "off"}, jprof = "/calls=", env = "calls="},
  {key = "aborts", values = {"on", "off"}, jprof = "/aborts=", env = "aborts="},
  {key = "inline", values = {"recorded", "snapshots", "exact", "off"}, jprof = "/inline=", env = "inline="},
  {key = "private", values = {"on", "off"}, jprof = "/private=", env = "private="},
  {key = "every", lo = 0.1, hi = 86400, accepted = "0.1 to 86400 seconds between exports",
   env = "every="},
  {key = "keep", lo = 1, hi = 1000000, int = true, accepted = "1 to 1000000 exports kept",
   env = "keep="},
  {key = "maxbytes", check = size, env = "maxbytes=",
   accepted = "a size in bytes, with an optional k, M or G: 1048576, 500k, 100M, 2G"},
  {key = "signal", check = signal_number, env = "signal=",
   accepted = "USR2 (the default), USR1, RTMIN+N (N from 0 to 30), a number from 1 to 64 " ..
     "not used for faults, children, exits, stops or sampling, or off"},
  {key = "control", values = {"snapshot", "toggle", "off"}, env = "control="},
  {key = "start", values = {"running", "paused"}, env = "start="},
  {key = "luajit", check = function(v) return v end, accepted = "the interpreter's path"},
  {key = "quiet", values = {"on"}},
}
for _, k in ipairs(M.KEYS) do
  M.KEYS[k.key] = k
  if k.values then k.accepted = table.concat(k.values, ", ") end
end

-- KEYS with what a reader is told of each key (jit.prof.keydocs:
-- default, cli, cli_sets, lacks, as_given) merged into its entries; an
-- error names a key the two tables do not share. For tests and docs: a
-- run never calls it.
function M.documented()
  local docs = require("jit.prof.keydocs")
  for _, k in ipairs(M.KEYS) do
    local d = docs[k.key]
    if not d then error("jit.prof.keydocs: no entry for key " .. k.key) end
    for f, v in pairs(d) do k[f] = v end
  end
  for key in pairs(docs) do
    if not M.KEYS[key] then error("jit.prof.keydocs: entry for unknown key " .. key) end
  end
  return M.KEYS
end

-- The one line for a bad value of key: "bad <key> '<val>' (accepted:
-- ...)", why (or nil) before what is accepted.
function M.bad(key, val, why)
  return format("bad %s '%s' (%saccepted: %s)", key == "i" and "interval" or key,
                val, why and why .. "; " or "", M.KEYS[key].accepted)
end

-- The one check of a key's value, for every front end: the value (a
-- number for lo/hi keys, the control signal's number, a size in bytes,
-- else the text) or nil and the key's one line. val: the text given
-- (-jprof's letter i<n> as "i<n>"). No key takes an empty value.
function M.value(key, val)
  local k = M.KEYS[key]
  local s = tostring(val)
  local v, why = nil, nil
  if s == "" then
    v = nil
  elseif k.values then
    for _, x in ipairs(k.values) do if x == s then v = s end end
  elseif k.lo then
    local t = k.prefix and s:sub(1, #k.prefix) == k.prefix and s:sub(#k.prefix + 1) or s
    if k.prefix and t == s then t = nil end
    local n
    if t and k.int then n = t:match("^%d+$") and tonumber(t)
    elseif t then n = M.number(t) end
    if n and k.prefix then n = math.max(k.lo, n) end  -- "i", "i0": 1 ms
    if k.prefix and t == "" then n = k.lo end
    if n and n >= k.lo and n <= k.hi then v = n end
  else
    v, why = k.check(s)
  end
  if v == nil or v == false then return nil, M.bad(key, s, why) end
  return v
end

-- One front end's spellings of the keys, for its "unknown option" line:
-- "/clock=cpu|wall|itimer|thread /format=... /rate=<Hz>" (-jprof: the
-- /key= items) or "clock=, rate=, ..." (LJPROF).
function M.keys_of(fe)
  local out = {}
  for _, k in ipairs(M.KEYS) do
    local sp = k[fe]
    if fe == "jprof" and sp and sp:sub(1, 1) == "/" then
      out[#out + 1] = sp .. (k.form or table.concat(k.values, "|"))
    elseif fe == "env" and sp then
      out[#out + 1] = sp
    end
  end
  return table.concat(out, fe == "env" and ", " or " ")
end

-- The file name ending of a format (".svg" for "svg").
function M.extension(fmt)
  for _, e in ipairs(EXT) do
    if e[2] == fmt then return e[1] end
  end
end

function M.format_for(path)
  for _, e in ipairs(EXT) do
    if path:sub(-#e[1]) == e[1] then return e[2] end
  end
  return "text"
end

-- The format of output path: forced (or nil) is /format= or -f, n the
-- number of outputs.
function M.format(path, forced, n)
  if forced and n == 1 then return forced end
  local fmt = M.format_for(path)
  if forced and fmt == "text" and not path:find("%.txt$") then fmt = forced end
  return fmt
end

-- Can path be written now? Nothing is left behind. Returns true, or nil
-- and "cannot write <path>: <why>" (the library's output routine,
-- src/outfile.c, says why; here without its "ljprof: ").
function M.check(path)
  if path == "-" then return true end
  local ok, err = require("ljprof").check_output(path)
  if not ok then return nil, (tostring(err):gsub("^ljprof: ", "")) end
  return true
end

-- Is the writer of fmt there? Found, not loaded: true, or nil and one line.
function M.available(fmt)
  if fmt == "text" then return true end
  local name = "jit.prof." .. fmt
  if package.loaded[name] or package.preload[name] then return true end
  if package.searchpath(name, package.path) then return true end
  return nil, "format " .. fmt .. " is not available (module '" .. name .. "' not found)"
end

return M
