-- What the -jprof front end's tests check, shared by the Linux tests
-- (test_jitprof.lua, test_options.lua) and the Windows one
-- (tests/windows/test_jprof.lua, under Wine): a report's lines and their
-- grammar (the numbers that vary per run taken out), the comparison of
-- -jprof=opt with -jp=opt on the same workload, the bad options and the
-- one line each is refused with, and a bad and a good value of every
-- option key; and the annotation workload.
local M = {}

-- The annotation workload: hot lines far from the top of the file (-jp's
-- excerpts, view a), interpreted; reps: its outer loop's count.
function M.annotated(reps)
  return ([[
-- annotation workload
jit.off()

local function outer(n)
  local s = 0
  for i = 1, n do
    s = s + i %% 7
  end
  return s
end




local function inner(n)
  local s = 0
  for i = 1, n do s = s + i %% 5 end
  return s
end

local r = 0
for k = 1, %d do r = r + outer(600000) + inner(200000) end
print(r)
]]):format(reps)
end

-- The report's lines, up to ljprof's own "Hot but interpreted" section
-- (after a blank line), which -jp does not have.
function M.lines(s)
  local r = {}
  s = s:gsub("\n\nHot but interpreted.*$", "\n")
  for l in s:gmatch("[^\n]+") do r[#r + 1] = l end
  return r
end

-- A line's grammar: the numbers that vary per run replaced, the rest kept.
function M.shape(l)
  -- -jp prints an unnamed C function as its address; ljprof by object
  -- and offset (stable across runs): the same frame
  l = l:gsub("@0x%x+", "@0x"):gsub("luajit%+0x%x+", "@0x")
  -- ljprof's text views leave the interpreter's unnamed C function
  -- (luajit's pmain, below the main chunk) out: it is no Lua function
  -- (issue 27). Folded stacks (G) keep it, as -jp's do.
  if not l:find(";", 1, true) then l = l:gsub(" < @0x", ""):gsub("@0x > ", "") end
  local n
  l, n = l:gsub("^  ([%-<>][%-<>]) %s*%d+(%%?)  ", "  %1 N%2  ")  -- second level
  if n == 0 then l, n = l:gsub("^%s*%d+(%%?)  ", "N%1  ") end        -- top level
  if n == 0 then l, n = l:gsub("^%s*%d+(%%?) | ", "N%1 | ") end      -- annotation
  if n == 0 then l = l:gsub("^(.-) %d+$", "%1 N") end                 -- G, output
  return l
end

-- A shape repeated on neighbouring kept lines counts once: how many lines
-- of one shape a report has (G with v: one "Interpreted N" per group of
-- stacks the interpreter was sampled in) depends on what was sampled.
function M.shapes(s, keep)
  local r = {}
  for _, l in ipairs(M.lines(s)) do
    if not keep or keep(l) then
      local sh = M.shape(l)
      if sh ~= r[#r] then r[#r + 1] = sh end
    end
  end
  return r
end

function M.same(a, b)
  if #a ~= #b then return false end
  for i = 1, #a do if a[i] ~= b[i] then return false end end
  return true
end

-- -jprof=opt and -jp=opt on the same script (run(option, script) runs
-- it: output and status): the same lines, in the same order, once the
-- numbers are taken out. Sampling is noisy, so a mismatch is tried once
-- more before it counts. Checked with t (tests/lua/t.lua); the -jprof
-- report's shapes are returned.
function M.compare(t, run, opt, script, keep)
  local mine, theirs
  for _ = 1, 2 do
    mine = M.shapes(run("-jprof=" .. opt, script), keep)
    theirs = M.shapes(run("-jp=" .. opt, script), keep)
    if M.same(mine, theirs) then break end
  end
  t.ok(M.same(mine, theirs), "-jprof=" .. opt .. " vs -jp=" .. opt .. ":\n  mine:   " ..
    table.concat(mine, "\n          ") .. "\n  theirs: " .. table.concat(theirs, "\n          "))
  t.ok(#mine >= 2, "-jprof=" .. opt .. " printed a report")
  return mine
end

-- Bad -jprof options and (a part of) the one line each is refused with;
-- %s stands for VIEW, %D for the durations accepted.
M.VIEW = "-jp's view letters f F l s p v z r a A G <n> -<n> m<n> (depth up to 100000); " ..
         "-jprof's also take i<n>, the interval"
M.BAD = {
  {"x", "jit.prof: bad view 'x' (letter 'x' unknown; accepted: %s)\n"},
  {"fm", "jit.prof: bad view 'fm' (letter 'm' unknown; accepted: %s)\n"},
  -- the view's depth, checked as the view (was the library's "bad depth '-1000031'")
  {"f999999", "jit.prof: bad view 'f999999' (depth 999999 too deep; accepted: %s)\n"},
  {"f/clock=sundial", "bad clock 'sundial' (accepted: cpu, wall, itimer, thread)"},
  {"f/format=png", "bad format 'png' (accepted: text, folded, speedscope, pprof, svg, raw)"},
  {"f/duration=-1", "jit.prof: bad duration '-1' (accepted: %D)\n"},
  {"f/duration=2e9", "jit.prof: bad duration '2e9' (accepted: %D)\n"},
  {"f/rate=0x10", "jit.prof: bad rate '0x10' (accepted: 0.017 to 100000 samples per second)\n"},
  {"f/native=maybe", "jit.prof: bad native 'maybe' (accepted: on, off, show)\n"},
  {"f/zones=leaf", "jit.prof: bad zones 'leaf' (accepted: root, off)\n"},
  {"f/calls=yes", "jit.prof: bad calls 'yes' (accepted: on, off)\n"},
  {"f/aborts=yes", "jit.prof: bad aborts 'yes' (accepted: on, off)\n"},
  {"f/private=yes", "jit.prof: bad private 'yes' (accepted: on, off)\n"},
  {"f/inline=all", "jit.prof: bad inline 'all' (accepted: recorded, snapshots, exact, off)\n"},
  {"f/rate=fast", "bad rate 'fast' (accepted: 0.017 to 100000 samples per second)"},
  {"fi70000", "bad interval 'i70000' (accepted: i1 to i60000 milliseconds; i and i0 mean 1 ms, as with -jp)"},
  {"f/colour=red", "unknown option '/colour=red' (accepted after the letters: /clock="},
  {"f/clock", "bad option '/clock' (accepted after the letters:"},
  {"i5/rate=100", "both i5 and /rate=100 set the interval"},
}
for _, c in ipairs(M.BAD) do
  c[2] = c[2]:gsub("%%s", M.VIEW):gsub("%%D", "0.000001 to 1e9 seconds")
end

-- A bad value and a good one of every key (a key without a sample fails
-- test_options' first case: a new key gets its test there). bad = nil:
-- the key takes any text (luajit: a path).
M.SAMPLES = {
  clock = {"sundial", "wall"}, rate = {"fast", "1e3"}, interval = {"0", "0.5"},
  i = {"i70000", "i5"}, duration = {"-1", "2.5"}, view = {"vfq", "vf3m1"},
  format = {"png", "pprof"}, output = {"x%q.folded", "x-%p-%n.folded"},
  native = {"maybe", "show"}, zones = {"leaf", "root"}, calls = {"yes", "on"},
  aborts = {"yes", "off"}, inline = {"all", "exact"}, private = {"yes", "on"},
  every = {"0", "60"}, keep = {"1.5", "10"}, maxbytes = {"1T", "100M"},
  signal = {"TERM", "RTMIN+3"}, control = {"reboot", "toggle"}, start = {"later", "paused"},
  luajit = {nil, "/usr/bin/luajit"}, quiet = {"yes", "on"},
}

return M
