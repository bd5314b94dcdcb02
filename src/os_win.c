/*
** Windows: the OS interface (os.h) for what the Windows build compiles so
** far (the portable core, issue 31): the clock's frequency. The rest of
** os.h gets its Windows side with the files that call it. Compiles to
** nothing elsewhere: a build that takes every src/*.c (the rockspec's one
** compiler call) stays right on Linux.
*/
#ifdef _WIN32
#include <stdatomic.h>

#include "os_decl.h"
#include "os_win.h"

static _Atomic uint64_t qpc_hz;

uint64_t ljp_os_qpc_hz(void)
{
  uint64_t hz = atomic_load_explicit(&qpc_hz, memory_order_relaxed);
  if (!hz) {  /* fixed at boot: racing first calls store the same value */
    LARGE_INTEGER f;
    hz = QueryPerformanceFrequency(&f) && f.QuadPart > 0
             ? (uint64_t)f.QuadPart : 1000000000u;
    atomic_store_explicit(&qpc_hz, hz, memory_order_relaxed);
  }
  return hz;
}

#endif /* _WIN32 */
