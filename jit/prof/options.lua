----------------------------------------------------------------------------
-- jit.prof.options: what a run asks for, read before it starts. The -jp
-- view letters, the output formats and the file endings that choose them,
-- the stack key and depth a recording needs, and whether an output can be
-- written and its writer found.
--
--   local v = options.parse("vf")              -- -jp letters -> view
--   local fmt = options.format(path, forced, n)
--   local d = options.record_depth(v, natives)
--   local ok, err = options.check(path)         -- writable? (before a run)
--   local ok, err = options.available(fmt)      -- writer found?
--   local n, err = options.period("rate", val, tonumber(val))  -- in range?
--
-- Rules:
-- - This is the only part of the front end a starting run loads into the
--   program's state (with jit/prof.lua and the library). The model, the
--   views and the writers are loaded when the run is written. Whatever a
--   profiler allocates before the program is loaded moves the program's
--   bytecode, and LuaJIT's choice of traces follows the bytecode's
--   addresses (docs/performance.md, *JIT perturbation*): this module stays
--   small and loads nothing else.
-- - parse() reads the letters exactly as LuaJIT's jit/p.lua does (same
--   order, same defaults, same interplay: s, fl, vf/fv, a/A, G); letters
--   -jp would ignore are an error (one line).
-- - An output's format comes from its name; a forced format (/format=,
--   -f) wins over the name when it is the only output, and otherwise
--   applies to the names without a known ending (.txt stays text).
-- - period() is the one range check and message per key for the
--   sampling rate and interval (-jprof, ljprof and LJPROF all call it).
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

-- Parse -jp option letters into a view (jit/p.lua prof_start, in order).
function M.parse(mode)
  mode = mode or "f"
  local given = mode
  local v = {min = 3, depth = 1}
  mode = mode:gsub("i%d*", function(s)
    v.interval = math.max(1, tonumber(s:sub(2)) or 0)  -- "i", "i0": 1 ms
    return ""
  end)
  mode = mode:gsub("m(%d+)", function(s) v.min = tonumber(s); return "" end)
  mode = mode:gsub("%-?%d+", function(s) v.depth = tonumber(s); return "" end)
  local m = {}
  for c in mode:gmatch(".") do
    if not c:find("^[fFlspvzraAG%-]$") then
      error(format("jit.prof: bad option '%s' in '%s' (accepted: %s)", c, given,
        M.ACCEPTED), 0)
    end
    m[c] = c
  end
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

-- The sampling period, as every front end writes it: the one range check
-- and its message per key (the library accepts an interval from 10 us to
-- 60 s). "rate" is samples per second (/rate=, --rate, LJPROF rate=),
-- "interval" milliseconds (LJPROF interval=), "i" the -jp letter i<n>
-- (whole milliseconds, shown as "i<n>"; i and i0 already mean 1).
M.PERIOD = {
  rate = {name = "rate", lo = 1 / 60, hi = 100000,
          accepted = "0.017 to 100000 samples per second"},
  interval = {name = "interval", lo = 0.01, hi = 60000,
              accepted = "0.01 to 60000 milliseconds"},
  i = {name = "interval", lo = 1, hi = 60000,
       accepted = "i1 to i60000 milliseconds; i and i0 mean 1 ms, as with -jp"},
}

-- n (the number the front end read from text val, or nil) when it lies in
-- key's range; else nil and the one line "bad <key> '<val>' (accepted: ...)".
-- Each front end keeps its own reading of the number (LJPROF takes plain
-- decimals only; -jprof and ljprof take what tonumber takes).
function M.period(key, val, n)
  local p = M.PERIOD[key]
  if not n or not (n >= p.lo and n <= p.hi) then
    return nil, format("bad %s '%s' (accepted: %s)", p.name, val, p.accepted)
  end
  return n
end

-- Output formats: module jit.prof.<name> renders each (text is
-- jit.prof.output's own), chosen explicitly or from the file name.
M.FORMATS = {"text", "folded", "speedscope", "pprof", "svg", "raw"}
local EXT = {
  {".speedscope.json", "speedscope"}, {".pb.gz", "pprof"}, {".svg", "svg"},
  {".folded", "folded"}, {".ljprof", "raw"}, {".txt", "text"},
}

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
