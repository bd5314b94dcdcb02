----------------------------------------------------------------------------
-- jit.prof.model: ljprof's profile as structured frames, and the names
-- LuaJIT's -jp gives them.
--
-- The high-level profiler (jit/prof.lua) records every sample with one
-- structured stack key, whatever view is asked for; views (-jp text with
-- f/F/l/p and any depth, folded stacks, speedscope, pprof, SVG) are
-- rendered from it afterwards, so one recording serves every format.
--
-- The key is a dumpstack format whose frames are "<f>\31<l>", joined by
-- "\30", outermost first, with full paths: <f> is the function's name (or
-- chunk:firstline when it has none), <l> its chunk:currentline; C and
-- builtin frames print the same text in both. Control bytes cannot occur
-- in chunk or function names, so the key splits unambiguously.
--
-- A run is read either from its summary() keyed with KEY_FMT (collect),
-- or, as jit/prof.lua does, from ljprof.profile(), which hands over
-- structured frames (from_profile): then a named Lua function keeps its
-- first line too (a dumpstack key keeps its name or its first line, not
-- both), so that two functions of one name stay apart (names(),
-- pprof_name()). Samples may carry labels ({key = value}, ljprof.label).
--
-- Native frames (the C code running above the Lua frame that called it,
-- from the native unwinder: "libm.so.6+0x702c0", "fpconv_g_fmt") print
-- their name once, at the frame's first f/F/l (src/dumpstack.c): <f> is
-- the name, <l> is empty; every other frame has a non-empty <l>. They are always the innermost frames. A C
-- function as Lua names it ("math.sin", "cjson.encode", "[builtin#N]")
-- is not native. Stack formats keep native frames; -jp text views show
-- the Lua frames only (lua_stack), unless asked to show them.
----------------------------------------------------------------------------

local options = require("jit.prof.options")

local M = {}

-- the key's separators and sizes, and the formats (jit/prof/options.lua)
M.FIELD, M.FRAME = options.FIELD, options.FRAME
M.KEY_FMT = options.KEY_FMT
M.MAX_DEPTH = options.MAX_DEPTH
M.NATIVE_MAX = options.NATIVE_MAX
M.FORMATS = options.FORMATS
M.extension, M.format_for = options.extension, options.format_for

local vmdef_ok, vmdef = pcall(require, "jit.vmdef")
local ffnames = vmdef_ok and vmdef.ffnames or {}

-- The frame of a sample without any (folded, SVG, speedscope, text).
M.NO_STACK = "(no stack)"

M.VMNAMES = {
  N = "Compiled", I = "Interpreted", C = "C code",
  G = "Garbage Collector", J = "JIT Compiler",
}

-- [builtin#N] -> the library name LuaJIT gives fast function N.
function M.builtin_name(s)
  return (s:gsub("%[builtin#(%d+)%]", function(n)
    return ffnames[tonumber(n)] or ("[builtin#" .. n .. "]")
  end))
end

-- One frame from its two fields: {lua = true, file=, line=, name= or
-- linedefined=} for Lua code, {lua = false, name=} for C and builtins,
-- {lua = false, native = true, name=} for native frames (empty <l>).
function M.parse_frame(f, l)
  if l == "" and f ~= "" then return {lua = false, native = true, name = f} end
  local file, line = l:match("^(.*):(%-?%d+)$")
  if file and l:sub(1, 1) ~= "@" and l:sub(1, 9) ~= "[builtin#" then
    local fr = {lua = true, file = file, line = tonumber(line)}
    local rest = f:sub(#file + 2)
    if f:sub(1, #file + 1) == file .. ":" and rest:match("^%-?%d+$") then
      fr.linedefined = tonumber(rest)
    else
      fr.name = f
    end
    return fr
  end
  return {lua = false, name = M.builtin_name(f)}
end

-- The profile of the current (or last) ljprof run, from summary() entries
-- keyed with KEY_FMT: frames (unique, by id) and samples, each
-- {stack = {frame ids, outermost first}, vmstate=, zone=, count=}.
function M.collect(entries)
  local p = {frames = {}, samples = {}, total = 0}
  local index = {}
  for _, e in ipairs(entries) do
    local stack = {}
    if e.stack ~= "" then
      for fr in (e.stack .. M.FRAME):gmatch("(.-)" .. M.FRAME) do
        local id = index[fr]
        if not id then
          local f, l = fr:match("^(.-)" .. M.FIELD .. "(.*)$")
          local frame = M.parse_frame(f or fr, l or fr)
          id = #p.frames + 1
          frame.id = id
          p.frames[id] = frame
          index[fr] = id
        end
        stack[#stack + 1] = id
      end
    end
    p.samples[#p.samples + 1] = {stack = stack, vmstate = e.vmstate,
                                 zone = e.zone or "", labels = e.labels, count = e.count}
    p.total = p.total + e.count
  end
  return p
end

-- A sample's labels as one string (sorted pairs), "" for none: samples
-- that differ only in labels are kept apart by it.
function M.labels_key(labels)
  if not labels then return "" end
  local t = {}
  for k, v in pairs(labels) do t[#t + 1] = tostring(k) .. "\0" .. tostring(v) end
  table.sort(t)
  return table.concat(t, "\0")
end

-- The profile of ljprof.profile() (structured frames, see
-- src/lua_ljprof.c): frames are merged by content (the store keeps C
-- functions by entry point, which name alike), samples that are then
-- equal are merged, most samples first. t's samples are reused (their
-- stacks renumbered in place): t is not to be read after.
function M.from_profile(t)
  local p = {frames = {}, samples = {}, total = 0}
  local of, index = {}, {}
  for i, f in ipairs(t.frames or {}) do
    local fr, k
    if f.kind == "lua" then
      fr = {lua = true, file = f.file, line = f.line, linedefined = f.linedefined,
            name = f.name}
      k = "L\0" .. f.file .. "\0" .. f.line .. "\0" .. f.linedefined .. "\0" ..
          (f.name or "")
    elseif f.kind == "native" then
      fr = {lua = false, native = true, name = f.name}
      k = "N\0" .. f.name
    else
      fr = {lua = false, name = M.builtin_name(f.name)}
      k = "C\0" .. fr.name
    end
    local id = index[k]
    if not id then
      id = #p.frames + 1
      fr.id = id
      p.frames[id] = fr
      index[k] = id
    end
    of[i] = id
  end
  -- Equal samples are found by sorting them by content, then merged: a
  -- profile of tens of thousands of stacks gets no string key, hash entry
  -- or second table per sample, and no field is added to a sample (which
  -- would double its hash part). Frames renumbered first.
  local samples = t.samples or {}
  t.samples = nil
  local lkeys = {}       -- labels table -> labels_key (tables are shared)
  local function lkey(l)
    if not l then return "" end
    local k = lkeys[l]
    if not k then k = M.labels_key(l) lkeys[l] = k end
    return k
  end
  for _, s in ipairs(samples) do
    local stack = s.stack
    for i = 1, #stack do stack[i] = of[stack[i]] end
    if not s.zone then s.zone = "" end
  end
  -- content order: stack (frame ids, outermost first), VM state, zone, labels
  local function cmp(a, b)
    local sa, sb = a.stack, b.stack
    local na, nb = #sa, #sb
    for i = 1, na < nb and na or nb do
      local x, y = sa[i], sb[i]
      if x ~= y then return x < y and -1 or 1 end
    end
    if na ~= nb then return na < nb and -1 or 1 end
    if a.vmstate ~= b.vmstate then return a.vmstate < b.vmstate and -1 or 1 end
    if a.zone ~= b.zone then return a.zone < b.zone and -1 or 1 end
    local la, lb = lkey(a.labels), lkey(b.labels)
    if la ~= lb then return la < lb and -1 or 1 end
    return 0
  end
  table.sort(samples, function(a, b) return cmp(a, b) < 0 end)
  local out, last = p.samples, nil
  for _, s in ipairs(samples) do
    if last and cmp(last, s) == 0 then
      last.count = last.count + s.count
    else
      out[#out + 1] = s
      last = s
    end
    p.total = p.total + s.count
  end
  samples = nil
  table.sort(out, function(a, b)   -- most samples first, then by content
    if a.count ~= b.count then return a.count > b.count end
    return cmp(a, b) < 0
  end)
  return p
end

-- -- One function, one name ------------------------------------------------
-- A Lua frame is its prototype: chunk and first line. Names come from where
-- a sample found the function called (LuaJIT's call-site name: a field, a
-- method, a local, none for pcall'd or coroutine functions, the caller's
-- call for a tail call), so one prototype may carry several names, or
-- sometimes none, in one profile and across runs. unify_names gives each
-- prototype one name in every frame (and every call count) of p, by a
-- stable rule:
--   1. with opts.source (the writer in the profiled process, where the
--      chunk's file can be read): the name the source gives it on its
--      first line ("local function NAME", "function a.b:NAME", "NAME =
--      function", "[\"NAME\"] = function"; the last component); none when
--      that line defines no function by name or defines several;
--   2. else, of the names samples found it by, the first in byte order
--      (not the most frequent: counts differ from run to run, and a name
--      chosen by them flips between runs);
--   3. else none (chunk:firstline).
-- Frames that then are equal are merged and samples that then are equal
-- too. Named frames without a first line (summary keys) are left alone.

-- The name the source gives the function whose first line is text, or
-- nil.
function M.def_name(text)
  if not text then return nil end
  local code = text:gsub("%-%-.*$", "")
  local n = 0
  for _ in code:gmatch("%f[%w_]function%f[^%w_]") do n = n + 1 end
  if n ~= 1 then return nil end
  local path = code:match("%f[%w_]function%s+([%a_][%w_]*[%w_.:]*)%s*%(")
  if path then return path:match("([%a_][%w_]*)$") end
  local lhs = code:match("([%a_][%w_]*)%s*=%s*function%f[^%w_]")
  if lhs then return lhs end
  return code:match("%[%s*[\"']([%a_][%w_]*)[\"']%s*%]%s*=%s*function%f[^%w_]")
end

-- The lines of file (a chunk name as frames carry it) whose numbers are
-- keys of want, as {[line] = text}; nil when the file cannot be read, or
-- is not a regular file by regular(file) (a FIFO or a terminal would
-- block the writer). At most 8 MB read.
local function read_lines(file, want, regular)
  if regular and not regular(file) then return nil end
  local f = io.open(file, "rb")
  if not f then return nil end
  local data = f:read(8e6) or ""
  f:close()
  local maxl = 0
  for l in pairs(want) do if l > maxl then maxl = l end end
  local got, n = {}, 0
  for text in (data .. "\n"):gmatch("([^\n]*)\n") do
    n = n + 1
    if want[n] then got[n] = (text:gsub("\r$", "")) end
    if n >= maxl then break end
  end
  return got
end

function M.unify_names_all(list, opts)
  opts = opts or {}
  local protos, order = {}, {}  -- "file\0linedefined" -> {names = {name -> samples}}
  local function proto(file, ld)
    local k = file .. "\0" .. ld
    local g = protos[k]
    if not g then
      g = {file = file, ld = ld, names = {}}
      protos[k] = g
      order[#order + 1] = g
    end
    return g
  end
  for _, p in ipairs(list) do
    local weight = {}           -- frame id -> samples
    for _, s in ipairs(p.samples) do
      for _, id in ipairs(s.stack) do weight[id] = (weight[id] or 0) + s.count end
    end
    for id, fr in ipairs(p.frames) do
      if fr.lua and fr.linedefined and fr.file then
        local g = proto(fr.file, fr.linedefined)
        if fr.name then g.names[fr.name] = (g.names[fr.name] or 0) + (weight[id] or 0) end
      end
    end
  end
  local function calls_file(c)
    local src = c.source or ""
    local ch = src:sub(1, 1)
    if ch == "@" or ch == "=" then return src:sub(2) end
    return "[string]"
  end
  for _, p in ipairs(list) do
    for _, c in ipairs(p.calls or {}) do
      if c.what ~= "C" and c.linedefined and c.linedefined >= 0 and c.source then
        local g = proto(calls_file(c), c.linedefined)
        if c.name and not g.names[c.name] then g.names[c.name] = 0 end
      end
    end
  end
  -- 1. the source's names, per file
  if opts.source then
    local byfile = {}
    for _, g in ipairs(order) do
      if g.ld > 0 and g.file:sub(1, 1) ~= "[" and g.file:sub(1, 1) ~= "=" then
        local w = byfile[g.file]
        if not w then w = {}; byfile[g.file] = w end
        w[g.ld] = true
      end
    end
    for file, want in pairs(byfile) do
      local lines = read_lines(file, want, opts.regular)
      if lines then
        for ld in pairs(want) do
          local name = M.def_name(lines[ld])
          if name then protos[file .. "\0" .. ld].chosen = name end
        end
      end
    end
  end
  -- 2. the first in byte order of the names found
  for _, g in ipairs(order) do
    if not g.chosen then
      local best
      for name in pairs(g.names) do
        if not best or name < best then best = name end
      end
      g.chosen = best
    end
  end
  local changed = false
  for _, p in ipairs(list) do
    if M.rename_merge(p, protos, calls_file) then changed = true end
    M.rename_functions(p, protos)
  end
  return changed
end

-- p.functions and p.aborts name a Lua function "chunk:firstline" (the
-- chunk's last path component): "chunk:name" when its prototype has a name
-- (and no other file of that last component has a function there), the
-- -jp F label; functions that then are equal are merged.
function M.rename_functions(p, protos)
  if not p.functions and not p.aborts then return end
  local by = {}
  for _, g in pairs(protos) do
    local k = M.chunk(g.file) .. ":" .. g.ld
    by[k] = by[k] == nil and g or false
  end
  local function name_of(func)
    local g = by[func]
    if g and g.chosen and func:match(":%d+$") then
      return M.chunk(g.file) .. ":" .. g.chosen
    end
    return func
  end
  if p.functions then
    local out, at = {}, {}
    for _, f in ipairs(p.functions) do
      f.func = name_of(f.func)
      local e = at[f.func]
      if e then
        for _, k in ipairs({"total", "N", "I", "C", "G", "J"}) do
          e[k] = (e[k] or 0) + (f[k] or 0)
        end
      else
        at[f.func] = f
        out[#out + 1] = f
      end
    end
    p.functions = out
  end
  for _, a in ipairs(p.aborts or {}) do a.func = name_of(a.func) end
end

-- Rename p's frames and calls to their prototype's chosen name, then merge
-- equal frames and equal samples; true if anything changed.
function M.rename_merge(p, protos, calls_file)
  local index, of, frames = {}, {}, {}
  local changed = false
  for id, fr in ipairs(p.frames) do
    if fr.lua and fr.linedefined and fr.file then
      local name = protos[fr.file .. "\0" .. fr.linedefined].chosen
      if name ~= fr.name then fr.name = name; changed = true end
    end
    if not fr.lua and fr.name then fr.name = M.drop_version(fr.name) end
    local k
    if fr.lua then
      k = "L\0" .. fr.file .. "\0" .. tostring(fr.line) .. "\0" .. tostring(fr.linedefined) ..
          "\0" .. (fr.name or "")
    else
      k = (fr.native and "N\0" or "C\0") .. tostring(fr.name)
    end
    local nid = index[k]
    if not nid then
      nid = #frames + 1
      frames[nid] = fr
      index[k] = nid
    end
    of[id] = nid
  end
  for _, c in ipairs(p.calls or {}) do
    if c.what ~= "C" and c.linedefined and c.source then
      local g = protos[calls_file(c) .. "\0" .. c.linedefined]
      if g and g.chosen then c.name = g.chosen end
    end
  end
  if #frames == #p.frames then return changed end
  -- (copies: another profile may share these frame objects)
  for nid, fr in ipairs(frames) do
    local c = {}
    for f, v in pairs(fr) do c[f] = v end
    c.id = nid
    frames[nid] = c
  end
  p.frames = frames
  p.keyers = nil
  local by, samples = {}, {}
  for _, s in ipairs(p.samples) do
    local st = s.stack
    for i = 1, #st do st[i] = of[st[i]] end
    local k = table.concat(st, ",") .. "\0" .. tostring(s.vmstate) .. "\0" ..
              tostring(s.zone or "") .. "\0" .. M.labels_key(s.labels)
    local e = by[k]
    if e then
      e.count = e.count + s.count
    else
      by[k] = s
      samples[#samples + 1] = s
    end
  end
  p.samples = samples
  return true
end


-- A symbol's version is not part of its name, as perf shows it:
-- "clock_nanosleep@@GLIBC_2.17" -> "clock_nanosleep" (a PLT stub keeps its
-- "@plt"; "@0x..." is an address, not a version).
function M.drop_version(name)
  local base, ver = name:match("^([^@]+)(@@?[%w_.]+)$")
  if base and ver ~= "@plt" then return base end
  base = name:match("^([^@]+)@@?[%w_.]+@plt$")
  if base then return base .. "@plt" end
  return name
end

-- One profile (p itself, changed in place; see above). Returns p.
function M.unify_names(p, opts)
  M.unify_names_all({p}, opts)
  return p
end

-- Is fr code of the interpreter or of the host program that has no name
-- ("luajit+0x92c0": luajit's pmain, below the main chunk; "host+0x1234",
-- "@0x7f...")? It is no Lua function: not shown in Lua views. A shared
-- object's unnamed code ("libfoo.so+0x10") is a C function and stays.
function M.unnamed_code(fr)
  if fr.lua or fr.native or not fr.name then return false end
  local name = fr.name
  if name:find("^@0x%x+$") then return true end
  local obj = name:match("^([^/+]+)%+0x%x+$")
  return obj ~= nil and not obj:find("%.so")
end

-- The Lua side of a sample, for -jp text views and the diff's rows: stack
-- without the native frames on top (they are always innermost) and
-- without unnamed code of the interpreter or host (M.unnamed_code). stack
-- itself when it has none.
function M.lua_stack(p, stack)
  local n = #stack
  local frames = p.frames
  while n > 0 and frames[stack[n]].native do n = n - 1 end
  local drop = false
  for i = 1, n do
    if M.unnamed_code(frames[stack[i]]) then drop = true break end
  end
  if n == #stack and not drop then return stack end
  local t = {}
  for i = 1, n do
    if not (drop and M.unnamed_code(frames[stack[i]])) then t[#t + 1] = stack[i] end
  end
  return t
end

-- Text for the writers whose formats require UTF-8 (SVG, speedscope,
-- pprof: XML, JSON and proto3 strings): each byte of s that is not part of
-- a well-formed UTF-8 sequence (RFC 3629: no overlongs, surrogates or code
-- points above U+10FFFF) becomes U+FFFD; with controls, C0 control bytes
-- and DEL too (XML 1.0 allows none of them). One pass, linear in #s.
local REPLACEMENT = "\239\191\189"   -- U+FFFD
M.REPLACEMENT = REPLACEMENT

function M.utf8(s, controls)
  s = tostring(s)
  if not s:find(controls and "[%z\1-\31\127-\255]" or "[\128-\255]") then return s end
  local byte, sub = string.byte, string.sub
  local out, start, i, n = {}, 1, 1, #s
  while i <= n do
    local c = byte(s, i)
    local len, lo, hi = 0, 0x80, 0xBF    -- bounds of the second byte
    if c < 0x80 then len = (controls and (c < 32 or c == 127)) and 0 or 1
    elseif c >= 0xC2 and c <= 0xDF then len = 2
    elseif c >= 0xE0 and c <= 0xEF then
      len = 3
      if c == 0xE0 then lo = 0xA0 elseif c == 0xED then hi = 0x9F end
    elseif c >= 0xF0 and c <= 0xF4 then
      len = 4
      if c == 0xF0 then lo = 0x90 elseif c == 0xF4 then hi = 0x8F end
    end
    local ok = len > 0 and i + len - 1 <= n
    if ok and len > 1 then
      local c2 = byte(s, i + 1)
      ok = c2 >= lo and c2 <= hi
      for k = i + 2, i + len - 1 do
        local ck = byte(s, k)
        if ck < 0x80 or ck > 0xBF then ok = false end
      end
    end
    if ok then
      i = i + len
    else
      if start < i then out[#out + 1] = sub(s, start, i - 1) end
      out[#out + 1] = REPLACEMENT
      i = i + 1
      start = i
    end
  end
  if start <= n then out[#out + 1] = sub(s, start, n) end
  return table.concat(out)
end

-- A frame label for folded stacks (the folded format and -jp's G view):
-- ";" (the frame separator) becomes ",", and every control character (C0,
-- DEL: a CR or LF would end the line, a TAB is read as a separator by
-- some tools) a space, so that every line splits unambiguously.
local FOLD = {[";"] = ","}
function M.folded_label(s)
  return (s:gsub("[;%z\1-\31\127]", function(c) return FOLD[c] or " " end))
end

-- A chunk name as dumpstack prints it: up to the last / or \ removed,
-- unless full paths are asked for.
function M.chunk(file, fullpath)
  if fullpath then return file end
  return file:match("[^/\\]*$")
end

-- A frame's label in a -jp view: scope "f" (function), "F" (function with
-- chunk prefix) or "l" (line).
function M.label(fr, scope, fullpath)
  if not fr.lua then return fr.name end
  local chunk = M.chunk(fr.file, fullpath)
  if scope == "l" then return chunk .. ":" .. fr.line end
  if fr.name then
    return scope == "F" and (chunk .. ":" .. fr.name) or fr.name
  end
  return chunk .. ":" .. (fr.linedefined or "?")
end

-- The last k components of a path ("luacheck/main.lua" for k = 2 of
-- "/usr/share/lua/5.1/luacheck/main.lua"); the whole path when it has no
-- more.
function M.path_suffix(file, k)
  local parts = {}
  for c in file:gmatch("[^/\\]+") do parts[#parts + 1] = c end
  if k >= #parts then return file end
  return table.concat(parts, "/", #parts - k + 1)
end

-- A Lua function's qualified name: "run (luacheck/main.lua:120)", or
-- "luacheck/main.lua:120" without a name; loc is the file as shown.
local function qualified(fr, loc)
  local at = loc .. (fr.linedefined and (":" .. fr.linedefined) or "")
  if fr.name then return fr.name .. " (" .. at .. ")" end
  return at
end

-- A function's name in pprof: Lua functions always qualified with the
-- last two components of their file and their first line ("run
-- (luacheck/main.lua:120)"), so that the name is the same in every
-- profile of the program (fleet tools merge profiles by name, and go tool
-- pprof -top merges functions of one name); C functions by name.
function M.pprof_name(fr)
  if not fr.lua then return fr.name end
  return qualified(fr, M.path_suffix(fr.file, 2))
end

-- Frame labels for the stack formats (folded, SVG, speedscope): -jp's
-- label in scope "f" or "F" (M.label), except that a label two different
-- Lua functions would share is qualified, for each of them, with the
-- shortest end of its file's path that tells them apart and its first
-- line: "run (check.lua:12)" and "run (format.lua:40)" where "run" alone
-- would merge them; a name used once stays bare. Returns frame id ->
-- label. Scope "l" (lines) labels are returned unchanged.
function M.names(p, scope, fullpath)
  scope = scope or "f"
  local base, groups, ident = {}, {}, {}
  for id, fr in ipairs(p.frames) do
    local b = M.label(fr, scope, fullpath)
    base[id] = b
    if fr.lua and scope ~= "l" then
      local k = fr.file .. "\0" .. tostring(fr.linedefined) .. "\0" .. (fr.name or "")
      ident[id] = k
      local g = groups[b]
      if not g then g = {n = 0, of = {}, list = {}}; groups[b] = g end
      if not g.of[k] then
        g.of[k] = fr
        g.n = g.n + 1
        g.list[g.n] = k
      end
    end
  end
  local qual = {}
  for _, g in pairs(groups) do
    if g.n > 1 then
      for _, k in ipairs(g.list) do
        local fr, loc = g.of[k], nil
        for depth = 1, 64 do
          loc = fullpath and fr.file or M.path_suffix(fr.file, depth)
          local clash = false
          for _, k2 in ipairs(g.list) do
            local o = g.of[k2]
            if k2 ~= k and o.linedefined == fr.linedefined and
               (fullpath and o.file or M.path_suffix(o.file, depth)) == loc then
              clash = true
              break
            end
          end
          if not clash or loc == fr.file then break end
        end
        qual[k] = qualified(fr, loc)
      end
    end
  end
  local names = {}
  for id in ipairs(p.frames) do
    names[id] = ident[id] and qual[ident[id]] or base[id]
  end
  return names
end

-- The -jp key of a stack: depth > 0 keeps the innermost depth frames,
-- innermost first, joined by " < "; depth < 0 keeps the innermost -depth
-- frames, outermost first, joined by " > ". sep overrides the separator.
-- Keys of label sequences, for aggregating thousands of stacks of dozens
-- of frames: labels[id] is each frame's label. Frames that label alike
-- (the same function at other lines) share a number, and a sequence of
-- numbers leads through a tree of tables (keyed by number; a node's [0]
-- is its string) to its string, made once per distinct sequence. No long
-- string is then made or hashed per sample (LuaJIT hashes long strings by
-- a few of their bytes, and similar stacks collide), and the walk
-- compiles.
function M.keyer(labels, sep)
  local num, by = {}, {}
  for id, l in pairs(labels) do
    local u = by[l]
    if not u then
      u = #num + 1
      num[u] = l
      by[l] = u
    end
    labels[id] = u    -- (reused: id -> number)
  end
  local root = {}
  -- The key of frames lo..hi (step) of stack.
  return function(stack, lo, hi, step)
    local node = root
    for i = lo, hi, step do
      local u = labels[stack[i]]
      local nx = node[u]
      if not nx then
        nx = {}
        node[u] = nx
      end
      node = nx
    end
    local k = node[0]
    if not k then
      local t = {}
      for i = lo, hi, step do t[#t + 1] = num[labels[stack[i]]] end
      k = table.concat(t, sep)
      node[0] = k
    end
    return k
  end
end


-- The -jp key of a stack: depth > 0 keeps the innermost depth frames,
-- innermost first, joined by " < "; depth < 0 keeps the innermost -depth
-- frames, outermost first, joined by " > ". sep overrides the separator.
-- Keys are made by a keyer kept in p.keyers per view (frames added to p
-- after a first call would have no label: views are made once the
-- profile is complete).
function M.view(p, stack, scope, fullpath, depth, sep)
  local n = #stack
  sep = sep or (depth > 0 and " < " or " > ")
  local ck = scope .. (fullpath and "+" or "") .. sep
  local keyers = p.keyers
  if not keyers then
    keyers = {}
    p.keyers = keyers
  end
  local key = keyers[ck]
  if not key then
    local labels = {}
    for id, fr in ipairs(p.frames) do labels[id] = M.label(fr, scope, fullpath) end
    if sep == ";" then   -- G: folded stacks
      for id, l in ipairs(labels) do labels[id] = M.folded_label(l) end
    end
    key = M.keyer(labels, sep)
    keyers[ck] = key
  end
  if depth > 0 then return key(stack, n, math.max(1, n - depth + 1), -1) end
  return key(stack, math.max(1, n + depth + 1), n, 1)
end

-- The profile with each sample's zone as its outermost frame, named
-- "[zone NAME]" (samples without a zone unchanged): flame graphs, folded
-- stacks, speedscope and pprof then group the time by subsystem first.
function M.with_zones(p)
  local q = {frames = {}, samples = {}, total = p.total}
  local zid = {}
  for i, fr in ipairs(p.frames) do q.frames[i] = fr end
  for _, s in ipairs(p.samples) do
    local stack = s.stack
    if s.zone and s.zone ~= "" then
      local id = zid[s.zone]
      if not id then
        id = #q.frames + 1
        q.frames[id] = {id = id, lua = false, name = "[zone " .. s.zone .. "]"}
        zid[s.zone] = id
      end
      stack = {id}
      for i = 1, #s.stack do stack[i + 1] = s.stack[i] end
    end
    q.samples[#q.samples + 1] = {stack = stack, vmstate = s.vmstate, zone = s.zone,
                                 labels = s.labels, count = s.count}
  end
  return q
end

-- Output formats (M.FORMATS): module jit.prof.<name> provides
-- render(p, meta) -> file content (p from collect() or from_profile(),
-- meta = {clock=, interval_us=, program=, samples=, dropped=, created=
-- (Unix seconds of the start), duration_ns=, thread=, thread_id=,
-- state=}). The writer module of a format, or nil and one line saying
-- why.
-- Equal stacks merged by sorting, with no key string or hash entry per
-- stack (memory at stop: docs/performance.md). stacks[i] is an array of
-- ids, counts[i] its count; num(id) the number two ids compare by.
-- Returns the groups in the order of those numbers: each group's stack
-- (its earliest member's) and its summed count.
function M.group_stacks(stacks, counts, num)
  local function cmp(a, b)
    local na, nb = #a, #b
    for i = 1, na < nb and na or nb do
      local x, y = num(a[i]), num(b[i])
      if x ~= y then return x < y and -1 or 1 end
    end
    return na == nb and 0 or (na < nb and -1 or 1)
  end
  local pos = {}
  for i = 1, #stacks do pos[i] = i end
  table.sort(pos, function(i, j) return cmp(stacks[i], stacks[j]) < 0 end)
  local rep, sums = {}, {}
  local k, n = 1, #pos
  while k <= n do
    local first, c, low = stacks[pos[k]], counts[pos[k]], pos[k]
    local j = k + 1
    while j <= n and cmp(first, stacks[pos[j]]) == 0 do
      c = c + counts[pos[j]]
      if pos[j] < low then low = pos[j] end
      j = j + 1
    end
    rep[#rep + 1] = stacks[low]
    sums[#rep] = c
    k = j
  end
  return rep, sums
end

function M.renderer(fmt)
  local ok, mod = pcall(require, "jit.prof." .. fmt)
  if not ok then
    local why = tostring(mod):match("^[^\n]*"):gsub(":$", "")
    return nil, "format " .. fmt .. " is not available (" .. why .. ")"
  end
  if type(mod) ~= "table" or type(mod.render) ~= "function" then
    return nil, "format " .. fmt .. " is not available (module jit.prof." ..
      fmt .. " has no render function)"
  end
  return mod
end

return M
