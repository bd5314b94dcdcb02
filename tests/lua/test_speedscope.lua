-- jit.prof.speedscope: the speedscope JSON of a synthetic profile and of a
-- real one (a deterministic workload recorded with the wall clock), checked
-- from Lua (structure, root-first stacks, weights) and imported with
-- speedscope's own importer (npm package speedscope, run by node).
local t = require("t")
local ljprof = require("ljprof")
local model = require("jit.prof.model")
local speedscope = require("jit.prof.speedscope")

local FR, FI = model.FRAME, model.FIELD

local write = t.write

local read = t.read

-- os.execute's success, as LuaJIT (status) or 5.2 compat (true) reports it.
local function sh(cmd)
  local r = os.execute(cmd)
  return r == 0 or r == true
end

local function hex(s)
  return (s:gsub(".", function(c) return string.format("%02x", c:byte()) end))
end

------------------------------------------------------------------------
-- A small JSON decoder (strict enough to catch what the writer could get
-- wrong: escapes, commas, numbers).
local function decode(s)
  local pos = 1
  local function err(msg) error(string.format("JSON: %s at byte %d: %q", msg, pos, s:sub(pos, pos + 20)), 0) end
  local function ws() pos = s:find("[^ \t\r\n]", pos) or #s + 1 end
  local function utf8(cp)
    if cp < 0x80 then return string.char(cp) end
    if cp < 0x800 then return string.char(0xC0 + math.floor(cp / 64), 0x80 + cp % 64) end
    if cp < 0x10000 then
      return string.char(0xE0 + math.floor(cp / 4096), 0x80 + math.floor(cp / 64) % 64, 0x80 + cp % 64)
    end
    return string.char(0xF0 + math.floor(cp / 262144), 0x80 + math.floor(cp / 4096) % 64,
      0x80 + math.floor(cp / 64) % 64, 0x80 + cp % 64)
  end
  local value
  local function str()
    pos = pos + 1
    local out = {}
    while true do
      local c = s:sub(pos, pos)
      if c == "" then err("unterminated string") end
      if c == '"' then pos = pos + 1; break end
      if c:byte() < 32 then err("raw control character in string") end
      if c == "\\" then
        local e = s:sub(pos + 1, pos + 1)
        local simple = ({['"'] = '"', ["\\"] = "\\", ["/"] = "/", b = "\b", f = "\f", n = "\n", r = "\r", t = "\t"})[e]
        if simple then
          out[#out + 1] = simple; pos = pos + 2
        elseif e == "u" then
          local h = s:sub(pos + 2, pos + 5)
          if not h:match("^%x%x%x%x$") then err("bad \\u escape") end
          local cp = tonumber(h, 16)
          pos = pos + 6
          if cp >= 0xD800 and cp <= 0xDBFF and s:sub(pos, pos + 1) == "\\u" then
            local lo = tonumber(s:sub(pos + 2, pos + 5), 16)
            cp = 0x10000 + (cp - 0xD800) * 1024 + (lo - 0xDC00)
            pos = pos + 6
          end
          out[#out + 1] = utf8(cp)
        else
          err("bad escape")
        end
      else
        out[#out + 1] = c; pos = pos + 1
      end
    end
    return table.concat(out)
  end
  function value()
    ws()
    local c = s:sub(pos, pos)
    if c == "{" then
      local o = {}
      pos = pos + 1; ws()
      if s:sub(pos, pos) == "}" then pos = pos + 1; return o end
      while true do
        ws()
        if s:sub(pos, pos) ~= '"' then err("object key expected") end
        local k = str(); ws()
        if s:sub(pos, pos) ~= ":" then err("':' expected") end
        pos = pos + 1
        o[k] = value(); ws()
        local d = s:sub(pos, pos); pos = pos + 1
        if d == "}" then return o end
        if d ~= "," then err("',' or '}' expected") end
      end
    elseif c == "[" then
      local a = {}
      pos = pos + 1; ws()
      if s:sub(pos, pos) == "]" then pos = pos + 1; return a end
      while true do
        a[#a + 1] = value(); ws()
        local d = s:sub(pos, pos); pos = pos + 1
        if d == "]" then return a end
        if d ~= "," then err("',' or ']' expected") end
      end
    elseif c == '"' then
      return str()
    elseif s:find("^true", pos) then pos = pos + 4; return true
    elseif s:find("^false", pos) then pos = pos + 5; return false
    elseif s:find("^null", pos) then pos = pos + 4; return nil
    else
      local n = s:match("^-?%d+%.?%d*[eE]?[-+]?%d*", pos)
      if not n or not tonumber(n) then err("value expected") end
      pos = pos + #n
      return tonumber(n)
    end
  end
  local v = value(); ws()
  if pos <= #s then err("trailing data") end
  return v
end

------------------------------------------------------------------------
-- Speedscope's importer, run by node from the npm package speedscope.
--
-- The package ships only the web app: one esbuild browser bundle
-- (dist/release/speedscope-<hash>.js) and the file format's JSON schema.
-- The bundle is run in a node vm context with the few browser globals it
-- touches at load time. Its import module (the one whose exports are
-- importProfileGroupFromText, importProfilesFromArrayBuffer, ...) is
-- defined through esbuild's export helper, i.e. Object.defineProperty with
-- the export names as keys, which is how the script finds it. The UI start
-- (render into document.body, the last statement) is stopped by a
-- document.body getter that throws a marker error; any other error fails.
-- importProfileGroupFromText(name, text) is then the code path of opening
-- a file in speedscope: format detection (by $schema, as the name does not
-- end in .speedscope.json) and the speedscope JSON importer.
-- The script: tests/speedscope_import.js (shared with the Windows test
-- tests/windows/outputs.py).
local NODE_CHECK = (os.getenv("LJPROF_SRC") or ".") .. "/tests/speedscope_import.js"

local build = os.getenv("LJPROF_BUILD") or
  ((os.getenv("LJPROF_SRC") or ".") .. "/build")
local NPM_DIR = build .. "/npm"
local node_ready   -- nil: not tried, else true or an error message

-- node, npm and the package (installed once into the build directory).
local function ensure_node()
  if node_ready ~= nil then return node_ready end
  if not sh("command -v node >/dev/null 2>&1") or not sh("command -v npm >/dev/null 2>&1") then
    node_ready = "node and npm are required to check the file with speedscope's importer " ..
      "(apt-get install nodejs npm)"
    return node_ready
  end
  local schema = NPM_DIR .. "/node_modules/speedscope/dist/release/file-format-schema.json"
  if not read(schema) then
    local log = os.tmpname()
    local ok = sh(string.format("mkdir -p '%s' && npm install --prefix '%s' --no-audit --no-fund " ..
      "--loglevel=error speedscope@1.25.0 > '%s' 2>&1", NPM_DIR, NPM_DIR, log))
    local text = read(log) or ""
    os.remove(log)
    if not ok or not read(schema) then
      node_ready = "npm install --prefix " .. NPM_DIR .. " speedscope@1.25.0 failed:\n" .. text
      return node_ready
    end
  end
  node_ready = true
  return true
end

local function json_str(s) return s == nil and "null" or ('"' .. hex(s) .. '"') end

-- Import path with speedscope; exp = {profile_name=, total=, frames =
-- {{name=, file=, line=, self=, total=}}, edges = {{caller, callee}}}.
local function node_import(path, exp)
  local ready = ensure_node()
  if ready ~= true then return t.ok(false, ready) end
  local parts = {}
  for _, f in ipairs(exp.frames) do
    parts[#parts + 1] = string.format('{"name":%s,"file":%s,"line":%s,"self":%.0f,"total":%.0f}',
      json_str(f.name), json_str(f.file), f.line and tostring(f.line) or "null", f.self, f.total)
  end
  local edges = {}
  for _, e in ipairs(exp.edges) do edges[#edges + 1] = "[" .. json_str(e[1]) .. "," .. json_str(e[2]) .. "]" end
  local exp_path = os.tmpname()
  write(exp_path, string.format('{"profileName":%s,"totalWeight":%.0f,"frames":[%s],"edges":[%s]}',
    json_str(exp.profile_name), exp.total, table.concat(parts, ","), table.concat(edges, ",")))
  local out = os.tmpname()
  local ok = sh(string.format("node '%s' '%s' '%s' '%s' > '%s' 2>&1", NODE_CHECK, NPM_DIR, path, exp_path, out))
  local text = read(out) or ""
  os.remove(out); os.remove(exp_path)
  io.write("  node: ", text)
  return t.ok(ok and text:find("all checks passed", 1, true) ~= nil, "speedscope import:\n" .. text)
end

-- s with each byte that does not start a well-formed UTF-8 sequence
-- replaced by U+FFFD (independently of the writer's own code).
local UTF8 = {"[%z\1-\127]", "[\194-\223][\128-\191]", "\224[\160-\191][\128-\191]",
  "[\225-\236\238\239][\128-\191][\128-\191]", "\237[\128-\159][\128-\191]",
  "\240[\144-\191][\128-\191][\128-\191]", "[\241-\243][\128-\191][\128-\191][\128-\191]",
  "\244[\128-\143][\128-\191][\128-\191]"}
local function utf8_clean(s)
  local out, i = {}, 1
  while i <= #s do
    local e
    for _, pat in ipairs(UTF8) do
      e = select(2, s:find("^" .. pat, i))
      if e then break end
    end
    out[#out + 1] = e and s:sub(i, e) or "\239\191\189"
    i = (e or i) + 1
  end
  return table.concat(out)
end

------------------------------------------------------------------------
-- What a file must contain for p, computed from the model independently
-- of the writer: per function (-jp f label and file) the self and total
-- ticks, and the root-first stacks of labels with their ticks.
local function expected(p, ns_per_tick)
  local funcs, order, stacks = {}, {}, {}
  -- Names and files as the file has them (invalid UTF-8 replaced).
  local function clean(s) return s and utf8_clean(s) end
  local function key(fr)
    if not fr then return speedscope.NO_STACK, nil end
    return clean(model.label(fr, "f", false)), clean(fr.lua and fr.file or nil)
  end
  for _, s in ipairs(p.samples) do
    local seen, path = {}, {}
    local ids = #s.stack > 0 and s.stack or {false}
    for i, id in ipairs(ids) do
      local fr = id and p.frames[id]
      local name, file = key(fr)
      local k = name .. "\0" .. (file or "")
      local f = funcs[k]
      if not f then
        f = {name = name, file = file, self = 0, total = 0}
        funcs[k] = f
        order[#order + 1] = f
      end
      if fr and fr.lua then
        local line = fr.linedefined or fr.line
        if not f.line or (not fr.linedefined and line < f.line) then f.line = line end
      end
      if not seen[k] then f.total = f.total + s.count * ns_per_tick; seen[k] = true end
      if i == #ids then f.self = f.self + s.count * ns_per_tick end
      path[#path + 1] = k
    end
    local pk = table.concat(path, "\30")
    stacks[pk] = (stacks[pk] or 0) + s.count * ns_per_tick
  end
  return order, stacks
end

-- Checks from Lua on the decoded file: the fields, frames (file and line
-- for Lua frames only), root-first stacks and weights against p.
local function check_structure(doc, p, meta)
  local ns = meta.interval_us * 1000
  t.eq(doc["$schema"], "https://www.speedscope.app/file-format-schema.json", "$schema")
  t.eq(doc.exporter, "ljprof", "exporter")
  t.eq(doc.activeProfileIndex, 0, "activeProfileIndex")
  t.eq(doc.name, meta.program, "file name field")
  t.eq(#doc.profiles, 1, "one profile")
  local pr = doc.profiles[1]
  t.eq(pr.type, "sampled", "profile type")
  t.eq(pr.unit, "nanoseconds", "unit")
  t.eq(pr.startValue, 0, "startValue")
  t.ok(pr.name:find(meta.program, 1, true) and pr.name:find(meta.clock, 1, true),
    "profile name has the program and the clock: " .. pr.name)
  local frames = doc.shared.frames
  for i, f in ipairs(frames) do
    t.eq(type(f.name), "string", "frame " .. i .. " name")
    t.ok((f.file == nil) == (f.line == nil), "frame " .. i .. ": file and line together")
    if f.line then t.eq(type(f.line), "number", "line is a number") end
  end
  t.eq(#pr.samples, #pr.weights, "one weight per sample")
  local sum, got = 0, {}
  for i, s in ipairs(pr.samples) do
    local path = {}
    for k, ix in ipairs(s) do
      local f = frames[ix + 1]
      if not t.ok(f, "sample " .. i .. ": frame index " .. tostring(ix) .. " in range") then return end
      path[k] = f.name .. "\0" .. (f.file or "")
    end
    local pk = table.concat(path, "\30")
    t.ok(not got[pk], "each stack once: " .. pk)
    got[pk] = pr.weights[i]
    t.ok(pr.weights[i] > 0, "positive weight")
    sum = sum + pr.weights[i]
  end
  t.eq(sum, p.total * ns, "weights sum = ticks * interval")
  t.eq(pr.endValue, sum, "endValue = sum of weights")
  -- The stacks, root first, are those of the model.
  local funcs, stacks = expected(p, ns)
  local n = 0
  for pk, w in pairs(stacks) do
    n = n + 1
    t.eq(got[pk], w, "weight of stack " .. pk:gsub("%z", "@"):gsub("\30", " > "))
  end
  local m = 0
  for _ in pairs(got) do m = m + 1 end
  t.eq(m, n, "number of distinct stacks")
  -- Frames: one per function, with the model's file and line.
  t.eq(#frames, #funcs, "one frame per function")
  local by = {}
  for _, f in ipairs(frames) do by[f.name .. "\0" .. (f.file or "")] = f end
  for _, e in ipairs(funcs) do
    local f = by[e.name .. "\0" .. (e.file or "")]
    if t.ok(f, "frame for " .. e.name) then
      t.eq(f.file, e.file, e.name .. ": file")
      t.eq(f.line, e.line, e.name .. ": line")
    end
  end
  return funcs
end

------------------------------------------------------------------------
t.case("JSON strings: escapes, UTF-8 kept, invalid bytes replaced", function()
  t.eq(speedscope.string('a"b\\c'), '"a\\"b\\\\c"', "quote and backslash")
  t.eq(speedscope.string("\n\t\r\b\f\0\1\31\127"), '"\\n\\t\\r\\b\\f\\u0000\\u0001\\u001f\127"',
    "control characters (DEL needs no escape)")
  t.eq(speedscope.string("né€𝄞/"), '"né€𝄞/"', "UTF-8 and slash as is")
  t.eq(speedscope.string("a\255b\192\175c\237\160\128d\226\130"),
    '"a\239\191\189b\239\191\189\239\191\189c\239\191\189\239\191\189\239\191\189d\239\191\189\239\191\189"',
    "invalid bytes, overlong forms, surrogates and a truncated tail become U+FFFD")
  t.eq(speedscope.number(3e12), "3000000000000", "big integers in full")
  t.eq(speedscope.number(0), "0", "zero")
end)

-- A synthetic profile: a C root, a main chunk, a named function sampled at
-- two lines (one frame), a merged VM state, an odd name in an odd file,
-- and an empty stack.
local ODD_NAME = 'q"b\\s\tx\1é'
local ODD_FILE = '/src/wé"ird\255.lua'
local function synthetic()
  local root = "@0xc0de" .. FI .. "@0xc0de"
  local main = "/src/main.lua:0" .. FI .. "/src/main.lua:12"
  local run5 = "run" .. FI .. "/src/main.lua:5"
  local run6 = "run" .. FI .. "/src/main.lua:6"
  local odd = ODD_NAME .. FI .. ODD_FILE .. ":3"
  local anon = ODD_FILE .. ":7" .. FI .. ODD_FILE .. ":9"
  return model.collect({
    {stack = root .. FR .. main .. FR .. run5, vmstate = "I", count = 3},
    {stack = root .. FR .. main .. FR .. run6, vmstate = "J", count = 2},
    {stack = root .. FR .. main .. FR .. run5, vmstate = "N", count = 1},
    {stack = root .. FR .. main .. FR .. run5 .. FR .. odd, vmstate = "I", count = 5},
    {stack = root .. FR .. main .. FR .. anon .. FR .. "[builtin#999]" .. FI .. "[builtin#999]",
     vmstate = "C", count = 7},
    {stack = "", vmstate = "G", count = 4},
  })
end

t.case("synthetic profile: frames, stacks root first, weights", function()
  local p = synthetic()
  local meta = {clock = "cpu", interval_us = 250, program = "main.lua", samples = 22, dropped = 2}
  local text = speedscope.render(p, meta)
  local ok, doc = pcall(decode, text)
  if not t.ok(ok, "valid JSON: " .. tostring(doc) .. "\n" .. text) then return end
  check_structure(doc, p, meta)
  local pr = doc.profiles[1]
  t.eq(pr.endValue, 22 * 250 * 1000, "endValue")
  t.eq(pr.name, "main.lua (cpu clock, 250 us interval, 2 samples dropped)", "profile name")
  local byname = {}
  for i, f in ipairs(doc.shared.frames) do byname[f.name] = f; f.index = i - 1 end
  local run = byname.run
  t.ok(run and run.file == "/src/main.lua" and run.line == 5, "run: one frame, lowest sampled line")
  local main = byname["main.lua:0"]
  t.ok(main and main.file == "/src/main.lua" and main.line == 0, "main chunk: chunk:0, full path, line 0")
  local odd = byname[ODD_NAME]
  t.ok(odd and odd.file == '/src/wé"ird\239\191\189.lua' and odd.line == 3, "odd name and file round trip")
  local anon = byname['wé"ird\239\191\189.lua:7']
  t.ok(anon and anon.line == 7, "anonymous function: chunk:firstline, line = first line")
  local c = byname["@0xc0de"]
  t.ok(c and c.file == nil and c.line == nil, "C frame: name only")
  t.ok(byname["[builtin#999]"] and byname["[builtin#999]"].file == nil, "unknown builtin: name only")
  local none = byname[speedscope.NO_STACK]
  t.ok(none and none.file == nil, "empty stack: one pseudo-frame")
  -- Root first: every stack but the empty one starts at the C root.
  for i, s in ipairs(pr.samples) do
    if s[1] ~= none.index then
      t.eq(s[1], c.index, "sample " .. i .. " starts at the root")
      t.eq(s[2], main.index, "sample " .. i .. " then the main chunk")
    else
      t.eq(#s, 1, "the empty stack is the pseudo-frame alone")
      t.eq(pr.weights[i], 4 * 250000, "its weight")
    end
  end
  for _, f in ipairs({"I", "J", "N", "C", "G"}) do
    t.ok(not text:find('"' .. f .. '"', 1, true) and not text:find("Interpreted", 1, true),
      "no VM state pseudo-frames")
  end
  local path = os.tmpname()
  write(path, text)
  local funcs = expected(p, 250000)
  node_import(path, {
    profile_name = pr.name, total = 22 * 250000, frames = funcs,
    edges = {{"@0xc0de", "main.lua:0"}, {"main.lua:0", "run"}, {"run", ODD_NAME},
             {'wé"ird\239\191\189.lua:7', "[builtin#999]"}},
  })
  os.remove(path)
end)

t.case("empty profile", function()
  local text = speedscope.render(model.collect({}), {clock = "wall", interval_us = 1000, program = "x"})
  local doc = decode(text)
  t.eq(#doc.shared.frames, 0, "no frames")
  t.eq(#doc.profiles[1].samples, 0, "no samples")
  t.eq(doc.profiles[1].endValue, 0, "endValue 0")
  t.raises(function() speedscope.render(model.collect({}), {clock = "wall"}) end,
    "interval_us", "the interval is required")
end)

------------------------------------------------------------------------
-- A real run: known functions in a chunk whose name has a quote, a space
-- and a non-ASCII letter; a function whose name (a field key) has a quote,
-- a backslash, a tab and a non-ASCII letter; time in string.rep (a C leaf).
local CHUNK = '/nonexistent/ljprof test/wö"rk.lua'
local WRAP = 'odd"\\\tné'
local WORKLOAD = [[
local t = {}
local function heavy(n) local s = 0 for i = 1, n do s = s + i % 7 end return s end
local function light(n) local s = 0 for i = 1, n do s = s + i % 5 end return s end
local function cwork(n) local r = 0 for i = 1, n do r = r + #string.rep("x", 3000) end return r end
t["odd\"\\\tné"] = function(n) return heavy(n) + light(n / 3) + cwork(n / 500) end
local function step() return 0 + t["odd\"\\\tné"](30000) end
return function(sec) local t0, r = os.clock(), 0 repeat r = r + step() until os.clock() - t0 >= sec return r end
]]

t.case("real run (wall clock, 1 ms): Lua checks and speedscope's importer", function()
  local workload = assert(loadstring(WORKLOAD, "@" .. CHUNK))()
  jit.off(workload, true)
  jit.off()
  ljprof.record({clock = "wall", interval = 1, fmt = model.KEY_FMT, depth = -model.MAX_DEPTH})
  pcall(workload, 0.5)   -- called from C: no name where it is called, but
                         -- the local holding it names it at stop() (names.c)
  ljprof.stop()
  jit.on()
  local st = ljprof.stats()
  local p = model.collect(ljprof.summary())
  local meta = {clock = st.clock, interval_us = st.interval_us, program = "test_speedscope.lua",
                samples = st.ticks, dropped = st.dropped}
  t.eq(st.clock, "wall", "clock")
  t.eq(p.total, st.completed, "model total = completed ticks")
  t.ok(p.total >= 20, "enough samples: " .. p.total)
  local text = speedscope.render(p, meta)
  local path = os.tmpname()
  write(path, text)
  local ok, doc = pcall(decode, text)
  if not t.ok(ok, "valid JSON: " .. tostring(doc)) then return end
  local funcs = check_structure(doc, p, meta)
  local pr = doc.profiles[1]
  t.eq(pr.endValue, p.total * st.interval_us * 1000, "endValue = ticks * interval")
  -- Known functions, with their full-path file and first line.
  local byname = {}
  for _, f in ipairs(doc.shared.frames) do byname[f.name] = f end
  local want = {heavy = 2, light = 3, [WRAP] = 5, step = 6, workload = 7}
  for name, line in pairs(want) do
    local f = byname[name]
    if t.ok(f, "frame " .. name .. " present") then
      t.eq(f.file, CHUNK, name .. ": full path")
      t.eq(f.line, line, name .. ": line")
    end
  end
  local nc = 0
  for _, f in ipairs(doc.shared.frames) do
    if f.file == nil then nc = nc + 1 end
  end
  t.ok(nc >= 1, "C frames (name only) present")
  -- Root first: the caller is before the callee in every sample.
  local index = {}
  for i, f in ipairs(doc.shared.frames) do index[f.name] = i - 1 end
  for _, s in ipairs(pr.samples) do
    local pos = {}
    for k, ix in ipairs(s) do pos[ix] = k end
    local h, w = pos[index.heavy], pos[index[WRAP]]
    if h then t.ok(w and w == h - 1, "odd wrapper right before heavy") end
  end
  local edges = {{"pcall", "workload"}, {"workload", "step"}, {"step", WRAP}, {WRAP, "heavy"}, {WRAP, "light"}}
  if byname.cwork then edges[#edges + 1] = {WRAP, "cwork"} end
  node_import(path, {profile_name = pr.name, total = p.total * st.interval_us * 1000,
                     frames = funcs, edges = edges})
  os.remove(path)
end)

t.done()
