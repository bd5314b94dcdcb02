/*
** Exact inlined frames (record option inline = "exact"): LuaJIT's own
** profiling mode, the one jit.p's "f" uses. Every trace is compiled anew
** with a snapshot at each change of function (lj_record.c), so that the
** snapshot whose machine code holds a sample's PC names the function that
** ran there, inlined or not (tracesnap.c reads it). This changes the
** compiled code (a guard per function change; jit.p's cost): it is opt-in
** and the run's statistics say so.
**
** The mode is set the only public way, luaJIT_profile_start with mode
** "f": LuaJIT's built-in profiler is started with an interval so long
** (2e9 ms, 23 days) that its timer never fires (100 ms on Windows,
** below), and a callback that does nothing. So jit.profile (jit.p) cannot
** run at the same time, and a clock that needs the same signal (itimer:
** SIGPROF, whose handler LuaJIT's profiler takes), is refused. At start,
** the VM side learns PROF's IR opcode (vm.h, ljp_vm_learn_prof_op: by its
** name in jit.vmdef, LuaJIT's own module, learnt in a state of ljprof's
** own) for its function-change checks. Normal context, on the profiled thread, at
** start and stop.
*/
#include <signal.h>
#include <stdio.h>

#include <lauxlib.h>
#include <luajit.h>

#include "clocks.h"
#include "jitmode.h"
#include "vm.h"

/* Windows: LuaJIT's profiler is a thread that Sleeps the interval, and
** its stop waits for that thread: with 2e9 ms the stop never returned
** (found under Wine, tests/windows/test_jprof.lua). There the interval is
** 100 ms: stop waits at most that long, and the callback (nothing) runs
** at a safe point 10 times a second. */
#ifdef _WIN32
#define LJP_JITMODE_INTERVAL "fi100"
#else
#define LJP_JITMODE_INTERVAL "fi2000000000"
#endif

static void never(void *data, lua_State *L, int samples, int vmstate)
{
  (void)data; (void)L; (void)samples; (void)vmstate;
}

int ljp_jitmode_start(lua_State *L, ljprof_clock clock, char *err, size_t n)
{
  const ljp_clock_info *c = ljp_clock(clock);
  if (c && c->signo == SIGPROF) {
    char acc[128];
    snprintf(err, n, "ljprof: inline=exact cannot run with clock=%s "
             "(both need SIGPROF; accepted clocks: %s)", c->name,
             ljp_clock_accepted(acc, sizeof(acc), SIGPROF));
    return -1;
  }
  luaJIT_profile_start(L, LJP_JITMODE_INTERVAL, never, NULL);
  ljp_vm_learn_prof_op(L);  /* for tracesnap.c's function-change checks */
  return 0;
}

void ljp_jitmode_stop(lua_State *L)
{
  luaJIT_profile_stop(L);  /* the mode off, its traces flushed */
}
