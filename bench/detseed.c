/*
** LD_PRELOAD shim for bench/icount.lua: LuaJIT's random seed made
** deterministic. LuaJIT seeds its PRNG (string hashing, the random part
** of trace-abort penalties) from the getrandom system call, which it makes
** through syscall(2). Here that call returns bytes derived from
** $LJPROF_BENCH_SEED instead, so that a run's trace selection, and with
** the address space layout fixed (setarch -R) its instruction count,
** repeat exactly; every other system call goes through. For measurement
** only: never load it into a program that needs real randomness.
*/
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdarg.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

long syscall(long n, ...)
{
  static long (*next)(long, ...);
  long a[6];
  va_list ap;
  int i;
  va_start(ap, n);
  for (i = 0; i < 6; i++) a[i] = va_arg(ap, long);
  va_end(ap);
  if (n == SYS_getrandom) {
    const char *s = getenv("LJPROF_BENCH_SEED");
    unsigned long seed = s ? strtoul(s, NULL, 10) : 0;
    unsigned char *p = (unsigned char *)a[0];
    size_t k, len = (size_t)a[1];
    for (k = 0; k < len; k++) p[k] = (unsigned char)(k * 131u + 7u + seed * 97u + (seed >> 8));
    return (long)len;
  }
  if (!next) next = (long (*)(long, ...))dlsym(RTLD_NEXT, "syscall");
  return next(n, a[0], a[1], a[2], a[3], a[4], a[5]);
}
