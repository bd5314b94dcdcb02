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
** (2e9 ms, 23 days) that its timer never fires, and a callback that does
** nothing. So jit.profile (jit.p) cannot run at the same time, and
** a clock that needs the same signal (itimer: SIGPROF, whose handler
** LuaJIT's profiler takes), is refused. At start, PROF's IR opcode is
** read from jit.vmdef (require'd in the profiled state: it is LuaJIT's
** own module) for tracesnap.c's function-change checks. Normal context,
** on the profiled thread, at start and stop.
*/
#include <signal.h>
#include <stdio.h>

#include <lauxlib.h>
#include <luajit.h>

#include "clocks.h"
#include "jitmode.h"
#include "tracesnap.h"

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
  luaJIT_profile_start(L, "fi2000000000", never, NULL);
  if (ljp_ts_op_prof < 0) {  /* PROF's IR opcode, by its public name */
    static const char chunk[] =
      "local ok, v = pcall(require, 'jit.vmdef')\n"
      "if not ok or type(v) ~= 'table' or type(v.irnames) ~= 'string' then return -1 end\n"
      "local i = v.irnames:find('PROF  ', 1, true)\n"
      "if not i or (i - 1) % 6 ~= 0 then return -1 end\n"
      "return (i - 1) / 6\n";
    int top = lua_gettop(L);
    if (!luaL_loadstring(L, chunk) && !lua_pcall(L, 0, 1, 0) &&
        lua_isnumber(L, -1) && lua_tointeger(L, -1) < 256)
      ljp_ts_op_prof = (int)lua_tointeger(L, -1);
    lua_settop(L, top);
  }
  return 0;
}

void ljp_jitmode_stop(lua_State *L)
{
  luaJIT_profile_stop(L);  /* the mode off, its traces flushed */
}
