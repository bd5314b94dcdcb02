----------------------------------------------------------------------------
-- jit.prof.text: LuaJIT's -jp text reports, rendered from a jit.prof.model
-- profile.
--
--   local view = text.parse("vf")     -- -jp option letters -> view
--   local s = text.render(p, view)    -- p = model.collect(...)
--
-- parse() reads the letters exactly as LuaJIT's jit/p.lua does (same
-- order, same defaults, same interplay: s, fl, vf/fv, a/A, G), and
-- render() prints exactly -jp's lines: "%2d%%  key", raw "%5d  key",
-- G "key count", second levels "  -- ", "  <- ", "  -> ", annotated
-- sources with "====== file ======" headers and "@@ n @@" excerpts.
--
-- Differences from -jp, on purpose:
-- - Letters -jp would ignore silently are an error (one line).
-- - Ties are ordered by key, so equal counts print in a stable order.
-- - Annotation: a hot line among lines 2-3 does not crash; a chunk that
--   cannot be annotated ("[string]", "=stdin", a missing file) is reported
--   and the next files are still annotated; a sample whose leaf is a C
--   function is charged to the Lua line that called it (-jp never sees a
--   C leaf: its samples arrive when the interpreter resumes there).
-- - Zones (z) come from each sample's zone field; samples without one
--   show as "(none)", as -jp shows an empty zone stack.
-- - Native frames (C code from the native unwinder, model.lua) are not
--   Lua's: f, F, l, v, z, s and annotation use the Lua frames only, so a
--   report is topped by the Lua function, not by "libm.so.6+0x702c0"
--   (math.sin, cjson.encode, the C functions Lua itself names, stay). A
--   sample with native frames only is named by its VM state in brackets
--   ("[JIT Compiler]"). G keeps them, as the stack formats do; v.native
--   = true (/native=show, ljprof --show-native) keeps them everywhere.
-- - A sample without any frame (possible in a raw profile) is "(no
--   stack)", as in the stack formats (folded, SVG, speedscope), not an
--   empty key (G printed " 123").
----------------------------------------------------------------------------

local model = require("jit.prof.model")
local options = require("jit.prof.options")

local floor, format = math.floor, string.format

local M = {}

-- The letters (jit/prof/options.lua, loaded at a run's start).
M.ACCEPTED, M.parse, M.record_depth = options.ACCEPTED, options.parse, options.record_depth

-- A sample whose frames are all native: its VM state, in brackets.
local function state_label(s)
  return "[" .. (model.VMNAMES[s.vmstate] or s.vmstate) .. "]"
end

-- The innermost Lua frame's "file:line" (full path), for annotation.
local function ann_key(p, stack, s)
  if #s.stack == 0 then return model.NO_STACK, false end
  for i = #stack, 1, -1 do
    local fr = p.frames[stack[i]]
    if fr.lua then return model.label(fr, "l", true), true end
  end
  local n = #stack
  if n == 0 and #s.stack > 0 then return state_label(s), false end
  return n > 0 and model.label(p.frames[stack[n]], "l", true) or "", false
end

-- Aggregate samples into -jp's one or two levels of keys.
local function aggregate(p, v)
  local count1, count2, nonfile = {}, {}, {}
  local keep = v.native or v.fmt == "G"  -- native frames shown
  for _, s in ipairs(p.samples) do
    local key_stack, key_stack2, key_state
    local stack = keep and s.stack or model.lua_stack(p, s.stack)
    local all_native = #stack == 0 and #s.stack > 0
    local empty = #s.stack == 0
    if v.states == "v" then
      key_state = model.VMNAMES[s.vmstate] or s.vmstate
    elseif v.states == "z" then
      key_state = (s.zone and s.zone ~= "") and s.zone or "(none)"
    end
    if v.fmt == "ann" then
      local lua
      key_stack, lua = ann_key(p, stack, s)
      if not lua then nonfile[key_stack] = true end
    elseif empty and v.fmt then
      key_stack = model.NO_STACK
      if v.split == 3 then key_stack2 = model.NO_STACK end
    elseif v.fmt == "G" then
      key_stack = model.view(p, s.stack, v.label, v.fullpath, v.depth, ";")
    elseif v.fmt then
      key_stack = all_native and state_label(s) or
                  model.view(p, stack, v.label, v.fullpath, v.depth)
      if v.split == 2 then
        local k1, k2 = key_stack:match("(.-) [<>] (.*)")
        if k2 then key_stack, key_stack2 = k1, k2 end
      elseif v.split == 3 then
        local n = #stack
        key_stack2 = all_native and state_label(s) or
                     n > 0 and model.label(p.frames[stack[n]], "l", false) or ""
      end
    end
    local k1, k2
    if v.split == 1 then
      if key_state then
        k1 = key_state
        if key_stack then k2 = key_stack end
      end
    elseif key_stack then
      k1 = key_stack
      if key_stack2 then k2 = key_stack2 elseif key_state then k2 = key_state end
    end
    if k1 then
      count1[k1] = (count1[k1] or 0) + s.count
      if k2 then
        local t = count2[k1]
        if not t then t = {}; count2[k1] = t end
        t[k2] = (t[k2] or 0) + s.count
      end
    end
  end
  return count1, count2, nonfile
end

-- Keys by count, most first; ties by key.
local function sorted(counts)
  local t = {}
  for k in pairs(counts) do t[#t + 1] = k end
  table.sort(t, function(a, b)
    if counts[a] ~= counts[b] then return counts[a] > counts[b] end
    return a < b
  end)
  return t
end

-- jit/p.lua prof_top.
local function top(out, v, count1, count2, samples, indent)
  for _, k in ipairs(sorted(count1)) do
    local n = count1[k]
    local pct = floor(n * 100 / samples + 0.5)
    if pct < v.min then break end
    if not v.raw then
      out[#out + 1] = format("%s%2d%%  %s\n", indent, pct, k)
    elseif v.raw == "r" then
      out[#out + 1] = format("%s%5d  %s\n", indent, n, k)
    else
      out[#out + 1] = format("%s %d\n", k, n)
    end
    local r = count2 and count2[k]
    if r then
      top(out, v, r, nil, n, (v.split == 3 or v.split == 1) and "  -- " or
                             (v.depth < 0 and "  -> " or "  <- "))
    end
  end
end

-- jit/p.lua prof_annotate, without its crash and its early stops.
local function annotate(out, v, count1, nonfile, samples)
  local files = {}
  local ms = 0
  for k, n in pairs(count1) do
    local pct = floor(n * 100 / samples + 0.5)
    ms = math.max(ms, n)
    if pct >= v.min then
      local file, line = k:match("^(.*):(%d+)$")
      if not file or nonfile[k] then file = k; line = 0 end
      local fl = files[file]
      if not fl then fl = {}; files[file] = fl; files[#files + 1] = file end
      fl[tonumber(line)] = v.raw and n or pct
      if nonfile[k] then fl.nonfile = true end
    end
  end
  table.sort(files)
  local fmtv, fmtn = " %3d%% | %s\n", "      | %s\n"
  if v.raw then
    local n = math.max(5, math.ceil(math.log10(ms)))
    fmtv = "%" .. n .. "d | %s\n"
    fmtn = (" "):rep(n) .. " | %s\n"
  end
  local ann = v.ann
  for _, file in ipairs(files) do
    local fl = files[file]
    local f0 = file:byte()
    local fp, err
    if f0 == 40 or f0 == 91 or fl.nonfile then
      out[#out + 1] = format("\n====== %s ======\n[Cannot annotate non-file]\n", file)
    else
      fp, err = io.open(file)
      if fp and select(2, fp:read(0)) then  -- a directory opens, then fails to read
        err = file .. ": " .. select(2, fp:read(0))
        fp:close()
        fp = nil
      end
      if not fp then out[#out + 1] = format("====== ERROR: %s: %s\n", file, err) end
    end
    if fp then
      out[#out + 1] = format("\n====== %s ======\n", file)
      -- show: false, or the last line (hot, or hot ahead) whose context
      -- is being printed. -jp starts it as true when one of lines 1..ann
      -- is hot, and true + ann then fails (hot line 2 or 3).
      local n, show = 1, false
      if ann ~= 0 then
        for i = 1, ann do
          if fl[i] then show = i; out[#out + 1] = "@@ 1 @@\n"; break end
        end
      end
      for line in fp:lines() do
        if line:byte() == 27 then
          out[#out + 1] = "[Cannot annotate bytecode file]\n"
          break
        end
        local val = fl[n]
        local visible = true
        if ann ~= 0 then
          local v2 = fl[n + ann]
          if show then
            if v2 then show = n + ann elseif val then show = n
            elseif show + ann < n then show = false end
          elseif v2 then
            show = n + ann
            out[#out + 1] = format("@@ %d @@\n", n)
          end
          visible = show and true or false
        end
        if visible then
          if val then out[#out + 1] = format(fmtv, val, line)
          else out[#out + 1] = format(fmtn, line) end
        end
        n = n + 1
      end
      fp:close()
    end
  end
end

-- The report of profile p (model.collect) for view v (parse) as a string.
function M.render(p, v)
  if type(v) ~= "table" then v = M.parse(v) end
  local out = {}
  local samples = p.total
  if samples == 0 then
    return v.raw ~= true and "[No samples collected]\n" or ""
  end
  local count1, count2, nonfile = aggregate(p, v)
  if v.ann then
    annotate(out, v, count1, nonfile, samples)
  else
    top(out, v, count1, count2, samples, "")
  end
  return table.concat(out)
end

return M
