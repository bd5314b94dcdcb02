/*
** Windows: no sampling signal. The ticks are taken by timer_win.c's
** thread with the profiled thread suspended; what signal.c does on Linux
** besides (install the handler, pin the library, count stale signals)
** has no Windows meaning: the signal option is accepted and unused, the
** DLL stays loaded as long as the Lua state that required it (LuaJIT
** unloads a C module at lua_close, after the run's __gc stopped it).
** Normal context.
*/
#ifdef _WIN32  /* the rock compiles every src file: nothing elsewhere */
#include <stdio.h>

#include "ljp.h"

_Atomic uint64_t ljp_stale_signals;

int ljp_signal_install(int signo, char *err, size_t errlen)
{
  (void)signo; (void)err; (void)errlen;
  return 0;
}

int ljp_signal_pinned(void) { return 0; }

#endif /* _WIN32 */
