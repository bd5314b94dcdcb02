----------------------------------------------------------------------------
-- jit.prof.svg: an ljprof profile as a self-contained SVG flame graph.
--
-- render(p, meta) -> the SVG text, with p from jit.prof.model.collect()
-- and meta = {clock=, interval_us=, program=, samples=, dropped=};
-- render_parts(p, meta) -> the same as a list of strings (parts) that
-- join to it, for ljprof.write_file (jit.prof.output.render_parts).
--
-- The file needs nothing else: CSS and a small script are inline, fonts
-- are generic families. Open it in a browser to hover and zoom; as an
-- image (<img>, no script) it still shows every label, elided here.
--
-- Layout (classic flame graph, as flamegraph.pl draws it):
-- - The root ("all", every sample) is the bottom row; a frame's callees
--   are stacked on top of it. Frames are merged by label under the same
--   parent (functions of like-named chunks in different directories too:
--   the tooltip names the other files), so a stack path appears once
--   whatever the sample order, and
--   the children of a frame are sorted by label (byte order), from left to
--   right; the parent's own time is the gap on the right.
-- - Width is proportional to samples: a frame's x and width are its
--   first sample's offset and its sample count times (WIDTH - 2 PAD) /
--   total, so the root spans the full width. Frames narrower than
--   MIN_SHARE (0.1%) of all samples are not drawn, nor their callees, but
--   still count in their parent's width (a gap); the subtitle says how
--   many were left out.
-- - Labels are those of -jp's F view: chunk:name for named Lua functions,
--   chunk:firstline for unnamed ones (chunk without directories), C
--   functions and builtins by name; a label two different Lua functions
--   would share is qualified with the end of its file's path and its first
--   line ("run (check.lua:12)", model.names); a sample with no stack is
--   the frame "(no stack)". A label that does not fit its box becomes the bare
--   function name, then is cut to at least two characters and "..", then
--   left out (labels are monospace, so this needs no font metrics; the
--   script fits them again with the font's measured width).
-- - The tooltip (<title>) has the label, the file (full path) and
--   line (the first line of unnamed functions; the lines sampled for
--   named ones), samples, percent of all and time, own (self) samples,
--   and the share of each VM state. Labels, names and files are shown up
--   to LABEL_MAX characters, then cut with "..." (frames still merge by
--   their whole label).
--
-- Cost: linear in the profile. Each distinct frame's label is cleaned,
-- cut, hashed (its shade) and ranked (the children's order) once; the
-- tree walk then only looks these up, and every node writes at most
-- LABEL_MAX characters of text. (Before, every frame of every sample
-- cleaned, hashed and measured its whole label and every drawn frame
-- wrote it whole: 50 stacks of depth 200 over 10 KB names, a 1 MB file,
-- took 12.6 s and 422 MB for a 100 MB SVG.)
--
-- Memory: the tree of frames is first kept in arrays indexed by node
-- number (see build), not as tables per node; only the frames drawn (at
-- least MIN_SHARE of the samples each, so at most a thousand per row)
-- become tables, and the text is made in parts of 4096 pieces each,
-- never joined by render_parts. The write at stop of ~15,000 distinct
-- stacks (tests/lua/test_memory.lua) added 1,223 bytes per stack to the
-- peak RSS with four tables per node, ~375 after (~90 above the writer
-- state's fixed 4 MB); the output is the same bytes.
--
-- Colours: a frame's hue is the VM state most of its samples were taken
-- in, its own and its callees' (so a leaf has the colour of the state it
-- was mostly sampled in): N compiled green, I interpreted blue, C code orange, G
-- garbage collector red, J JIT compiler purple, anything else grey; the
-- root is grey. Within a hue the shade comes from a hash of the label,
-- so that the same function mostly has the same shade in every graph;
-- but a frame touching its left neighbour in the row (a sibling, or a
-- cousin at its parent's border) takes another shade of its hue when the
-- two would look alike (contrast, the sum of the R, G and B differences,
-- under M.MIN_CONTRAST). The legend at the top gives each state's share
-- of all samples.
--
-- A differential graph (p.diff, from jit.prof.diff: each sample has the
-- scaled count of the before profile in .before): widths are the after
-- profile's; a frame's colour is its change, after minus before (its own
-- samples and its callees'), red grew and blue shrank, deeper the larger
-- the change relative to the largest one, light grey unchanged or changed
-- within the noise (a frame marked .noise by jit.prof.diff: its function
-- did not change significantly; a native frame follows the function
-- below it); the tooltip gives before, after and the change; the legend says how the
-- before counts were scaled (meta.diff_scale).
--
-- Zoom (script): clicking a frame widens it to the full width with its
-- callees; its callers stay as full-width, faded rows below it; other
-- frames are hidden. "Reset zoom" (top left), Escape or a click on the
-- root go back. A URL ending in #zoom=<n> opens zoomed on the n-th frame
-- (document order, from 0); clicks update it. Hovering shows the frame
-- in the line at the bottom. Frames left out are not shown when zoomed
-- either.
--
-- Search (script), as flamegraph.pl and inferno have it: "Search" (top
-- right) or Ctrl-F asks for a regular expression (text that is not one
-- is taken literally); frames whose label matches turn magenta, and
-- "Matched: N%" (bottom right) is the share of all samples under them,
-- each sample counted once (a match nested in a match adds nothing).
-- "Clear search" (the same button), Ctrl-F again or Escape clear it. The
-- URL keeps it with the zoom: #zoom=<n>&search=<regex, URI-encoded>.
--
-- Text is UTF-8: bytes that are not well-formed UTF-8 and control
-- characters (which XML 1.0 does not allow) become U+FFFD; & < > " ' are
-- escaped. The output depends only on the profile and meta (no time,
-- no table order), so the same profile gives the same bytes.
----------------------------------------------------------------------------

local model = require("jit.prof.model")

local M = {}

M.WIDTH = 1200        -- image width (px)
M.PAD = 10            -- left and right margin
M.FRAME_H = 16        -- row height
M.CHAR_W = 7.45       -- advance width assumed for labels (12px monospace: 7.2, and a margin)
M.MIN_SHARE = 0.001   -- frames below this share of all samples are not drawn
M.LABEL_MAX = 300     -- characters of a label, name or file shown (two image widths)
M.TOP = 78            -- title, subtitle, legend
M.BOTTOM = 30         -- details line
M.ROOT = "all"
M.NO_STACK = model.NO_STACK

-- VM states in legend order: letter, name, two shades (hash picks between).
M.STATES = {
  {"N", "Compiled",          {0x4c, 0xaf, 0x50}, {0x9c, 0xd6, 0x8f}},
  {"I", "Interpreted",       {0x5b, 0x9b, 0xd5}, {0xa9, 0xcb, 0xee}},
  {"C", "C code",            {0xf0, 0x8c, 0x28}, {0xf8, 0xc2, 0x7a}},
  {"G", "Garbage collector", {0xd9, 0x3b, 0x3b}, {0xf0, 0x8a, 0x80}},
  {"J", "JIT compiler",      {0x8e, 0x5c, 0xc4}, {0xc3, 0xa2, 0xe6}},
}
local OTHER = {"?", "Other", {0xa8, 0xa8, 0xa8}, {0xcc, 0xcc, 0xcc}}
local ROOT_FILL = "#c4c4c4"

local byte, format, floor = string.byte, string.format, math.floor
local concat = table.concat

local STATE = {}
for i, s in ipairs(M.STATES) do STATE[s[1]] = s; s.order = i end
OTHER.order = #M.STATES + 1

------------------------------------------------------------------------
-- Text.

-- s as well-formed UTF-8 without control characters: anything else
-- (invalid bytes, C0 controls, DEL) becomes U+FFFD, byte by byte
-- (model.utf8, shared with speedscope and pprof).
function M.clean(s)
  return model.utf8(s, true)
end

local ENTITY = {["&"] = "&amp;", ["<"] = "&lt;", [">"] = "&gt;",
                ['"'] = "&quot;", ["'"] = "&#39;"}

-- s for XML text or a quoted attribute: cleaned, then & < > " ' escaped.
function M.escape(s)
  return (M.clean(s):gsub("[&<>\"']", ENTITY))
end
local esc = M.escape

-- Characters (code points) in a clean string.
local function nchars(s)
  local _, n = s:gsub("[^\128-\191]", "")
  return n
end

-- The first k characters of a clean string.
local function first_chars(s, k)
  if k <= 0 then return "" end
  local n, i = 0, 1
  while i <= #s do
    local b = byte(s, i)
    if b < 0x80 or b >= 0xC0 then
      n = n + 1
      if n > k then return s:sub(1, i - 1) end
    end
    i = i + 1
  end
  return s
end

-- The text shown in a box of width w (px): the label, else the short
-- name, else at least two of its characters and "..", else nothing.
-- label and short are clean strings.
function M.fit(label, short, w)
  local room = floor((w - 6) / M.CHAR_W + 1e-9)
  if room < 3 then return "" end
  if nchars(label) <= room then return label end
  local s = short or label
  if nchars(s) <= room then return s end
  if room < 4 then return "" end
  return first_chars(s, room - 2) .. ".."
end

local function pct(n, total)
  return format("%.2f%%", total > 0 and n * 100 / total or 0)
end

-- A duration in microseconds, for people.
local function duration(us)
  if us >= 1e6 then return format("%.2f s", us / 1e6) end
  if us >= 1e3 then return format("%.4g ms", us / 1e3) end
  return format("%.0f us", us)
end

local CLOCK_TIME = {cpu = "CPU time", wall = "wall-clock time",
                    itimer = "process CPU time", thread = "thread CPU time"}

local function plural(n, word)
  return format("%.0f %s%s", n, word, n == 1 and "" or "s")
end

------------------------------------------------------------------------
-- The tree of frames.

-- The tree is built twice. First every frame's place in it, in arrays
-- indexed by node number (1 the root; a node is numbered after its
-- parent): its frame info, parent and samples; one hash table finds a
-- node's child by (parent, rank of the label). Then the frames to draw
-- are chosen (layout: at least MIN_SHARE of the samples, under a frame
-- drawn) and only they become tables, as every node was before; a second
-- pass over the samples, down each stack as far as its frames are drawn,
-- gives them the rest: own samples, before counts, VM states, files,
-- lines and the noise mark. A frame per distinct stack, with four tables
-- each, took ~1.1-1.2 KB per stack to write (71,667 stacks: +74.7 MB).

-- The shade of a label within its hue: 0..1 from a hash of the label.
local function shade(label)
  local h = 0
  for i = 1, #label do h = (h * 31 + byte(label, i)) % 16777213 end
  return (h % 1000) / 999
end

-- What is shown of a text: cleaned, cut to LABEL_MAX characters (one
-- call per distinct text: memo).
local function shown_text(memo, s)
  local r = memo[s]
  if not r then
    r = M.clean(s)
    if nchars(r) > M.LABEL_MAX then r = first_chars(r, M.LABEL_MAX - 3) .. "..." end
    memo[s] = r
  end
  return r
end

-- Each frame's label once: key (the whole label, cleaned: frames merge by
-- it), label and short as shown, shade, and rank (the byte order of keys:
-- children are sorted by it). [0] is the empty stack's pseudo-frame.
-- Also returns the number of distinct keys.
local function frame_infos(p, memo)
  local names = model.names(p, "F", false)
  local infos, by_key, keys = {}, {}, {}
  local function info(key, label, short)
    local fi = by_key[key]
    if not fi then
      fi = {key = key, label = label, short = short}
      by_key[key] = fi
      keys[#keys + 1] = key
    end
    return fi
  end
  infos[0] = info(M.NO_STACK, M.NO_STACK)
  for id, fr in ipairs(p.frames) do
    local key = M.clean(names[id] or model.label(fr, "F", false))
    infos[id] = info(key, shown_text(memo, key),
                     fr.lua and fr.name and shown_text(memo, fr.name) or nil)
  end
  local unknown = info("?", "?")
  table.sort(keys)
  for r, k in ipairs(keys) do
    local fi = by_key[k]
    fi.rank, fi.shade = r, shade(fi.label)
  end
  return infos, unknown, #keys
end

local function new_node(id, label, short, parent)
  return {id = id, label = label, short = short, parent = parent, count = 0, self = 0,
          before = 0, states = {}, children = {}, files = {}}
end

local function add_state(t, st, c) t[st] = (t[st] or 0) + c end
local EMPTY = {}

-- The frames of p as a tree: {n = nodes, fi = frame info, count
-- (samples), first (child), next (sibling)}, arrays by node number.
local function build(p, infos, unknown, nkeys)
  local diff = p.diff
  local fis, par, count = {false}, {0}, {0}
  local kids, stride, n_nodes = {}, nkeys + 1, 1
  for _, s in ipairs(p.samples) do
    local c = tonumber(s.count) or 0
    local b = diff and tonumber(s.before) or 0
    if c > 0 or b > 0 then
      count[1] = count[1] + c
      -- down the stack (as ipairs goes; i == 0: the empty stack, the
      -- frame infos[0]), each frame's node under the last one created on
      -- first use: frames merge by the whole label
      local stack = s.stack or EMPTY
      local node, i = 1, #stack == 0 and 0 or 1
      while true do
        local fi
        if i == 0 then
          fi = infos[0]
        else
          local id = stack[i]
          if id == nil then break end
          fi = infos[id] or unknown
        end
        local k = node * stride + fi.rank
        local kid = kids[k]
        if not kid then
          n_nodes = n_nodes + 1
          kid = n_nodes
          kids[k] = kid
          fis[kid], par[kid], count[kid] = fi, node, 0
        end
        count[kid] = count[kid] + c
        node = kid
        if i == 0 then break end
        i = i + 1
      end
    end
  end
  kids = nil
  -- Each node's children (first, then next), in no order: a node is
  -- numbered after its parent, so that its parent's entry, read after
  -- its own, is still the parent when the next sibling takes its place.
  local first = {}
  for node = n_nodes, 2, -1 do
    local q = par[node]
    par[node] = first[q] or false
    first[q] = node
  end
  par[1] = false
  return {n = n_nodes, fi = fis, count = count, first = first, next = par}
end

-- The node (table) under parent of frame info fi, nil when it is not
-- drawn; fr the frame (nil for the empty stack), whose file, line and
-- noise mark it takes.
local function child(parent, fi, fr)
  local node = parent.children[fi.key]
  if not node then return nil end
  -- a differential graph's frame whose function did not change beyond the
  -- noise (jit.prof.diff; a native frame as the function below it)
  if fr and (fr.noise or (fr.native and parent.noise)) then node.noise = true end
  if fr and fr.lua then
    node.files[fr.file] = true
    local line = fr.linedefined or fr.line
    if fr.linedefined then node.defined = fr.linedefined == 0 and "main" or "first" end
    if line then
      if not node.lo or line < node.lo then node.lo = line end
      if not node.hi or line > node.hi then node.hi = line end
    end
  end
  return node
end

-- The rest of the frames drawn (the root, and the nodes in its children
-- tables): own samples, before, states, files, lines, noise, from every
-- sample down its stack as far as its frames are drawn.
local function details(p, root, infos, unknown)
  local diff = p.diff
  for _, s in ipairs(p.samples) do
    local c = tonumber(s.count) or 0
    local b = diff and tonumber(s.before) or 0
    if c > 0 or b > 0 then
      local st = tostring(s.vmstate or "?")
      local node = root
      node.before = node.before + b
      add_state(node.states, st, c)
      local stack = s.stack or {}
      if #stack == 0 then
        node = child(node, infos[0])
        if node then
          node.before = node.before + b
          add_state(node.states, st, c)
        end
      end
      for _, id in ipairs(stack) do
        if not node then break end
        node = child(node, infos[id] or unknown, p.frames[id])
        if node then
          node.before = node.before + b
          add_state(node.states, st, c)
        end
      end
      if node then node.self = node.self + c end
    end
  end
end

-- The colour of a change (after - before) relative to the largest one:
-- red grew, blue shrank, light grey none.
local function diff_rgb(delta, max)
  if max <= 0 or math.abs(delta) < 1e-9 then return {0xe8, 0xe8, 0xe8} end
  local v = floor(215 * (1 - math.min(1, math.abs(delta) / max)) + 0.5)
  if delta > 0 then return {0xff, v, v} end
  return {v, v, 0xff}
end

-- The state most samples of t were in (ties: legend order), as an entry
-- of STATES (or OTHER).
local function dominant(t)
  local best, bn = nil, -1
  local keys = {}
  for k in pairs(t) do keys[#keys + 1] = k end
  table.sort(keys, function(a, b)
    local oa, ob = (STATE[a] or OTHER).order, (STATE[b] or OTHER).order
    if oa ~= ob then return oa < ob end
    return a < b
  end)
  for _, k in ipairs(keys) do
    if t[k] > bn then best, bn = k, t[k] end
  end
  return STATE[best] or OTHER
end

-- The colour at shade v (0..1) of the state's hue, as {r, g, b}.
local function rgb_at(state, v)
  local lo, hi = state[3], state[4]
  return {floor(lo[1] + (hi[1] - lo[1]) * v + 0.5), floor(lo[2] + (hi[2] - lo[2]) * v + 0.5),
          floor(lo[3] + (hi[3] - lo[3]) * v + 0.5)}
end

local function hex(c) return format("#%02x%02x%02x", c[1], c[2], c[3]) end

-- A shade of the state's hue picked by a hash of the label.
local function fill(state, label)
  return hex(rgb_at(state, shade(label)))
end

-- Contrast of two colours: the sum of the differences of R, G and B.
function M.contrast(a, b)
  return math.abs(a[1] - b[1]) + math.abs(a[2] - b[2]) + math.abs(a[3] - b[3])
end

-- Adjacent frames of a row (touching, whether siblings or not) differ by
-- at least this contrast: a frame whose hashed shade is too close to its
-- left neighbour's takes the first of the shades half, a quarter and
-- three quarters of its hue's range away that is far enough (each hue
-- spans at least 108, so half of it always is).
M.MIN_CONTRAST = 48

-- "Compiled 80.0%, C code 20.0%": the states of t, in legend order.
local function state_shares(t, n)
  local parts = {}
  local extra = {}
  for _, s in ipairs(M.STATES) do
    if t[s[1]] then parts[#parts + 1] = format("%s %.1f%%", s[2], t[s[1]] * 100 / n) end
  end
  for k in pairs(t) do
    if not STATE[k] then extra[#extra + 1] = k end
  end
  table.sort(extra)
  for _, k in ipairs(extra) do
    parts[#parts + 1] = format("%s %.1f%%", M.clean(k), t[k] * 100 / n)
  end
  return concat(parts, ", ")
end

-- The tooltip of a node: its lines, each escaped, joined by newlines.
local function tooltip(node, total, us, clock_time, diff, memo)
  local t = {node.label}
  local files = {}
  for f in pairs(node.files) do files[#files + 1] = f end
  table.sort(files)
  if #files > 0 then
    local where = shown_text(memo, files[1])
    if node.lo then
      if node.defined == "main" then where = where .. " (main chunk)"
      elseif node.defined then where = where .. ":" .. node.lo .. " (first line)"
      elseif node.lo == node.hi then where = where .. ":" .. node.lo
      else where = where .. ":" .. node.lo .. "-" .. node.hi .. " (lines sampled)" end
    end
    if #files > 1 then where = where .. format(" (and %d more files)", #files - 1) end
    t[#t + 1] = where
  end
  local line = plural(node.count, "sample") .. " (" .. pct(node.count, total) .. ")"
  if us then line = line .. ", " .. duration(node.count * us) .. " of " .. clock_time end
  t[#t + 1] = line
  if diff then
    t[#t + 1] = format("before: %.1f (scaled), after: %.0f, change: %+.1f (%+.2f%% of all)",
      node.before, node.count, node.count - node.before,
      total > 0 and (node.count - node.before) * 100 / total or 0)
  end
  if node.parent and node.self > 0 then
    t[#t + 1] = "self: " .. plural(node.self, "sample") .. " (" .. pct(node.self, total) .. ")"
  end
  if node.count > 0 then t[#t + 1] = state_shares(node.states, node.count) end
  for i = 1, #t do t[i] = esc(t[i]) end
  return concat(t, "\n")
end

-- The children of node n of tree T in label (byte) order: by rank
-- (frame_infos).
local function sorted_children(T, n)
  local list, fi = {}, T.fi
  local c = T.first[n]
  while c do list[#list + 1] = c; c = T.next[c] end
  table.sort(list, function(a, b) return fi[a].rank < fi[b].rank end)
  return list
end

------------------------------------------------------------------------
-- The script: zoom, reset, details line. Frames are <g class="f"> with
-- data-s (first sample), data-n (samples), data-d (depth) and data-short
-- (the bare function name, when it differs from the label); the label is
-- the first line of the frame's <title>.
local SCRIPT = [==[
(function () {
  var svg = document.getElementById('ljprof-flamegraph');
  var W = +svg.getAttribute('data-width'), PAD = +svg.getAttribute('data-pad');
  var NS = 'http://www.w3.org/2000/svg';
  var details = document.getElementById('details'), reset = document.getElementById('reset');
  var hint = details.textContent;
  var cw = +svg.getAttribute('data-charw');
  try {  /* the real advance width of the label font */
    var m = document.createElementNS(NS, 'text');
    m.setAttribute('class', 'lbl');
    m.textContent = 'MMMMMMMMMMMMMMMMMMMM';
    svg.appendChild(m);
    var mw = m.getComputedTextLength() / 20;
    svg.removeChild(m);
    if (mw > 0) cw = mw;
  } catch (e) {}
  try {  /* the legend, laid out again with the real text widths */
    var lg = document.getElementById('legend'), parts = lg.querySelectorAll('text, rect'), lw = 0;
    for (var k = 0; k < parts.length; k++)
      lw += parts[k].tagName === 'rect' ? 17 : parts[k].getComputedTextLength() + (k ? 20 : 10);
    var lx = Math.round((svg.viewBox.baseVal.width - lw + 20) / 2);
    for (k = 0; k < parts.length; k++) {
      parts[k].setAttribute('x', lx);
      lx += parts[k].tagName === 'rect' ? 17 : parts[k].getComputedTextLength() + (k ? 20 : 10);
    }
  } catch (e) {}
  var nodes = svg.querySelectorAll('g.f'), fr = [];
  for (var i = 0; i < nodes.length; i++) {
    var g = nodes[i], title = g.getElementsByTagName('title')[0].textContent;
    fr.push({g: g, i: i, s: +g.getAttribute('data-s'), n: +g.getAttribute('data-n'),
             d: +g.getAttribute('data-d'), label: title.split('\n')[0],
             info: title.split('\n').slice(0, 3).join('  '),
             short: g.getAttribute('data-short'),
             rect: g.getElementsByTagName('rect')[0], text: g.getElementsByTagName('text')[0]});
  }
  function fit(f, w) {
    var room = Math.floor((w - 6) / cw);
    if (room < 3) return '';
    if (f.label.length <= room) return f.label;
    var s = f.short || f.label;
    if (s.length <= room) return s;
    if (room < 4) return '';
    return s.substring(0, room - 2) + '..';
  }
  function place(f, x, w, cls) {
    f.rect.setAttribute('x', x.toFixed(2));
    f.rect.setAttribute('width', w.toFixed(2));
    f.text.setAttribute('x', (x + 3).toFixed(2));
    f.text.textContent = fit(f, w);
    f.g.setAttribute('class', cls);
  }
  var zoomed = null, searched = null, MATCH = 'rgb(230,0,230)';
  var searchBtn = document.getElementById('search'), matchedEl = document.getElementById('matched');
  for (var j = 0; j < fr.length; j++) fr[j].fill = fr[j].rect.getAttribute('fill');
  /* The state in the URL: #zoom=<n>&search=<regex> */
  function keep() {
    var parts = [];
    if (zoomed) parts.push('zoom=' + zoomed.i);
    if (searched !== null) parts.push('search=' + encodeURIComponent(searched));
    svg.setAttribute('data-zoom', zoomed ? String(zoomed.i) : '');
    try { history.replaceState(null, '', parts.length ? '#' + parts.join('&') : location.pathname + location.search); } catch (e) {}
  }
  /* Highlight the frames whose label matches src (a regular expression,
     else plain text); "Matched" is the share of all samples under them,
     each sample counted once (a match inside a match is not added). */
  function search(src) {
    var re = null;
    if (src) {
      try { re = new RegExp(src); } catch (e) { re = new RegExp(src.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')); }
    }
    var spans = [];
    for (var i = 0; i < fr.length; i++) {
      var f = fr[i], m = re !== null && f.d > 0 && re.test(f.label);
      f.rect.setAttribute('fill', m ? MATCH : f.fill);
      if (m) spans.push([f.s, f.s + f.n]);
    }
    spans.sort(function (a, b) { return a[0] - b[0] || b[1] - a[1]; });
    var sum = 0, end = -Infinity;
    for (i = 0; i < spans.length; i++) {
      if (spans[i][1] <= end) continue;
      sum += spans[i][1] - Math.max(spans[i][0], end);
      end = spans[i][1];
    }
    var all = fr.length ? fr[0].n : 0, share = re && all ? sum * 100 / all : 0;
    searched = re ? src : null;
    svg.setAttribute('data-matched', re ? share.toFixed(4) : '');
    matchedEl.textContent = re ? 'Matched: ' + share.toFixed(1) + '% (' + spans.length + (spans.length === 1 ? ' frame)' : ' frames)') : '';
    searchBtn.getElementsByTagName('text')[0].textContent = re ? 'Clear search' : 'Search';
    keep();
  }
  function ask() {
    if (searched !== null) return search(null);
    var v = window.prompt('Search frames (regular expression):', '');
    if (v) search(v);
  }
  function zoom(z) {
    var S = z.s, N = z.n, D = z.d, k = W / N;
    for (var i = 0; i < fr.length; i++) {
      var f = fr[i];
      if (f.d < D && f.s <= S && f.s + f.n >= S + N) place(f, PAD, W, 'f a');
      else if (f.d >= D && f.s >= S && f.s + f.n <= S + N) place(f, PAD + (f.s - S) * k, f.n * k, 'f');
      else f.g.setAttribute('class', 'f h');
    }
    zoomed = z.d > 0 ? z : null;
    reset.setAttribute('class', zoomed ? '' : 'h');
    keep();
  }
  function within(t, g) {
    for (; t && t !== svg; t = t.parentNode) if (t === g) return true;
    return false;
  }
  function frameOf(e) {
    for (var t = e.target; t && t !== svg; t = t.parentNode)
      if (t.getAttribute && /(^| )f( |$)/.test(t.getAttribute('class') || '')) return fr[+t.getAttribute('data-i')];
    return null;
  }
  for (j = 0; j < fr.length; j++) fr[j].g.setAttribute('data-i', j);
  svg.addEventListener('click', function (e) {
    var f = frameOf(e);
    if (f) zoom(f);
    else if (within(e.target, reset)) zoom(fr[0]);
    else if (within(e.target, searchBtn)) ask();
  });
  svg.addEventListener('mouseover', function (e) {
    var f = frameOf(e);
    details.textContent = f ? f.info : hint;
  });
  svg.addEventListener('mouseout', function () { details.textContent = hint; });
  document.addEventListener('keydown', function (e) {
    if (e.key === 'Escape' && fr.length) { zoom(fr[0]); search(null); }
    if ((e.ctrlKey || e.metaKey) && (e.key === 'f' || e.key === 'F') && fr.length) {
      e.preventDefault();
      ask();
    }
  });
  if (fr.length) {
    var h = (location.hash || '').replace(/^#/, '').split('&'), z = null, q = null;
    for (var k = 0; k < h.length; k++) {
      var kv = /^(zoom|search)=(.*)$/.exec(h[k]);
      if (kv && kv[1] === 'zoom' && /^\d+$/.test(kv[2])) z = fr[+kv[2]];
      if (kv && kv[1] === 'search') try { q = decodeURIComponent(kv[2]); } catch (e) { q = kv[2]; }
    }
    zoom(z || fr[0]);
    search(q);
  }
  svg.setAttribute('data-ready', '1');
})();
]==]

local CSS = [[
text { font-family: "DejaVu Sans", Verdana, Arial, sans-serif; fill: #222; }
.title { font-size: 17px; font-weight: bold; }
.sub { font-size: 12px; fill: #444; }
.legend { font-size: 12px; }
.lbl, .f text { font-family: "DejaVu Sans Mono", Menlo, Consolas, "Liberation Mono", monospace;
  font-size: 12px; fill: #000; pointer-events: none; }
.f { cursor: pointer; }
.f rect { stroke: #fbfbf5; stroke-width: 0.5; }
.f:hover rect { stroke: #000; stroke-width: 1; }
.a rect { opacity: 0.5; }
.h { display: none; }
#reset, #search { cursor: pointer; }
#reset rect, #search rect { fill: #eee; stroke: #888; }
#matched { font-size: 12px; fill: #333; }
.btn { font-size: 12px; }
#details { font-size: 12px; fill: #333; }
]]

------------------------------------------------------------------------

-- The SVG text as a list of strings (parts) that join to it: written one
-- after another (ljprof.write_file), a large graph is never one string.
function M.render_parts(p, meta)
  meta = meta or {}
  local W, PAD, FH = M.WIDTH - 2 * M.PAD, M.PAD, M.FRAME_H
  local memo = {}
  local infos, unknown, nkeys = frame_infos(p, memo)
  local T = build(p, infos, unknown, nkeys)
  local count, fis = T.count, T.fi
  local root = new_node(1, M.ROOT, nil, nil)
  root.count = count[1]
  local total = root.count
  local us = tonumber(meta.interval_us)
  if us and us <= 0 then us = nil end
  local clock = meta.clock and tostring(meta.clock) or nil
  local clock_time = CLOCK_TIME[clock or ""] or ((clock and M.clean(clock) .. " " or "") .. "time")
  local min_count = total * M.MIN_SHARE

  -- Frames to draw, parents before children, and the deepest row. Every
  -- frame not drawn is under a frame left out (or is one): their number
  -- is all frames but those drawn.
  local drawn, left_out, depth_max = {}, 0, 0
  local function layout(node, start, depth)
    node.start, node.depth = start, depth
    drawn[#drawn + 1] = node
    if depth > depth_max then depth_max = depth end
    local x = start
    for _, c in ipairs(sorted_children(T, node.id)) do
      if count[c] >= min_count then
        local fi = fis[c]
        local kid = new_node(c, fi.label, fi.short, node)
        kid.count, kid.rank, kid.shade = count[c], fi.rank, fi.shade
        node.children[fi.key] = kid
        layout(kid, x, depth + 1)
      end
      x = x + count[c]
    end
  end
  if total > 0 then
    layout(root, 0, 0)
    left_out = T.n - #drawn
  end
  T, count, fis = nil, nil, nil
  details(p, root, infos, unknown)

  local height = M.TOP + (depth_max + 1) * FH + M.BOTTOM
  local out, buf = {}, {}
  local function w(...)
    for i = 1, select("#", ...) do buf[#buf + 1] = select(i, ...) end
    if #buf >= 4096 then
      out[#out + 1] = concat(buf)
      for k = #buf, 1, -1 do buf[k] = nil end
    end
  end

  w('<?xml version="1.0" encoding="UTF-8" standalone="no"?>\n')
  w(format('<svg version="1.1" id="ljprof-flamegraph" xmlns="http://www.w3.org/2000/svg" ' ..
    'width="%d" height="%d" viewBox="0 0 %d %d" data-width="%d" data-pad="%d" data-charw="%.2f">\n',
    M.WIDTH, height, M.WIDTH, height, W, PAD, M.CHAR_W))
  w('<style type="text/css"><![CDATA[\n', CSS, ']]></style>\n')
  w(format('<rect x="0" y="0" width="%d" height="%d" fill="#fbfbf5"/>\n', M.WIDTH, height))

  -- Title, subtitle, legend, reset control.
  local program = meta.program and tostring(meta.program) or "ljprof"
  w(format('<text class="title" x="%d" y="24" text-anchor="middle">%s: %s</text>\n',
    M.WIDTH / 2, p.diff and "Differential flame graph" or "Flame graph", esc(program)))
  local sub = {}
  if clock then sub[#sub + 1] = esc(clock) .. " clock" end
  if us then sub[#sub + 1] = duration(us) .. " interval" end
  local tot = plural(total, "sample")
  if us then tot = tot .. " = " .. duration(total * us) .. " of " .. esc(clock_time) end
  sub[#sub + 1] = tot
  local dropped = tonumber(meta.dropped) or 0
  if dropped > 0 then sub[#sub + 1] = plural(dropped, "sample") .. " dropped" end
  if left_out > 0 then
    sub[#sub + 1] = plural(left_out, "frame") .. " under " .. (M.MIN_SHARE * 100) .. "% not drawn"
  end
  w(format('<text class="sub" x="%d" y="42" text-anchor="middle">%s</text>\n',
    M.WIDTH / 2, concat(sub, " \194\183 ")))

  -- Legend: one swatch per state with its share of all samples, centred
  -- with text widths estimated at CW px per character (the script lays it
  -- out again with the real widths).
  local items, extra = {}, 0
  local diff = p.diff
  local lead = "Colour = VM state:"
  if diff then
    local k = tonumber(meta.diff_scale)
    lead = "Colour = change, after minus before" ..
      (k and format(" (before scaled x%.3g to the same total):", k) or ":")
    items[1] = {{[3] = {0xff, 0x50, 0x50}, [4] = {0xff, 0x50, 0x50}}, "grew"}
    items[2] = {{[3] = {0x50, 0x50, 0xff}, [4] = {0x50, 0x50, 0xff}}, "shrank"}
    items[3] = {{[3] = {0xe8, 0xe8, 0xe8}, [4] = {0xe8, 0xe8, 0xe8}}, "within the noise; width = after"}
  else
    for _, s in ipairs(M.STATES) do
      local n = root.states[s[1]] or 0
      items[#items + 1] = {s, format("%s (%s) %.1f%%", s[2], s[1], total > 0 and n * 100 / total or 0)}
    end
    for k, n in pairs(root.states) do if not STATE[k] then extra = extra + n end end
    if extra > 0 then items[#items + 1] = {OTHER, format("Other %.1f%%", extra * 100 / total)} end
  end
  local CW, GAP = 6.5, 20
  local legend_w = #lead * CW + 10
  for _, it in ipairs(items) do legend_w = legend_w + 17 + nchars(it[2]) * CW + GAP end
  local x = floor((M.WIDTH - legend_w + GAP) / 2)
  w(diff and '<g class="legend" id="legend"><title>Each frame is coloured by how many more (red) or ' ..
    'fewer (blue) samples it has, its own and its callees&#39;, in the after profile than in the ' ..
    'before profile scaled to the same total; widths are the after profile&#39;s.</title>\n' or
    '<g class="legend" id="legend"><title>Each frame is coloured by the VM state most of its samples ' ..
    '(its own and its callees&#39;) were taken in; percentages are of all samples.</title>\n')
  w(format('<text x="%d" y="66">%s</text>\n', x, esc(lead)))
  x = x + #lead * CW + 10
  for _, it in ipairs(items) do
    w(format('<rect x="%.0f" y="55" width="12" height="12" fill="%s" stroke="#666" stroke-width="0.5"/>' ..
      '<text x="%.0f" y="66">%s</text>\n', x, fill(it[1], ""), x + 17, esc(it[2])))
    x = x + 17 + nchars(it[2]) * CW + GAP
  end
  w('</g>\n')
  w('<g id="reset" class="h"><rect x="10" y="10" width="84" height="20" rx="3"/>' ..
    '<text x="52" y="24" text-anchor="middle" class="btn">Reset zoom</text></g>\n')
  if total > 0 then
    w(format('<g id="search"><title>Highlight the frames whose name matches a regular expression ' ..
      '(Ctrl-F); again to clear</title><rect x="%d" y="10" width="84" height="20" rx="3"/>' ..
      '<text x="%d" y="24" text-anchor="middle" class="btn">Search</text></g>\n',
      M.WIDTH - 94, M.WIDTH - 52))
  end

  if total == 0 then
    w(format('<text class="sub empty" x="%d" y="%d" text-anchor="middle">No samples collected</text>\n',
      M.WIDTH / 2, M.TOP + 12))
  end

  -- Colours, row by row from the left: a frame touching its left
  -- neighbour gets a shade that stands out from it (M.MIN_CONTRAST).
  local rows = {}
  for _, node in ipairs(drawn) do
    local r = rows[node.depth] or {}
    rows[node.depth] = r
    r[#r + 1] = node
  end
  local maxd = 0
  if diff then
    for _, node in ipairs(drawn) do
      if node.parent and not node.noise then
        maxd = math.max(maxd, math.abs(node.count - node.before))
      end
    end
  end
  for _, r in pairs(rows) do
    table.sort(r, function(a, b) return a.start < b.start end)
    local prev
    for _, node in ipairs(r) do
      if not node.parent then
        node.rgb = {0xc4, 0xc4, 0xc4}
      elseif diff then
        node.rgb = diff_rgb(node.noise and 0 or node.count - node.before, maxd)
      else
        local st, v = dominant(node.states), node.shade
        local c = rgb_at(st, v)
        if prev and prev.start + prev.count == node.start and
           M.contrast(c, prev.rgb) < M.MIN_CONTRAST then
          for _, d in ipairs({0.5, 0.25, 0.75}) do
            local alt = rgb_at(st, (v + d) % 1)
            if M.contrast(alt, prev.rgb) >= M.MIN_CONTRAST then c = alt; break end
          end
        end
        node.rgb = c
      end
      prev = node
    end
  end

  -- Frames.
  local scale = total > 0 and W / total or 0
  local base = M.TOP + depth_max * FH    -- y of the root row
  for _, node in ipairs(drawn) do
    local fx, fw = PAD + node.start * scale, node.count * scale
    local y = base - node.depth * FH
    local colour = node.parent and hex(node.rgb) or ROOT_FILL
    local short = node.short ~= node.label and node.short or nil
    w(format('<g class="f" data-s="%.0f" data-n="%.0f" data-d="%d"%s>', node.start, node.count,
      node.depth, short and (' data-short="' .. esc(short) .. '"') or ""))
    w('<title>', tooltip(node, total, us, clock_time, diff, memo), '</title>')
    w(format('<rect x="%.2f" y="%d" width="%.2f" height="%d" fill="%s"/>', fx, y, fw, FH - 1, colour))
    w(format('<text x="%.2f" y="%.1f">%s</text></g>\n', fx + 3, y + FH - 4.5,
      esc(M.fit(node.label, short, fw))))
  end

  w(format('<text id="details" x="%d" y="%d">%s</text>\n', PAD, height - 10,
    total > 0 and "Click a frame to zoom in; Escape or Reset zoom to go back; Ctrl-F or Search " ..
    "highlights frames. Hover for details." or ""))
  w(format('<text id="matched" x="%d" y="%d" text-anchor="end"></text>\n', M.WIDTH - PAD, height - 10))
  w('<script type="text/ecmascript"><![CDATA[\n', SCRIPT, ']]></script>\n')
  w('</svg>\n')
  out[#out + 1] = concat(buf)
  return out
end

function M.render(p, meta)
  return concat(M.render_parts(p, meta))
end

return M
