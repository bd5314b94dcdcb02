-- jit.prof.svg: the SVG flame graph of a synthetic profile and of a real
-- one (a deterministic workload recorded with the wall clock), checked as
-- XML by python3's parser (escaping, names, geometry: widths add up, root
-- = all samples), then rendered by headless Chromium: its script runs
-- (zoom through #zoom=<n>) and the screenshot shows the frames' colours.
local t = require("t")
local ljprof = require("ljprof")
local model = require("jit.prof.model")
local svg = require("jit.prof.svg")

local FR, FI = model.FRAME, model.FIELD
local W = svg.WIDTH - 2 * svg.PAD    -- width of the root frame (px)

local write = t.write

local read = t.read

-- os.execute's success, as LuaJIT (status) or 5.2 compat (true) reports it.
local function sh(cmd)
  local r = os.execute(cmd)
  return r == 0 or r == true
end

local function unhex(h)   -- "x<hex>"
  return (h:sub(2):gsub("%x%x", function(x) return string.char(tonumber(x, 16)) end))
end

local function near(a, b) return math.abs(a - b) < 0.011 end

------------------------------------------------------------------------
-- The document as python3's XML parser reads it: one line per element of
-- interest, text fields hex-encoded (UTF-8). A parse error fails.
local PY_DUMP = [==[
import sys, xml.dom.minidom
doc = xml.dom.minidom.parse(sys.argv[1])
h = lambda s: 'x' + (s or '').encode('utf-8').hex()
def text(e):
    return ''.join(n.data for n in e.childNodes if n.nodeType in (n.TEXT_NODE, n.CDATA_SECTION_NODE))
root = doc.documentElement
print('SVG', root.getAttribute('width'), root.getAttribute('height'), h(root.getAttribute('xmlns')))
for e in doc.getElementsByTagName('text'):
    c = e.getAttribute('class')
    if c in ('title', 'sub'): print('TEXT', c, h(text(e)))
for e in doc.getElementsByTagName('script'): print('SCRIPT', len(text(e)))
for e in doc.getElementsByTagName('*'):
    for a in ('href', 'xlink:href', 'src'):
        if e.getAttribute(a): print('EXTERNAL', e.tagName, h(e.getAttribute(a)))
for g in doc.getElementsByTagName('g'):
    if g.getAttribute('class') != 'f': continue
    r = g.getElementsByTagName('rect')[0]
    print('F', g.getAttribute('data-d'), g.getAttribute('data-s'), g.getAttribute('data-n'),
          r.getAttribute('x'), r.getAttribute('width'), r.getAttribute('fill'),
          h(text(g.getElementsByTagName('title')[0])), h(text(g.getElementsByTagName('text')[0])),
          h(g.getAttribute('data-short')) if g.hasAttribute('data-short') else '-')
]==]

local function parse_svg(path)
  local script, out = os.tmpname(), os.tmpname()
  write(script, PY_DUMP)
  local ok = sh(string.format("python3 '%s' '%s' > '%s' 2>&1", script, path, out))
  local text = read(out) or ""
  os.remove(script); os.remove(out)
  if not t.ok(ok, "well-formed XML (python3 xml.dom.minidom):\n" .. text) then return nil end
  local doc = {frames = {}, texts = {}, external = 0}
  for l in text:gmatch("[^\n]+") do
    local f = {}
    for w in l:gmatch("%S+") do f[#f + 1] = w end
    if f[1] == "SVG" then
      doc.width, doc.height, doc.xmlns = tonumber(f[2]), tonumber(f[3]), unhex(f[4])
    elseif f[1] == "TEXT" then doc.texts[f[2]] = unhex(f[3])
    elseif f[1] == "SCRIPT" then doc.script = tonumber(f[2])
    elseif f[1] == "EXTERNAL" then doc.external = doc.external + 1
    elseif f[1] == "F" then
      local title = unhex(f[8])
      doc.frames[#doc.frames + 1] = {
        d = tonumber(f[2]), s = tonumber(f[3]), n = tonumber(f[4]), x = tonumber(f[5]),
        w = tonumber(f[6]), fill = f[7], title = title, label = title:match("^[^\n]*"),
        text = unhex(f[9]), short = f[10] ~= "-" and unhex(f[10]) or nil}
    end
  end
  return doc
end

-- Geometry and tree of a parsed document against the profile's total:
-- the root is every sample at full width, each frame's width and x are
-- its samples and first sample scaled, children lie within their parent,
-- sorted by label, and their samples add up to at most the parent's.
local function check_geometry(doc, total)
  local fs = doc.frames
  if not t.ok(#fs > 0, "frames drawn") then return end
  local root = fs[1]
  t.eq(root.d, 0, "first frame is the root")
  t.eq(root.label, svg.ROOT, "root label")
  t.eq(root.n, total, "root samples = total")
  t.eq(root.s, 0, "root starts at 0")
  t.ok(near(root.w, W), "root width = full width: " .. root.w)
  t.ok(near(root.x, svg.PAD), "root x = margin: " .. root.x)
  t.eq(doc.width, svg.WIDTH, "svg width")
  local scale = W / total
  local stack, kids = {}, {}
  for i, f in ipairs(fs) do
    t.ok(near(f.w, f.n * scale), string.format("%s: width %.2f = %d samples", f.label, f.w, f.n))
    t.ok(near(f.x, svg.PAD + f.s * scale), f.label .. ": x from its first sample")
    t.ok(f.n >= total * svg.MIN_SHARE, f.label .. ": not under the minimum share")
    if i > 1 then
      -- Document order is parents before children: the parent is the
      -- latest frame one row down.
      local parent = stack[f.d - 1]
      if t.ok(parent, f.label .. ": a parent one row down") then
        t.ok(f.s >= parent.s and f.s + f.n <= parent.s + parent.n,
          f.label .. " lies within its parent " .. parent.label)
        kids[parent] = kids[parent] or {}
        table.insert(kids[parent], f)
      end
    end
    stack[f.d] = f
    for d = f.d + 1, #stack do stack[d] = nil end
  end
  for parent, list in pairs(kids) do
    local sum = 0
    for k, c in ipairs(list) do
      sum = sum + c.n
      if k > 1 then
        t.ok(list[k - 1].label < c.label and list[k - 1].s + list[k - 1].n <= c.s,
          "children of " .. parent.label .. " sorted by label, left to right: " ..
          list[k - 1].label .. ", " .. c.label)
      end
    end
    t.ok(sum <= parent.n, "children of " .. parent.label .. " add up to at most its samples")
  end
end

local function by_label(doc)
  local r = {}
  for _, f in ipairs(doc.frames) do
    r[f.label] = r[f.label] or {}
    table.insert(r[f.label], f)
  end
  return r
end

-- Whether an "#rrggbb" fill lies between the two shades of a VM state.
local function in_shades(fill, letter)
  local st
  for _, s in ipairs(svg.STATES) do if s[1] == letter then st = s end end
  local rgb = {tonumber(fill:sub(2, 3), 16), tonumber(fill:sub(4, 5), 16), tonumber(fill:sub(6, 7), 16)}
  for i = 1, 3 do
    local lo, hi = math.min(st[3][i], st[4][i]), math.max(st[3][i], st[4][i])
    if not (rgb[i] and rgb[i] >= lo and rgb[i] <= hi) then return false end
  end
  return true
end

------------------------------------------------------------------------
t.case("escaping and cleaning text", function()
  t.eq(svg.escape([[a&b<c>d"e'f]]), "a&amp;b&lt;c&gt;d&quot;e&#39;f", "the five XML specials")
  t.eq(svg.escape("&amp;"), "&amp;amp;", "an entity is text, escaped again")
  t.eq(svg.escape("né€𝄞"), "né€𝄞", "UTF-8 as is")
  t.eq(svg.escape("a\0b\tc\nd\31e\127f"),
    "a\239\191\189b\239\191\189c\239\191\189d\239\191\189e\239\191\189f",
    "control characters (not allowed in XML 1.0) become U+FFFD")
  t.eq(svg.escape("x\255y\192\175z\237\160\128w\226\130"),
    "x\239\191\189y\239\191\189\239\191\189z\239\191\189\239\191\189\239\191\189w\239\191\189\239\191\189",
    "invalid bytes, overlong forms, surrogates and a truncated tail become U+FFFD")
end)

t.case("labels fit their boxes", function()
  local cw = svg.CHAR_W
  t.eq(svg.fit("demo.lua:fib", "fib", 6 + 12 * cw), "demo.lua:fib", "the label when it fits")
  t.eq(svg.fit("demo.lua:fib", "fib", 6 + 11 * cw), "fib", "else the bare name")
  t.eq(svg.fit("demo.lua:build_strings", "build_strings", 6 + 8 * cw), "build_..", "else cut with ..")
  t.eq(svg.fit("string.rep", nil, 6 + 5 * cw), "str..", "C names are cut too")
  t.eq(svg.fit("héllo_wörld", nil, 6 + 6 * cw), "héll..", "cut by characters, not bytes")
  t.eq(svg.fit("abc", nil, 6 + 2.9 * cw), "", "nothing under three characters")
  t.eq(svg.fit("fib", nil, 6 + 3 * cw), "fib", "three characters that fit")
  t.eq(svg.fit("string.rep", nil, 6 + 3.5 * cw), "", "no cut below two characters and ..")
  t.eq(svg.fit("string.rep", nil, 6 + 4 * cw), "st..", "two characters and ..")
end)

-- A synthetic profile: a C root, a main chunk, functions whose names and
-- chunk need escaping, each VM state as a leaf, a frame under the minimum
-- width, an empty stack.
local ODD = [[<b&"q'>]]
local ODD_FILE = "/src/a<&>\"'/we\255ird.lua"
local function synthetic(reverse)
  local root = "@0xc0de" .. FI .. "@0xc0de"
  local main = "/src/main.lua:0" .. FI .. "/src/main.lua:12"
  local run5 = "run" .. FI .. "/src/main.lua:5"
  local run6 = "run" .. FI .. "/src/main.lua:6"
  local odd = ODD .. FI .. ODD_FILE .. ":3"
  local anon = ODD_FILE .. ":7" .. FI .. ODD_FILE .. ":9"
  local rep = "[builtin#999]" .. FI .. "[builtin#999]"
  local tiny = "tiny" .. FI .. "/src/main.lua:40"
  local base = root .. FR .. main
  local e = {
    {stack = base .. FR .. run5, vmstate = "I", count = 300},
    {stack = base .. FR .. run6, vmstate = "N", count = 200},
    {stack = base .. FR .. run5 .. FR .. odd, vmstate = "N", count = 250},
    {stack = base .. FR .. run5 .. FR .. odd, vmstate = "G", count = 100},
    {stack = base .. FR .. anon .. FR .. rep, vmstate = "C", count = 150},
    {stack = base .. FR .. anon, vmstate = "J", count = 90},
    {stack = base .. FR .. run5 .. FR .. tiny, vmstate = "N", count = 1},
    {stack = "", vmstate = "G", count = 9},
  }
  if reverse then
    local r = {}
    for i = #e, 1, -1 do r[#r + 1] = e[i] end
    e = r
  end
  return model.collect(e)
end
local SYN_META = {clock = "cpu", interval_us = 1000, program = [[prog<&>"'.lua]],
                  samples = 1100, dropped = 3}

t.case("synthetic profile: well-formed, escaped, widths add up", function()
  local p = synthetic()
  t.eq(p.total, 1100, "synthetic total")
  local text = svg.render(p, SYN_META)
  t.ok(not text:find(ODD, 1, true) and not text:find("a<&>", 1, true) and
       not text:find("prog<&>", 1, true), "no raw special characters from names")
  t.ok(text:find("&lt;b&amp;&quot;q&#39;&gt;", 1, true) ~= nil, "escaped name in the text")
  t.ok(not text:find("%s(xlink:)?href=") and not text:find("@import", 1, true),
    "no external resources")
  local path = t.tmpname(".svg")
  write(path, text)
  local doc = parse_svg(path)
  os.remove(path)
  if not doc then return end
  t.eq(doc.xmlns, "http://www.w3.org/2000/svg", "SVG namespace")
  t.eq(doc.external, 0, "no external references")
  t.ok((doc.script or 0) > 100, "inline script")
  t.ok(doc.texts.title:find([[prog<&>"'.lua]], 1, true) ~= nil, "title has the program: " .. doc.texts.title)
  local sub = doc.texts.sub or ""
  t.ok(sub:find("cpu clock", 1, true) and sub:find("1,?100 samples") and sub:find("1.10 s", 1, true),
    "subtitle: clock, samples, time: " .. sub)
  t.ok(sub:find("3 samples dropped", 1, true) ~= nil, "dropped samples said: " .. sub)
  t.ok(sub:find("1 frame under 0.1% not drawn", 1, true) ~= nil, "frames left out said: " .. sub)
  check_geometry(doc, 1100)
  local f = by_label(doc)
  local oddlabel = "we\239\191\189ird.lua:" .. ODD
  for _, name in ipairs({"all", "@0xc0de", "main.lua:0", "main.lua:run", oddlabel,
                         "we\239\191\189ird.lua:7", "[builtin#999]", svg.NO_STACK}) do
    t.ok(f[name] and #f[name] == 1, "one frame " .. name)
  end
  t.ok(not f["main.lua:tiny"], "a frame under 0.1% is not drawn")
  local run = f["main.lua:run"] and f["main.lua:run"][1]
  if run then
    t.eq(run.n, 851, "run: lines 5 and 6 merged, the tiny callee counted")
    t.eq(run.short, "run", "bare name kept for eliding")
    t.ok(run.title:find("/src/main.lua:5-6 (lines sampled)", 1, true) ~= nil, "run: file and lines: " .. run.title)
    t.ok(run.title:find("851 samples (77.36%)", 1, true) ~= nil, "run: samples and percent: " .. run.title)
    t.ok(run.title:find("self: 500 samples", 1, true) ~= nil, "run: own samples: " .. run.title)
    t.ok(run.title:find("Interpreted 35.3%", 1, true) ~= nil, "run: VM states: " .. run.title)
    t.ok(run.text == "main.lua:run", "run: full label drawn: " .. run.text)
  end
  local odd = f[oddlabel] and f[oddlabel][1]
  if odd then
    t.ok(odd.title:find([[/src/a<&>"'/we]] .. "\239\191\189" .. "ird.lua:3", 1, true) ~= nil,
      "odd: full path round trip: " .. odd.title)
    t.eq(odd.short, ODD, "odd: bare name round trip")
    t.ok(in_shades(odd.fill, "N"), "odd: mostly compiled, green: " .. odd.fill)
  end
  local anon = f["we\239\191\189ird.lua:7"] and f["we\239\191\189ird.lua:7"][1]
  if anon then
    t.ok(anon.title:find("ird.lua:7 (first line)", 1, true) ~= nil, "unnamed: first line: " .. anon.title)
    t.ok(in_shades(anon.fill, "C"), "unnamed: its callee's C time dominates: " .. anon.fill)
  end
  local rep = f["[builtin#999]"] and f["[builtin#999]"][1]
  if rep then t.ok(in_shades(rep.fill, "C"), "C leaf orange: " .. rep.fill) end
  local none = f[svg.NO_STACK] and f[svg.NO_STACK][1]
  if none then t.ok(in_shades(none.fill, "G"), "GC leaf red: " .. none.fill) end
  local main = f["main.lua:0"] and f["main.lua:0"][1]
  if main then t.ok(main.title:find("/src/main.lua (main chunk)", 1, true) ~= nil, main.title) end
end)

t.case("deterministic: same bytes, whatever the sample order", function()
  local a = svg.render(synthetic(), SYN_META)
  t.eq(svg.render(synthetic(), SYN_META), a, "rendered twice")
  t.ok(svg.render(synthetic(true), SYN_META) == a, "samples in reverse order")
end)

-- A raw profile of nsamples stacks of depth 200 over 100 C frames named
-- with namelen bytes (the names of frames of one letter share all but
-- their last 4 bytes); the same stacks whatever namelen.
local function deep_raw(nsamples, namelen)
  local out = {"LJPROF-RAW 1", "meta\tinterval_us\t1000"}
  for i = 1, 100 do
    out[#out + 1] = string.format("frame\t%d\tC\t%s%04d", i, string.char(97 + i % 26):rep(namelen - 4), i)
  end
  local x = 12345
  for s = 1, nsamples do
    local ids = {}
    for k = 1, 200 do x = (x * 1103515245 + 12345) % 2147483648; ids[k] = 1 + x % 100 end
    out[#out + 1] = string.format("sample\t%d\tI\t\t%s", s, table.concat(ids, ","))
  end
  out[#out + 1] = string.format("end\t100\t%d", nsamples)
  return table.concat(out, "\n") .. "\n"
end

t.case("deep stacks with long names: linear (labels cleaned once, shown cut)", function()
  local raw = require("jit.prof.raw")
  local clean, cleaned = svg.clean, 0
  svg.clean = function(s) cleaned = cleaned + #tostring(s); return clean(s) end
  local ok, err = pcall(function()
    local data = deep_raw(50, 10000)          -- the issue's 1 MB file
    local p, meta = raw.parse(data, "deep")
    assert(p, err)
    cleaned = 0
    local big = svg.render(p, meta)
    local work = cleaned
    -- What is shown of a label is at most LABEL_MAX characters: the same
    -- graph for names of 2,500 and 10,000 bytes (four times the text
    -- before), and no longer than a few KB per frame drawn.
    local data2 = deep_raw(50, 2500)
    local p2, meta2 = raw.parse(data2, "deep2")
    cleaned = 0
    t.ok(svg.render(p2, meta2) == big, "the same SVG for 2.5 KB and 10 KB names")
    -- Each label is cleaned a bounded number of times, not once per frame
    -- of every stack (50 * 200 * 10 KB = 100 MB before): names four times
    -- longer add only a few times the longer frame table's bytes.
    t.ok(work - cleaned <= 4 * (#data - #data2), string.format("bytes cleaned %d for a " ..
      "%d-byte profile, %d for %d bytes", work, #data, cleaned, #data2))
    t.ok(work <= 10 * #data, string.format("bytes cleaned %d for a %d-byte profile", work, #data))
    local _, drawn = big:gsub('<g class="f"', "")
    t.ok(#big <= drawn * 2000 + 20000, string.format("%d bytes for %d frames", #big, drawn))
    -- The frames drawn: the root and every distinct stack prefix of at
    -- least 0.1% of the samples (here: every prefix of a sample counted
    -- twice or more; the stacks share no prefix but their frame 1).
    local counts = {}
    for _, s in ipairs(p.samples) do
      local k = ""
      for _, id in ipairs(s.stack) do
        k = k .. "," .. id
        counts[k] = (counts[k] or 0) + s.count
      end
    end
    local want = 1
    for _, c in pairs(counts) do if c >= p.total * 0.001 then want = want + 1 end end
    t.eq(drawn, want, "frames drawn: the root and each prefix of 0.1% or more")
    local first = p.frames[p.samples[1].stack[1]].name
    local label = first:sub(1, svg.LABEL_MAX - 3) .. "..."
    t.ok(big:find("<title>" .. label .. "\n", 1, true) ~= nil, "a title: the label cut with ...")
  end)
  svg.clean = clean
  t.ok(ok, tostring(err))
end)

t.case("empty profile", function()
  local text = svg.render(model.collect({}), {clock = "wall", interval_us = 1000, program = "x"})
  local path = t.tmpname(".svg")
  write(path, text)
  local doc = parse_svg(path)
  os.remove(path)
  if doc then t.eq(#doc.frames, 0, "no frames") end
  t.ok(text:find("No samples collected", 1, true) ~= nil, "says so")
  t.ok(svg.render({frames = {}, samples = {}}, nil):find("</svg>", 1, true) ~= nil, "meta optional")
end)

-- Touching frames of a row (siblings or not) must not look alike: the
-- contrast (sum of the R, G, B differences) of each such pair. Returns
-- the number of pairs and the smallest contrast.
local function adjacent_contrast(doc)
  local rows = {}
  for _, f in ipairs(doc.frames) do
    rows[f.d] = rows[f.d] or {}
    table.insert(rows[f.d], f)
  end
  local pairs_n, least = 0, math.huge
  local function rgb(h) return {tonumber(h:sub(2, 3), 16), tonumber(h:sub(4, 5), 16), tonumber(h:sub(6, 7), 16)} end
  for _, r in pairs(rows) do
    table.sort(r, function(a, b) return a.x < b.x end)
    for k = 2, #r do
      local a, b = r[k - 1], r[k]
      if math.abs(a.x + a.w - b.x) < 0.02 then
        local c = svg.contrast and svg.contrast(rgb(a.fill), rgb(b.fill))
        if not c then
          local x, y = rgb(a.fill), rgb(b.fill)
          c = math.abs(x[1] - y[1]) + math.abs(x[2] - y[2]) + math.abs(x[3] - y[3])
        end
        pairs_n = pairs_n + 1
        if c < least then least = c end
        t.ok(c >= 40, string.format("%s | %s: fills %s and %s nearly the same (contrast %d)",
                                    a.label, b.label, a.fill, b.fill, c))
      end
    end
  end
  return pairs_n, least
end

t.case("adjacent frames of a row stand out from each other", function()
  -- 60 compiled siblings (one hue) under one parent, and 30 under each of
  -- two neighbouring parents (cousins touch at the parents' border).
  local e = {}
  local main = "/src/m.lua:0" .. FI .. "/src/m.lua:1"
  for i = 1, 60 do
    e[#e + 1] = {stack = main .. FR .. string.format("f%02d", i) .. FI .. "/src/m.lua:" .. (10 + i),
                 vmstate = "N", count = 10 + i % 7}
  end
  for _, p in ipairs({"pa", "pb"}) do
    for i = 1, 30 do
      e[#e + 1] = {stack = main .. FR .. p .. FI .. "/src/m.lua:200" .. FR .. p .. i .. FI .. "/src/p.lua:" .. i,
                   vmstate = "I", count = 5 + i % 3}
    end
  end
  local path = t.tmpname(".svg")
  write(path, svg.render(model.collect(e), {clock = "cpu", interval_us = 1000}))
  local doc = parse_svg(path)
  os.remove(path)
  if not doc then return end
  local n, least = adjacent_contrast(doc)
  t.ok(n >= 100, "touching pairs checked: " .. n)
  print(string.format("  %d touching pairs, least contrast %d", n, least))
end)

------------------------------------------------------------------------
-- Headless Chromium (package chromium).
-- Its command: $CHROMIUM if set, else the first of the usual names found.
local function chromium()
  local env = os.getenv("CHROMIUM")
  local names = (env and env ~= "") and {env} or {"chromium", "chromium-browser", "google-chrome"}
  for _, c in ipairs(names) do
    if sh("command -v '" .. c .. "' >/dev/null 2>&1") then return c end
  end
  return nil
end

local function run_chromium(args)
  local exe = chromium()
  if not exe then return nil, "" end
  local profile = os.tmpname()
  os.remove(profile)
  local out = os.tmpname()
  local ok = sh(string.format("timeout 120 %s --headless --no-sandbox --disable-gpu " ..
    "--user-data-dir='%s' --hide-scrollbars %s > '%s' 2>&1", exe, profile, args, out))
  local text = read(out) or ""
  os.remove(out)
  sh(string.format("rm -rf '%s'", profile))
  return ok, text
end

-- The PNG's size and its colours ("rrggbb" -> pixels), decoded with
-- python's zlib (no PIL needed): 8-bit RGB or RGBA, non-interlaced.
local PY_PNG = [==[
import sys, zlib, struct
data = open(sys.argv[1], 'rb').read()
assert data[:8] == b'\x89PNG\r\n\x1a\n', 'not a PNG'
pos, idat = 8, b''
while pos < len(data):
    n, kind = struct.unpack('>I4s', data[pos:pos + 8])
    body = data[pos + 8:pos + 8 + n]
    if kind == b'IHDR':
        w, h, depth, ctype, _, _, interlace = struct.unpack('>IIBBBBB', body)
    elif kind == b'IDAT':
        idat += body
    pos += 12 + n
assert depth == 8 and ctype in (2, 6) and interlace == 0, 'unsupported PNG %d/%d/%d' % (depth, ctype, interlace)
bpp = 4 if ctype == 6 else 3
raw, stride = zlib.decompress(idat), w * bpp
prev, rows, i = bytearray(stride), [], 0
for y in range(h):
    f, line = raw[i], bytearray(raw[i + 1:i + 1 + stride]); i += 1 + stride
    for x in range(stride):
        a = line[x - bpp] if x >= bpp else 0
        b = prev[x]; c = prev[x - bpp] if x >= bpp else 0
        if f == 1: line[x] = (line[x] + a) & 255
        elif f == 2: line[x] = (line[x] + b) & 255
        elif f == 3: line[x] = (line[x] + (a + b) // 2) & 255
        elif f == 4:
            p = a + b - c; pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
            line[x] = (line[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
    rows.append(line); prev = line
counts = {}
for line in rows:
    for x in range(0, stride, bpp):
        k = bytes(line[x:x + 3]).hex()
        counts[k] = counts.get(k, 0) + 1
print('SIZE', w, h)
for k, n in counts.items():
    if n >= 20: print('C', k, n)
]==]

local function png_colours(path)
  local script, out = os.tmpname(), os.tmpname()
  write(script, PY_PNG)
  local ok = sh(string.format("python3 '%s' '%s' > '%s' 2>&1", script, path, out))
  local text = read(out) or ""
  os.remove(script); os.remove(out)
  if not t.ok(ok, "PNG decoded:\n" .. text) then return nil end
  local r = {colours = {}, distinct = 0}
  r.w, r.h = text:match("SIZE (%d+) (%d+)")
  r.w, r.h = tonumber(r.w), tonumber(r.h)
  for k, n in text:gmatch("C (%x+) (%d+)") do
    r.colours[k] = tonumber(n)
    r.distinct = r.distinct + 1
  end
  return r
end

------------------------------------------------------------------------
-- A real run: a chunk whose name needs escaping, a function whose name
-- (a field key) does too, interpreted Lua leaves and a C leaf
-- (string.rep), all under the interpreter so the states are I and C.
local CHUNK = [[/nonexistent/ljprof test/svg<&>"work'.lua]]
local BASE = [[svg<&>"work'.lua]]
local WRAP = [[<odd & "name">]]
local WORKLOAD = [[
local t = {}
local function heavy(n) local s = 0 for i = 1, n do s = s + i % 7 end return s end
local function light(n) local s = 0 for i = 1, n do s = s + i % 5 end return s end
local function cwork(n) local r = 0 for i = 1, n do r = r + #string.rep("x", 20000) end return r end
t['<odd & "name">'] = function(n) return heavy(n) + light(n / 3) + cwork(n / 300) end
local function step() return 0 + t['<odd & "name">'](30000) end
return function(sec) local t0, r = os.clock(), 0 repeat r = r + step() until os.clock() - t0 >= sec return r end
]]

t.case("real run (wall clock, 1 ms): XML, names, widths, Chromium", function()
  collectgarbage()  -- the earlier cases' garbage: no GC cycle inside string.rep
  local workload = assert(loadstring(WORKLOAD, "@" .. CHUNK))()
  jit.off(workload, true)
  jit.off()
  ljprof.record({clock = "wall", interval = 1, fmt = model.KEY_FMT, depth = -model.MAX_DEPTH})
  pcall(workload, 0.5)
  ljprof.stop()
  jit.on()
  local st = ljprof.stats()
  local p = model.collect(ljprof.summary())
  local meta = {clock = st.clock, interval_us = st.interval_us, program = "test_svg.lua",
                samples = st.samples, dropped = st.dropped}
  t.ok(p.total >= 100, "enough samples: " .. p.total)
  local text = svg.render(p, meta)
  t.eq(svg.render(p, meta), text, "same profile, same bytes")
  local path = t.tmpname(".svg")
  write(path, text)
  local doc = parse_svg(path)
  if not doc then os.remove(path); return end
  check_geometry(doc, p.total)
  local f = by_label(doc)
  for _, name in ipairs({"heavy", "light", "cwork", WRAP, "step"}) do
    local label = BASE .. ":" .. name
    local fr = f[label] and f[label][1]
    if t.ok(fr, "frame " .. label .. " drawn") then
      t.eq(fr.short, name, name .. ": bare name")
      t.ok(fr.title:find(CHUNK .. ":", 1, true) ~= nil, name .. ": full path in the tooltip: " .. fr.title)
    end
  end
  -- pcall names nothing, but the local that holds it is live at stop():
  -- named there by value (the run's end, names.c)
  t.ok(f[BASE .. ":workload"], "the workload's function: named by the local holding it")
  local heavy = f[BASE .. ":heavy"] and f[BASE .. ":heavy"][1]
  if heavy then t.ok(in_shades(heavy.fill, "I"), "interpreted leaf blue: " .. heavy.fill) end
  local rep = f["string.rep"] and f["string.rep"][1]
  if t.ok(rep, "string.rep drawn (a C leaf)") then
    t.ok(in_shades(rep.fill, "C"), "C leaf orange: " .. rep.fill)
    t.ok(rep.title:find("C code 100.0%", 1, true) ~= nil, "string.rep: all in C: " .. rep.title)
  end

  -- Chromium: the script runs and zooms (#zoom=<n>), and the screenshot
  -- has the frames' fills.
  local exe = chromium()
  if not t.ok(exe, "chromium" .. (os.getenv("CHROMIUM") and (" ($CHROMIUM=" .. os.getenv("CHROMIUM") .. ")") or "") ..
              " not found: it is required to render the SVG flame graph " ..
              "(apt-get install chromium, or set CHROMIUM to its path)") then
    os.remove(path); return
  end
  local ok, dom = run_chromium(string.format("--dump-dom 'file://%s'", path))
  t.ok(ok and dom:find('data-ready="1"', 1, true) ~= nil and dom:find('data-zoom=""', 1, true) ~= nil,
    "unzoomed: script ran to the end:\n" .. dom:sub(1, 2000))
  t.ok(not dom:find('class="f h"', 1, true) and not dom:find('class="f a"', 1, true),
    "unzoomed: every frame shown")
  local zi
  for i, fr in ipairs(doc.frames) do
    if fr.label == BASE .. ":heavy" then zi = i - 1 end
  end
  ok, dom = run_chromium(string.format("--dump-dom 'file://%s#zoom=%d'", path, zi or 0))
  t.ok(ok and dom:find('data-ready="1"', 1, true) ~= nil, "script ran to the end:\n" .. dom:sub(1, 2000))
  t.ok(dom:find('data-zoom="' .. tostring(zi) .. '"', 1, true) ~= nil, "zoomed on frame " .. tostring(zi))
  -- heavy now spans the full width with its label; its siblings are hidden.
  local zoomed, hidden = false, {}
  for g in dom:gmatch('<g class="f[^"]*"[^>]*>.-</g>') do
    if g:find(":heavy\n", 1, true) then
      zoomed = g:find('width="' .. string.format("%.2f", W) .. '"', 1, true) and
               g:find(">svg&lt;&amp;&gt;\"work'.lua:heavy</text>", 1, true)
    end
    for _, name in ipairs({"light", "cwork"}) do
      if g:find(":" .. name .. "\n", 1, true) and g:find('^<g class="f h"') then hidden[name] = true end
    end
  end
  t.ok(zoomed, "zoomed frame at full width, full label")
  t.ok(hidden.light and hidden.cwork, "its siblings hidden")

  -- Search (#search=<regex>, as the Search button and Ctrl-F set it):
  -- the matched share is that of the frames whose label matches, each
  -- sample once.
  local want = {}
  for _, fr in ipairs(doc.frames) do
    if fr.d > 0 and (fr.label:find("heavy", 1, true) or fr.label:find("light", 1, true)) then
      want[#want + 1] = fr
    end
  end
  local share = 0
  for _, fr in ipairs(want) do share = share + fr.n end  -- no nesting among them
  share = share * 100 / p.total
  ok, dom = run_chromium(string.format("--dump-dom 'file://%s#search=heavy%%7Clight'", path))
  local got = tonumber(dom:match('data%-matched="([%d.]+)"') or "")
  t.ok(ok and got and math.abs(got - share) < 0.01,
       string.format("matched %s%%, want %.4f%%", tostring(got), share))
  local _, lit = dom:gsub('fill="rgb%(230,0,230%)"', "")
  t.eq(lit, #want, "the matching frames are highlighted")
  t.ok(dom:find(string.format(">Matched: %.1f%%", share), 1, true) ~= nil, "the Matched line is shown")
  adjacent_contrast(doc)

  local png = t.tmpname(".png")
  local sok, out = run_chromium(string.format("--screenshot='%s' --window-size=1200,800 'file://%s'", png, path))
  local data = read(png)
  if t.ok(sok and data, "chromium wrote a screenshot:\n" .. out) then
    t.ok(#data > 10000, "screenshot is not trivial: " .. #data .. " bytes")
    local img = png_colours(png)
    if img then
      t.eq(img.w, 1200, "screenshot width")
      t.ok(img.distinct >= 12, "many colours, not a blank image: " .. img.distinct)
      -- Every frame wider than 40 px shows its fill.
      for _, fr in ipairs(doc.frames) do
        if fr.w > 40 and fr.d * svg.FRAME_H < 600 then
          t.ok((img.colours[fr.fill:sub(2)] or 0) > 0, fr.label .. ": fill " .. fr.fill .. " on screen")
        end
      end
    end
  end
  os.remove(png)
  os.remove(path)
end)

-- Search in Chromium on a profile with recursion: a match inside a match
-- counts once; regex alternatives add up; search and zoom share the URL.
t.case("search: matched share de-duplicated, kept with zoom in the URL", function()
  if not chromium() then t.ok(false, "chromium not found (apt-get install chromium)"); return end
  local function fr(name) return name .. FI .. "/src/r.lua:" .. #name end
  local main = fr("main")
  local p = model.collect({
    {stack = main .. FR .. fr("rec") .. FR .. fr("rec") .. FR .. fr("leaf"), vmstate = "I", count = 300},
    {stack = main .. FR .. fr("rec"), vmstate = "I", count = 100},
    {stack = main .. FR .. fr("other"), vmstate = "N", count = 200},
    {stack = main .. FR .. fr("other") .. FR .. fr("rec"), vmstate = "N", count = 100},
  })
  local path = t.tmpname(".svg")
  write(path, svg.render(p, {clock = "cpu", interval_us = 1000}))
  local function matched(hash)
    local ok, dom = run_chromium(string.format("--dump-dom 'file://%s#%s'", path, hash))
    t.ok(ok and dom:find('data-ready="1"', 1, true), hash .. ": script ran")
    local _, lit = dom:gsub('fill="rgb%(230,0,230%)"', "")
    return tonumber(dom:match('data%-matched="([%d.]+)"') or ""), lit, dom
  end
  local m, lit = matched("search=rec")
  t.eq(m, 71.4286, "rec: (400 + 100) of 700, the nested rec not added again")
  t.eq(lit, 3, "rec: three frames highlighted")
  m, lit = matched("search=leaf%7Cother")
  t.eq(m, 85.7143, "leaf|other: 300 + 300 of 700")
  m, lit = matched("search=rec(")
  t.eq(m, 0, "not a regex: plain text, nothing matches")
  local doc = parse_svg(path)
  local zi
  for i, f in ipairs(doc and doc.frames or {}) do if f.label == "r.lua:other" then zi = i - 1 end end
  local dom
  m, lit, dom = matched("zoom=" .. tostring(zi) .. "&search=rec")
  t.ok(zi and dom:find('data-zoom="' .. zi .. '"', 1, true), "zoomed with a search")
  t.eq(m, 71.4286, "the share is of all samples, zoomed or not")
  os.remove(path)
end)

t.done()
