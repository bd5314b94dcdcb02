/*
** Test library for native stacks through the FFI
** (tests/lua/test_native.lua): ljpf_outer -> middle -> inner, the inner
** one burning most of the time. Called with ffi.load from interpreted and
** from compiled Lua code.
*/
#define NOINLINE __attribute__((noinline))

static volatile double sink;

static NOINLINE double ljpf_inner(long n)
{
  double x = 0.0;
  long i;
  for (i = 0; i < n; i++) x += (double)(i % 5) * 0.25;
  return x;
}

static NOINLINE double ljpf_middle(long n)
{
  double x = ljpf_inner(n);
  sink = x;
  return x + 2.0;
}

double ljpf_outer(long n)
{
  double x = ljpf_middle(n);
  sink = x;
  return x + 1.0;
}
