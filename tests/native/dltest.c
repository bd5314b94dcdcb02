/*
** A small library that tests/c/test_dlclose.c loads and unloads in a loop
** while other threads are profiled (loader traffic for the object
** registry). Its code and unwind table come and go with each dlopen.
** Built twice: LJPD_VARIANT 1 is another build of it (other code, other
** build ID, the same layout), which tests/c/test_replaced.c loads in its
** place while a snapshot still has the first.
*/
#define NOINLINE __attribute__((noinline))

static volatile long sink;

#ifndef LJPD_VARIANT
#define LJPD_VARIANT 0
#endif

static NOINLINE long ljpd_inner(long n)
{
  long s = 0, i;
#if LJPD_VARIANT == 0
  for (i = 0; i < n; i++) s += i % 5;
#else
  for (i = 0; i < n; i++) s ^= (i * 7 + s) % 11;  /* other code */
#endif
  return s;
}

long ljpd_work(long n)
{
  long s = ljpd_inner(n);
  sink = s;
  return s + 1;
}
