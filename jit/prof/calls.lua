----------------------------------------------------------------------------
-- jit.prof.calls: the report of a run that counted calls (record{calls=
-- true}, -jprof=.../calls=on, ljprof --calls): exact call counts beside
-- sampled time, per function and per source line.
--
--   local s = calls.render(p, meta [, view])
--     p     a jit.prof.model profile with p.calls = ljprof.calls()
--     meta  {interval_us=, clock=, ...} (ms = samples * interval)
--     view  jit.prof.text.parse() letters: m<n> (minimum percent, default
--           3), a (source excerpts, default) or A (whole files)
--
-- Two parts:
--  1. Functions: ncalls (exact), self and total time (sampled), time per
--     call (total / ncalls), in ms, most total time first. self = samples
--     whose innermost function frame is the function (native frames of
--     code that is not a counted function, ljprof's own hook among them,
--     are charged to the function below them); total = samples with the
--     function anywhere on the stack, once per sample. Shown: functions
--     with at least m percent of the samples in total time, and the 10
--     most called.
--  2. The source of those functions' files, annotated like -jp's a/A
--     ("====== file ======", "@@ n @@" excerpts with 3 lines of context):
--     ncalls and percall on the line where a function is defined; self
--     and total on every line that got samples. A line's self counts the
--     samples whose innermost Lua frame is on it (C functions it calls
--     included, as -jp's annotation does); its total the samples with the
--     line anywhere on the stack.
--
-- A Lua frame is matched to a counted function by its linedefined when it
-- has one, else by its line: the innermost counted function of its file
-- whose lines hold it. A C frame is matched by name: the counted name, or
-- the name at its call site ("rep" for string.rep). Functions that ran
-- but were entered before counting began (the main chunk) show "-" for
-- ncalls.
----------------------------------------------------------------------------

local model = require("jit.prof.model")

local format = string.format

local M = {}

-- A chunk name as the sampled frames carry it (model frames: full paths).
local function chunk_of(source)
  local c = source:sub(1, 1)
  if c == "@" or c == "=" then return source:sub(2) end
  return "[string]"
end

-- Milliseconds, short: 3 significant digits below 10, one decimal up to
-- 1000, none above.
local function ms(x)
  if x == nil then return "-" end
  if x == 0 then return "0" end
  if x >= 1000 then return format("%.0f", x) end
  if x >= 10 then return format("%.1f", x) end
  return format("%.3g", x)
end

-- Function entries from p.calls, and how to find them from frames.
local function index_calls(p)
  local ix = {entries = {}, byfile = {}, byline = {}, byname = {}, suffix = {}}
  for _, c in ipairs(p.calls or {}) do
    local e = {func = c.func, name = c.name, calls = c.calls, self = 0, total = 0,
               what = c.what}
    ix.entries[#ix.entries + 1] = e
    if c.what == "C" then
      e.label = model.builtin_name(c.func)
      ix.byname[e.label] = e
      local short = e.label:match("[.:]([^.:]+)$")
      if short then  -- ambiguous short names map to nothing
        ix.suffix[short] = ix.suffix[short] == nil and e or false
      end
    else
      e.file = chunk_of(c.source or "")
      e.linedefined, e.lastlinedefined = c.linedefined, c.lastlinedefined
      e.label = c.func
      local t = ix.byfile[e.file]
      if not t then t = {}; ix.byfile[e.file] = t end
      t[#t + 1] = e
      ix.byline[e.file .. ":" .. c.linedefined] = e
    end
  end
  return ix
end

-- The function entry of frame fr (creating one for a Lua function that
-- was not counted), or nil for a C frame that is no counted function.
local function entry_of(ix, fr, memo)
  local e = memo[fr.id]
  if e ~= nil then return e or nil end
  if fr.lua then
    if fr.linedefined then
      e = ix.byline[fr.file .. ":" .. fr.linedefined]
    else  -- named: the innermost counted function holding the line
      for _, c in ipairs(ix.byfile[fr.file] or {}) do
        if c.linedefined <= fr.line and fr.line <= c.lastlinedefined and
           (not e or c.linedefined > e.linedefined or
            (c.linedefined == e.linedefined and c.lastlinedefined < e.lastlinedefined)) then
          e = c
        end
      end
    end
    if not e then  -- ran, but was not called while counting
      local key = fr.linedefined and (fr.file .. ":" .. fr.linedefined) or
                  (fr.file .. ":" .. (fr.name or "?"))
      e = ix.byline[key]
      if not e then
        e = {self = 0, total = 0, file = fr.file, linedefined = fr.linedefined,
             name = fr.name, what = "Lua",
             label = fr.linedefined and (model.chunk(fr.file) .. ":" .. fr.linedefined)
                     or (fr.name or "?")}
        ix.byline[key] = e
        ix.entries[#ix.entries + 1] = e
      end
    end
  else
    e = ix.byname[fr.name] or ix.suffix[fr.name] or nil
  end
  memo[fr.id] = e or false
  return e
end

-- Samples per function (self, total) and per line (self, total).
local function attribute(p, ix)
  local memo, lines = {}, {}
  for _, s in ipairs(p.samples) do
    local seen, lseen, self_done, lself_done = {}, {}, false, false
    for i = #s.stack, 1, -1 do
      local fr = p.frames[s.stack[i]]
      local e = entry_of(ix, fr, memo)
      if e then
        if not self_done then e.self = e.self + s.count; self_done = true end
        if not seen[e] then seen[e] = true; e.total = e.total + s.count end
      end
      if fr.lua then
        local key = fr.file .. ":" .. fr.line
        local l = lines[key]
        if not l then
          l = {file = fr.file, line = fr.line, self = 0, total = 0}
          lines[key] = l
        end
        if not lself_done then l.self = l.self + s.count; lself_done = true end
        if not lseen[key] then lseen[key] = true; l.total = l.total + s.count end
      end
    end
  end
  return lines
end

local function fname(e)
  if e.what ~= "C" and e.name and e.name ~= e.label then
    return e.label .. " (" .. e.name .. ")"
  end
  return e.label
end

-- The functions shown: at least min percent of the samples in total
-- time, and the 10 most called.
local function shown(ix, samples, min)
  local list, pick = {}, {}
  local bycalls = {}
  for _, e in ipairs(ix.entries) do
    if (e.calls or 0) > 0 then bycalls[#bycalls + 1] = e end
    if samples > 0 and e.total * 100 / samples >= min and e.total > 0 then pick[e] = true end
  end
  table.sort(bycalls, function(a, b)
    if a.calls ~= b.calls then return a.calls > b.calls end
    return a.label < b.label
  end)
  for i = 1, math.min(10, #bycalls) do pick[bycalls[i]] = true end
  for e in pairs(pick) do list[#list + 1] = e end
  table.sort(list, function(a, b)
    if a.total ~= b.total then return a.total > b.total end
    if (a.calls or 0) ~= (b.calls or 0) then return (a.calls or 0) > (b.calls or 0) end
    return a.label < b.label
  end)
  return list
end

-- A time per call with its unit: "62.7ns", "1.45us", "30.0ms".
local function per(x_ms)
  local ns = x_ms * 1e6
  if ns < 1e3 then return format("%.3gns", ns) end
  if ns < 1e6 then return format("%.3gus", ns / 1e3) end
  if ns < 1e9 then return format("%.3gms", ns / 1e6) end
  return format("%.3gs", ns / 1e9)
end

local COLS = "%9s %9s %9s %9s"

local function columns(calls, self, total, percall)
  if type(calls) == "number" then calls = format("%.0f", calls) end
  return format(COLS, calls or "", self and ms(self) or "",
                total and ms(total) or "", percall and per(percall) or "")
end

-- The annotated source of file, lines hot[] (ann: context lines, 0 whole).
local function listing(out, file, rows, hot, ann)
  local f0 = file:byte()
  if f0 == 40 or f0 == 91 then  -- "(...)" "[string]", "[builtin:...]"
    out[#out + 1] = format("\n====== %s ======\n[Cannot annotate non-file]\n", file)
    return
  end
  local fp, err = io.open(file)
  local whole
  if fp then  -- (a directory opens, and fails to read)
    whole, err = fp:read("*a")
    fp:close()
  end
  if not whole then
    out[#out + 1] = format("\n====== ERROR: %s: %s\n", file, err)
    return
  end
  out[#out + 1] = format("\n====== %s ======\n", file)
  out[#out + 1] = format(COLS .. " |\n", "ncalls", "self ms", "total ms", "percall")
  local text = {}
  for line in whole:gmatch("([^\n]*)\n?") do text[#text + 1] = line end
  if text[#text] == "" then text[#text] = nil end
  if text[1] and text[1]:byte() == 27 then
    out[#out + 1] = "[Cannot annotate bytecode file]\n"
    return
  end
  local blank = format(COLS, "", "", "", "")
  local prev = nil  -- last line printed
  for n = 1, #text do
    local visible = ann == 0
    if not visible then
      for k = math.max(1, n - ann), n + ann do
        if hot[k] then visible = true; break end
      end
    end
    if visible then
      if ann ~= 0 and prev ~= n - 1 then out[#out + 1] = format("@@ %d @@\n", n) end
      out[#out + 1] = (rows[n] or blank) .. " | " .. text[n] .. "\n"
      prev = n
    end
  end
end

function M.render(p, meta, view)
  if type(view) ~= "table" then view = require("jit.prof.text").parse(view or "f") end
  local min = view.min or 3
  local ann = view.letters and view.letters.A and 0 or 3
  local interval_ms = (tonumber(meta and meta.interval_us) or 10000) / 1000
  local samples = p.total or 0
  local ix = index_calls(p)
  local lines = attribute(p, ix)
  local ncalls = 0
  for _, c in ipairs(p.calls or {}) do ncalls = ncalls + c.calls end
  local out = {}
  out[#out + 1] = format("Calls: %.0f counted exactly (JIT off while counting); " ..
    "time: %.0f samples of %s ms%s\n", ncalls, samples, ms(interval_ms),
    meta and meta.clock and (" (" .. meta.clock .. " clock)") or "")
  local list = shown(ix, samples, min)
  if #list == 0 then
    out[#out + 1] = "[No calls counted]\n"
    return table.concat(out)
  end
  out[#out + 1] = format(COLS .. "  %s\n", "ncalls", "self ms", "total ms", "percall",
                         "function")
  for _, e in ipairs(list) do
    local total = e.total * interval_ms
    out[#out + 1] = columns(e.calls or "-", e.self * interval_ms, total,
      e.calls and e.calls > 0 and e.total > 0 and total / e.calls or nil) .. "  " ..
      fname(e) .. "\n"
  end
  -- Annotated sources: the files of the functions shown.
  local files, rows, hot = {}, {}, {}
  local function file_of(f)
    if not rows[f] then
      rows[f], hot[f] = {}, {}
      files[#files + 1] = f
    end
  end
  local defs = {}  -- file -> line -> entries defined there
  for _, e in ipairs(list) do
    if e.file and e.linedefined and e.linedefined > 0 then  -- not main
      file_of(e.file)
      local d = defs[e.file] or {}
      defs[e.file] = d
      local ln = e.linedefined
      d[ln] = d[ln] or {}
      table.insert(d[ln], e)
      hot[e.file][ln] = true
    end
  end
  for _, l in pairs(lines) do
    if samples > 0 and (l.total * 100 / samples >= min or l.self * 100 / samples >= min) then
      file_of(l.file)
      hot[l.file][l.line] = true
    end
  end
  table.sort(files)
  for _, f in ipairs(files) do
    local r = rows[f]
    local by = {}
    for _, l in pairs(lines) do
      if l.file == f then by[l.line] = l end
    end
    local lnset = {}
    for n in pairs(hot[f]) do lnset[n] = true end
    for n in pairs(by) do lnset[n] = true end
    for n in pairs(lnset) do
      local l = by[n]
      local c, pc
      for _, e in ipairs((defs[f] or {})[n] or {}) do
        if e.calls then
          c = (c or 0) + e.calls
          pc = (pc or 0) + e.total * interval_ms
        end
      end
      if c and c > 0 and pc > 0 then pc = pc / c else pc = nil end
      if l or c then
        r[n] = columns(c, l and l.self > 0 and l.self * interval_ms,
                       l and l.total * interval_ms, pc)
      end
    end
    listing(out, f, r, hot[f], ann)
  end
  return table.concat(out)
end

return M
