-- One option reader (jit/prof/options.lua's key table, issue 30): every
-- key any front end accepts is in KEYS, and a bad value of each
-- key is refused with the same line through every front end that has
-- it, in child processes as a user meets them:
--   -jprof   luajit -jprof=f/key=BAD (the letters, i<n>) -> "jit.prof: <line>"
--   ljprof   build/ljprof --key=BAD app.lua           -> "ljprof: <line>", status 2
--   LJPROF   LJPROF=key=BAD luajit -l ljprof.auto     -> "ljprof: LJPROF: <line>; not profiling"
-- where <line> is options.value(key, BAD)'s. A front end that lacks a key
-- says why in the table, and refuses the key as unknown; one that takes
-- a key's value as given (-jprof's and ljprof's output names) says so.
-- Also: the one
-- reading of numbers, and each key's accepted values.
local t = require("t")
local options = require("jit.prof.options")
local KEYS = options.documented()  -- with jit.prof.keydocs (default, cli, lacks...)

local q = t.q
local dir = t.tmpdir()
local LJ = t.LUAJIT
local LJPROF = t.BUILD .. "/ljprof"

t.write(dir .. "/app.lua", 'io.write("ran\\n")\n')

-- A bad value and a good one of every key (tests/lua/jprof_cases.lua,
-- shared with the Windows test; a key without a sample fails the first
-- case: a new key gets its test there).
local SAMPLES = require("jprof_cases").SAMPLES
local FRONT = {"jprof", "cli", "env"}

t.case("every key is in the table with a spelling or a reason per front end", function()
  t.ok(#KEYS >= 20, "keys: " .. #KEYS)
  for _, k in ipairs(KEYS) do
    t.eq(KEYS[k.key], k, k.key .. ": indexed by name")
    t.ok(SAMPLES[k.key], k.key .. ": has samples in this test")
    t.ok(type(k.accepted) == "string" and k.accepted ~= "", k.key .. ": what is accepted")
    t.ok(type(k.default) == "string", k.key .. ": its default")
    for _, fe in ipairs(FRONT) do
      local lacks = k.lacks and k.lacks[fe]
      t.ok((type(k[fe]) == "string") ~= (type(lacks) == "string"),
           k.key .. ": " .. fe .. " has a spelling or says why not, not both")
    end
  end
  for key in pairs(SAMPLES) do t.ok(KEYS[key], key .. ": sampled key is in the table") end
end)

t.case("options.value: the good value taken, the bad one refused in one line", function()
  for _, k in ipairs(KEYS) do
    local s = SAMPLES[k.key] or {}
    if s[2] then t.ok(options.value(k.key, s[2]) ~= nil, k.key .. " " .. s[2]) end
    for _, v in ipairs(k.cli_sets or {}) do
      t.ok(options.value(k.key, v) ~= nil, k.key .. ": the flag's " .. v)
    end
    if s[1] then
      local v, err = options.value(k.key, s[1])
      t.eq(v, nil, k.key .. " " .. s[1] .. " refused")
      t.ok(err and err:find("^bad " .. (k.key == "i" and "interval" or k.key) .. " '") and
           err:find("accepted: " .. k.accepted, 1, true) and not err:find("\n"),
           k.key .. ": " .. tostring(err))
    end
    t.eq(select(2, options.value(k.key, "")), options.bad(k.key, ""), k.key .. ": empty refused")
  end
  t.eq(options.value("rate", "1e3"), 1000, "rate 1e3")
  t.eq(options.value("i", "i"), 1, "i alone is 1 ms")
  t.eq(options.value("i", "i0"), 1, "i0 is 1 ms")
  t.eq(options.value("signal", "sigusr1"), 10, "signal by name")
  t.eq(options.value("signal", "off"), "off", "signal off")
  t.eq(options.value("maxbytes", "2k"), 2048, "size")
end)

t.case("options.number: one reading of numbers", function()
  for s, n in pairs({["99"] = 99, ["0.5"] = 0.5, [".5"] = 0.5, ["1."] = 1, ["1e3"] = 1000,
                     ["2.5E-1"] = 0.25}) do
    t.eq(options.number(s), n, s)
  end
  for _, s in ipairs({"", "-1", "+1", "0x10", "inf", "nan", " 1", "1 ", "1e", "e3", ".", "1..2"}) do
    t.eq(options.number(s), nil, "'" .. s .. "' refused")
  end
end)

local function lines(s)
  local out = {}
  for l in (s or ""):gmatch("[^\n]+") do out[#out + 1] = l end
  return out
end

-- The line a front end gives for key=val (nil: it runs), and its status.
local function through(fe, k, val)
  local out, code
  if fe == "jprof" then
    local opt = k.key == "view" and val or k.key == "i" and "f" .. val or "f/" .. k.key .. "=" .. val
    out, code = t.sh_in(dir, t.CHILD_ENV .. LJ .. " -jprof=" .. q(opt .. ",/dev/null") ..
                        " app.lua 2>&1")
    out = out:gsub("^[^\n]-(jit%.prof: )", "%1")  -- after "luajit: "
  elseif fe == "cli" then
    out, code = t.sh_in(dir, q(LJPROF) .. " " .. q("--" .. k.key .. "=" .. val) ..
                        " -o /dev/null app.lua 2>&1")
  else
    out, code = t.sh_in(dir, t.CHILD_ENV .. "LJPROF=" .. q(k.key .. "=" .. val) .. " " .. LJ ..
                        " -l ljprof.auto app.lua 2>&1 >/dev/null")
  end
  return lines(out), code
end

local PREFIX = {jprof = "jit.prof: ", cli = "ljprof: ", env = "ljprof: LJPROF: "}
local SUFFIX = {jprof = "", cli = "", env = "; not profiling"}

t.case("a bad value of every key: the same line through every front end that has it", function()
  local checked = 0
  for _, k in ipairs(KEYS) do
    local bad = (SAMPLES[k.key] or {})[1]
    for _, fe in ipairs(FRONT) do
      local takes_value = k[fe] and not (fe == "cli" and k.cli_sets) and
                          not (k.as_given and k.as_given[fe])
      if bad and takes_value then
        local want = PREFIX[fe] .. select(2, options.value(k.key, bad)) .. SUFFIX[fe]
        local got, code = through(fe, k, bad)
        t.eq(got[1], want, k.key .. " through " .. fe)
        t.eq(#got, 1, k.key .. " through " .. fe .. ": one line")
        if fe == "cli" then t.eq(code, 2, k.key .. " through cli: status 2") end
        if fe == "jprof" then t.ok(code ~= 0, k.key .. " through jprof: the program does not run") end
        checked = checked + 1
      end
    end
  end
  print("  " .. checked .. " key and front end pairs")
  t.ok(checked >= 30, "pairs checked: " .. checked)
end)

-- What the table says a front end lacks, it refuses as unknown (and a
-- flag of the command takes no value).
t.case("a key a front end lacks is refused there as unknown", function()
  for _, k in ipairs(KEYS) do
    local lacks = k.lacks or {}
    if lacks.jprof then
      local got = through("jprof", {key = k.key}, "1")
      t.ok(got[1] and got[1]:find("^jit%.prof: unknown option '/" .. k.key .. "=1' %(accepted after " ..
           "the letters: /clock="), k.key .. " through jprof: " .. tostring(got[1]))
    end
    if lacks.env then
      local got = through("env", k, "1")
      t.ok(got[1] and got[1]:find("^ljprof: LJPROF: unknown item '" .. k.key .. "=1' %(accepted: " ..
           "clock=, "), k.key .. " through env: " .. tostring(got[1]))
    end
    if lacks.cli then
      local got, code = through("cli", k, "1")
      t.eq(got[1], "ljprof: unknown option '--" .. k.key .. "' (ljprof --help lists the options)",
           k.key .. " through cli")
      t.eq(code, 2, k.key .. " through cli: status 2")
    end
    local flag = k.cli_sets and k.cli:match("(%-%-[%w%-]+)")
    if flag then
      local out, code = t.sh_in(dir, q(LJPROF) .. " " .. flag .. "=on app.lua 2>&1")
      t.eq(out, "ljprof: option " .. flag .. " takes no value ('" .. flag .. "=on' given)\n",
           k.key .. ": the flag " .. flag .. " takes no value")
      t.eq(code, 2, k.key .. " flag: status 2")
    end
  end
end)

-- What a reader is told of the keys (jit.prof.keydocs) is not loaded by
-- a starting run: it would be allocated before the program's bytecode.
t.case("a starting run loads the key table, not the keys' docs", function()
  t.write(dir .. "/loaded.lua", 'io.write(tostring(package.loaded["jit.prof.options"] ~= nil), " ", ' ..
          'tostring(package.loaded["jit.prof.keydocs"] ~= nil), "\\n")\n')
  local out = t.sh_in(dir, t.CHILD_ENV .. LJ .. " -jprof=f,/dev/null loaded.lua 2>&1")
  t.eq(out, "true false\n", "-jprof: options loaded, keydocs not")
  out = t.sh_in(dir, t.CHILD_ENV .. "LJPROF=output=/dev/null " .. LJ .. " -l ljprof.auto loaded.lua 2>&1")
  t.eq(out, "true false\n", "LJPROF: options loaded, keydocs not")
end)

os.execute("rm -rf " .. q(dir))
t.done()
