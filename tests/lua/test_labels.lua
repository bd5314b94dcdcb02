-- Labels (ljprof.label, src/labels.c): the scoped API (push merges, pop
-- restores, the fn form pops on error, the hot path by set id), its
-- one-line errors, the labels a sample carries (the set active at its
-- tick: summary() entries and the structured profile), the handle path
-- through the FFI (tests/c/test_capi.c has ljprof_label_push and
-- ljprof_summary_ex), and the raw profile's
-- version 4 (labels kept across `ljprof report`; older versions still
-- read). Never asserts on time.
local t = require("t")
local ljprof = require("ljprof")
local model = require("jit.prof.model")
local raw = require("jit.prof.raw")
local label = ljprof.label

local function keys_of(l)
  if not l then return "" end
  local t2 = {}
  for k, v in pairs(l) do t2[#t2 + 1] = k .. "=" .. v end
  table.sort(t2)
  return table.concat(t2, ",")
end

t.case("push merges onto the current set, pop restores it, get and flush", function()
  label:flush()
  t.eq(label:get(), nil, "no labels at first")
  label{endpoint = "/api", region = "eu"}
  t.eq(keys_of(label:get()), "endpoint=/api,region=eu", "pushed")
  label{endpoint = "/health", shard = 3}
  t.eq(keys_of(label:get()), "endpoint=/health,region=eu,shard=3",
       "merged: a key pushed again takes the new value, numbers kept as strings")
  local popped = label()
  t.eq(keys_of(label.pairs(popped)), "endpoint=/health,region=eu,shard=3",
       "pop returns the id of the set that was current")
  t.eq(keys_of(label:get()), "endpoint=/api,region=eu", "pop restores the set before")
  label()
  t.eq(label:get(), nil, "empty again")
  t.raises(function() label() end, "ljprof.label: pop from an empty label stack",
           "pop from an empty stack")
  label{a = "1"}; label{b = "2"}
  label:flush()
  t.eq(label:get(), nil, "flush empties the stack")
  label{}
  t.eq(label:get(), nil, "an empty set pushes nothing visible")
  label()
end)

t.case("label(t, fn, ...): fn's results, pops after, also when fn raises", function()
  local a, b = label({endpoint = "/x"}, function(x, y)
    t.eq(keys_of(label:get()), "endpoint=/x", "inside fn")
    return x + 1, y .. "!"
  end, 41, "hi")
  t.eq(a, 42, "first result")
  t.eq(b, "hi!", "second result")
  t.eq(label:get(), nil, "popped after fn")
  local ok, err = pcall(label, {endpoint = "/y"}, function() error("boom", 0) end)
  t.eq(ok, false, "the error goes on")
  t.eq(err, "boom", "with its message")
  t.eq(label:get(), nil, "popped after the error")
  t.raises(function() label({a = "b"}, 42) end, "bad function", "a non-function")
  t.eq(label:get(), nil, "nothing left pushed by the refused call")
end)

t.case("the hot path: label.set once, then label(id) and label()", function()
  local API = label.set{endpoint = "/api"}
  t.eq(type(API), "number", "a set id")
  t.eq(label.set{endpoint = "/api"}, API, "the same content, the same id")
  label(API)
  t.eq(keys_of(label:get()), "endpoint=/api", "pushed by id")
  label(label.set{kind = "read"})
  t.eq(keys_of(label:get()), "endpoint=/api,kind=read", "merged by id")
  label(); label()
  t.eq(label:get(), nil, "popped")
  -- cost: a push and pop pair by id, from compiled code (FFI); printed, not asserted
  local n = 2000000
  local t0 = os.clock()
  for _ = 1, n do label(API); label() end
  local pair = (os.clock() - t0) / n * 1e9
  t0 = os.clock()
  local T = {endpoint = "/api"}
  for _ = 1, n / 10 do label(T); label() end
  local tpair = (os.clock() - t0) / (n / 10) * 1e9
  print(string.format("  push+pop pair: %.1f ns by id, %.0f ns by table", pair, tpair))
end)

t.case("errors: one line naming the bad input and what is accepted", function()
  local cases = {
    {{zone = "x"}, "bad key 'zone'", "reserved key zone"},
    {{vmstate = "x"}, "bad key 'vmstate'", "reserved key vmstate"},
    {{thread = "x"}, "bad key 'thread'", "reserved key thread"},
    {{[""] = "x"}, "bad key ''", "empty key"},
    {{[1] = "x"}, "bad key of type number", "number key"},
    {{a = {}}, "bad value for key 'a' (a table", "table value"},
    {{a = true}, "bad value for key 'a' (a boolean", "boolean value"},
    {{a = string.rep("v", 300)}, "bad value for key 'a'", "long value"},
    {{["a\0b"] = "x"}, "bad key 'a", "key with NUL"},
  }
  for _, c in ipairs(cases) do
    local ok, err = pcall(function() label(c[1]) end)
    t.ok(not ok, c[3] .. " refused")
    err = tostring(err)
    t.ok(err:find(c[2], 1, true) ~= nil, c[3] .. ": " .. err)
    t.ok(err:find("accepted:", 1, true) ~= nil, c[3] .. " says what is accepted: " .. err)
    t.ok(not err:find("\n"), c[3] .. ": one line")
    t.ok(err:find("test_labels.lua:%d+:") ~= nil, c[3] .. ": at the caller's line: " .. err)
  end
  t.raises(function() label("x") end, "bad labels (a table of key = value pairs or a set id",
           "a string")
  t.raises(function() label(99999) end, "cannot push (accepted: a set id", "an unknown id")
  t.eq(label:get(), nil, "nothing pushed by refused calls")
  local many = {}
  for i = 1, 65 do many["k" .. i] = "v" end
  t.raises(function() label(many) end, "at most 64 pairs", "65 pairs")
  for _ = 1, 64 do label{x = "y"} end
  t.raises(function() label{x = "y"} end, "at most 64 label pushes nested", "65 deep")
  label:flush()
end)

-- Two endpoints: the functions of each run only under its labels.
jit.off()   -- interpreted: many safe points, so most samples have their own stack
local function serve_a(n) local s = 0 for i = 1, n do s = s + i % 7 end return s end
local function serve_b(n) local s = 0 for i = 1, n do s = s + i % 5 end return s end
local A, B = label.set{endpoint = "/a"}, label.set{endpoint = "/b", method = "POST"}
local function workload(rounds)
  local r = 0
  for _ = 1, rounds do
    label(A); r = r + serve_a(20000); label()
    label(B); r = r + serve_b(10000); label()
  end
  return r
end

t.case("samples carry the label set active at their tick (summary, profile)", function()
  ljprof.record({clock = "wall", interval = 1})
  workload(3000)                              -- about 0.3 s; never timed
  ljprof.stop()
  local s = ljprof.summary()
  local per, other, mismatched, total = {}, 0, 0, 0
  for _, e in ipairs(s) do
    total = total + e.count
    local k = keys_of(e.labels)
    per[k] = (per[k] or 0) + e.count
    local leaf = e.stack:match("([^;]+)$") or ""
    if leaf == "serve_a" and k ~= "endpoint=/a" then mismatched = mismatched + e.count end
    if leaf == "serve_b" and k ~= "endpoint=/b,method=POST" then mismatched = mismatched + e.count end
    if leaf ~= "serve_a" and leaf ~= "serve_b" then other = other + e.count end
  end
  print(string.format("  %d samples: /a %d, /b %d, none %d; leaf elsewhere %d, mismatched %d",
    total, per["endpoint=/a"] or 0, per["endpoint=/b,method=POST"] or 0, per[""] or 0,
    other, mismatched))
  t.ok(total > 100, "enough samples: " .. total)
  t.ok((per["endpoint=/a"] or 0) > (per["endpoint=/b,method=POST"] or 0),
       "/a does twice the work of /b")
  t.ok((per["endpoint=/b,method=POST"] or 0) > 0, "/b has samples")
  t.ok(mismatched <= total * 0.02, "a leaf under the other endpoint's labels: " .. mismatched)
  -- The structured profile carries the same labels.
  local p = model.from_profile(ljprof.profile())
  local lab = 0
  for _, e in ipairs(p.samples) do
    if e.labels then lab = lab + e.count end
  end
  t.eq(lab, total - (per[""] or 0), "profile(): the same labelled samples")
  t.eq(p.total, total, "profile(): the same total")
end)
jit.on()

t.case("the handle path (FFI): intern, push and pop by id, error codes", function()
  local ffi = require("ffi")
  pcall(ffi.cdef, [[
    int ljprof_label_intern(void *handle, const char *const *kv, int npairs);
    int ljprof_label_push_h(void *handle, int id);
    int ljprof_label_pop_h(void *handle);
  ]])
  local lib = ffi.load(package.searchpath("ljprof", package.cpath))
  local kv = ffi.new("const char *[4]", {"endpoint", "/c", "zone", "x"})
  local h = ffi.cast("void *", ljprof.zone_handle())
  t.eq(lib.ljprof_label_intern(h, kv, 2), -1, "a reserved key: LJPROF_LABEL_EKEY (-1)")
  local id = lib.ljprof_label_intern(h, kv, 1)
  t.ok(id > 0, "a set id: " .. id)
  t.eq(lib.ljprof_label_push_h(h, id), 0, "push by id")
  t.eq(keys_of(label:get()), "endpoint=/c", "visible from Lua")
  t.eq(lib.ljprof_label_pop_h(h), id, "pop returns the id")
  t.eq(lib.ljprof_label_pop_h(h), -7, "empty: LJPROF_LABEL_EEMPTY (-7)")
  t.eq(lib.ljprof_label_push_h(h, 70000), -6, "not a set: LJPROF_LABEL_ESET (-6)")
end)

t.case("raw profile version 4 keeps labels; versions 1-3 still read", function()
  local p = {frames = {{id = 1, lua = true, file = "app.lua", line = 3, linedefined = 2, name = "f"}},
             samples = {{stack = {1}, vmstate = "I", zone = "", count = 5,
                         labels = {endpoint = "/a\tb", region = "eu"}},
                        {stack = {1}, vmstate = "I", zone = "Z", count = 2}},
             total = 7}
  local meta = {clock = "wall", interval_us = 1000, created = 1700000000.25,
                duration_ns = 7000000, thread = "luajit", thread_id = 42, state = 1}
  local data = raw.render(p, meta)
  t.eq(data:match("^[^\n]*"), "LJPROF-RAW 4", "version 4 with labels")
  local q, m = raw.parse(data, "x")
  t.ok(q, "parses: " .. tostring(m))
  t.eq(keys_of(q.samples[1].labels), "endpoint=/a\tb,region=eu", "labels back, TAB escaped")
  t.eq(q.samples[2].labels, nil, "no labels")
  t.eq(q.functions, nil, "no functions: none invented")
  t.eq(m.duration_ns, 7000000, "duration_ns")
  t.eq(m.thread_id, 42, "thread_id")
  t.eq(raw.render(q, m), data, "render(parse(x)) == x")
  -- without labels: the lowest version that holds the profile, as before
  p.samples[1].labels = nil
  t.eq(raw.render(p, meta):match("^[^\n]*"), "LJPROF-RAW 1", "version 1 without labels")
  -- old files
  local v3 = "LJPROF-RAW 3\nmeta\tinterval_us\t1000\nframe\t1\tC\tx\nsample\t4\tC\t\t1\tjunk\n" ..
             "end\t1\t1\t-\t0\t0\n"
  local r3, e3 = raw.parse(v3, "v3")
  t.ok(r3, "a version 3 file reads: " .. tostring(e3))
  t.eq(r3 and r3.samples[1].labels, nil, "a 6th field of version 3 is no label")
  -- hostile version 4 inputs: one line each
  local bad = {
    {"labels\t2\ta\tb\n", "label set id 1"},
    {"labels\t1\ta\n", "a raw profile record"},
    {"labels\t1\ta\tb\ta\tc\n", "distinct non-empty label keys"},
  }
  for _, b in ipairs(bad) do
    local f = "LJPROF-RAW 4\nmeta\tinterval_us\t1000\nframe\t1\tC\tx\n" .. b[1] ..
              "sample\t1\tC\t\t1\t1\nend\t1\t1\t-\t-\t-\t1\n"
    local r, e = raw.parse(f, "h")
    t.ok(not r and tostring(e):find(b[2], 1, true), b[2] .. ": " .. tostring(e))
  end
  local f = "LJPROF-RAW 4\nmeta\tinterval_us\t1000\nframe\t1\tC\tx\nlabels\t1\ta\tb\n" ..
            "sample\t1\tC\t\t1\t2\nend\t1\t1\t-\t-\t-\t1\n"
  local r, e = raw.parse(f, "h")
  t.ok(not r and tostring(e):find("the id of a label set defined above", 1, true),
       "an undefined set: " .. tostring(e))
  f = "LJPROF-RAW 4\nmeta\tinterval_us\t1000\nframe\t1\tC\tx\nlabels\t1\ta\tb\n" ..
      "sample\t1\tC\t\t1\t1\nend\t1\t1\t-\t-\t-\t2\n"
  r, e = raw.parse(f, "h")
  t.ok(not r and tostring(e):find("label sets", 1, true), "a wrong set count: " .. tostring(e))
end)

t.done()
