/*
** A small library that tests/c/test_dlclose.c loads and unloads in a loop
** while other threads are profiled (loader traffic for the object
** registry). Its code and unwind table come and go with each dlopen.
*/
#define NOINLINE __attribute__((noinline))

static volatile long sink;

static NOINLINE long ljpd_inner(long n)
{
  long s = 0, i;
  for (i = 0; i < n; i++) s += i % 5;
  return s;
}

long ljpd_work(long n)
{
  long s = ljpd_inner(n);
  sink = s;
  return s + 1;
}
