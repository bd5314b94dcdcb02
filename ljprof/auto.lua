-- luajit -l ljprof.auto app.lua: profile app.lua as the environment
-- variable LJPROF says, without changing it (LJPROF unset: the defaults;
-- LJPROF=off: nothing). The parser and the start are jit/prof/auto.lua's,
-- shared with LD_PRELOAD=libljprof.so (src/preload.c requires this module
-- in each Lua state a host makes). A bad value is one line on stderr and
-- the program runs unprofiled. docs/usage.md, "Starting from the
-- environment".
return require("jit.prof.auto").main()
