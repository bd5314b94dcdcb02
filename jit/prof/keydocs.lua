----------------------------------------------------------------------------
-- jit.prof.keydocs: what a reader is told of each option key, beside what
-- a run checks (jit.prof.options' KEYS): its default, its spelling in the
-- ljprof command (cli; cli_sets: the value a flag without a value sets,
-- -z sets root), lacks[front end]: why a front end has no spelling for it,
-- and as_given[front end]: the value is taken there as given, unchecked.
--
--   local keys = require("jit.prof.options").documented()
--
-- Rules:
-- - Nothing here is needed to start or write a run: a starting run loads
--   jit.prof.options only, and this text would be allocated before the
--   program's bytecode (options.lua's first rule says why that matters:
--   8.7 KB kept and 19 KB allocated while loading, measured with
--   collectgarbage("count") around require, when these fields were in
--   KEYS). tests/lua/test_options.lua reads both through documented() and
--   checks every front end against them.
-- - One entry per key of KEYS, no other: documented() refuses a mismatch.
----------------------------------------------------------------------------

return {
  clock = {default = "cpu", cli = "-c, --clock"},
  rate = {default = "100 (-jprof: i10; LJPROF: 99)", cli = "-r, --rate"},
  interval = {default = "from rate=",
    lacks = {jprof = "the letter i<n> (key i), as -jp's", cli = "--rate only"}},
  i = {default = "i10",
    lacks = {cli = "--rate only", env = "interval= or rate= (view= refuses i)"}},
  duration = {default = "the whole run", cli = "-d, --duration",
    lacks = {env = "an LJPROF run is the program's run, or periodic exports (every=)"}},
  view = {default = "f", cli = "-v, --view"},
  format = {default = "from the output's name", cli = "-f, --format"},
  output = {default = "standard output (-jprof), <app>.svg (ljprof), ljprof-%p-%t.pb.gz (LJPROF)", cli = "-o, --output",
    as_given = {jprof = "no placeholders: only LJPROF's runs fill them", cli = "the same"}},
  native = {default = "on", cli = "-n, --no-native; -N, --show-native", cli_sets = {"off", "show"}},
  zones = {default = "off", cli = "-z, --zones", cli_sets = {"root"}},
  calls = {default = "off", cli = "--calls", cli_sets = {"on"}},
  aborts = {default = "off", cli = "--aborts", cli_sets = {"on"}},
  inline = {default = "recorded", cli = "--inline"},
  private = {default = "off", cli = "--private", cli_sets = {"on"}},
  every = {default = "none", lacks = {jprof = "writes at exit", cli = "writes at exit"}},
  keep = {default = "all", lacks = {jprof = "no exports", cli = "no exports"}},
  maxbytes = {default = "any", lacks = {jprof = "no exports", cli = "no exports"}},
  signal = {default = "USR2",
    lacks = {jprof = "the exit signals write the run", cli = "passes the exit signals on"}},
  control = {default = "snapshot",
    lacks = {jprof = "no control signal", cli = "no control signal"}},
  start = {default = "running",
    lacks = {jprof = "starts with the program", cli = "starts with the program"}},
  luajit = {default = "luajit on PATH", cli = "--luajit",
    lacks = {jprof = "runs in the interpreter", env = "runs in the interpreter"}},
  quiet = {default = "off", cli = "-q, --quiet", cli_sets = {"on"},
    lacks = {jprof = "no progress line", env = "no progress line"}},
}
