/*
** Windows: the inline half of the OS interface (os.h), for what the
** Windows build compiles so far (the portable core, issue 31; meson.build
** lists it): the clock, the lock, the yield. Included by os.h only.
*/
#ifndef LJP_OS_WIN_H
#define LJP_OS_WIN_H

#ifndef WIN32_LEAN_AND_MEAN
#define WIN32_LEAN_AND_MEAN
#endif
#ifndef NOMINMAX
#define NOMINMAX  /* windef.h's min/max macros */
#endif
#include <windows.h>
#include <stdint.h>

/* QueryPerformanceFrequency, read once (os_win.c); never 0. */
uint64_t ljp_os_qpc_hz(void);

/* QueryPerformanceCounter in ns: monotonic, takes no lock, any thread. */
static inline uint64_t ljp_now_ns(void)
{
  LARGE_INTEGER c;
  uint64_t hz = ljp_os_qpc_hz(), t;
  QueryPerformanceCounter(&c);
  t = (uint64_t)c.QuadPart;
  return t / hz * 1000000000u + t % hz * 1000000000u / hz;
}

/* SRWLOCK (exclusive): statically initialised, no handle to close. */
typedef SRWLOCK ljp_os_lock;
#define LJP_OS_LOCK_INIT SRWLOCK_INIT
static inline void ljp_os_lock_take(ljp_os_lock *l) { AcquireSRWLockExclusive(l); }
static inline void ljp_os_lock_drop(ljp_os_lock *l) { ReleaseSRWLockExclusive(l); }
static inline void ljp_os_yield(void) { SwitchToThread(); }

#endif
