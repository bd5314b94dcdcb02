/*
** Test library for native stacks through the FFI
** (tests/lua/test_native.lua): ljpf_outer -> middle -> inner, the inner
** one burning most of the time. Called with ffi.load from interpreted and
** from compiled Lua code. ljpf_two: one C function with two native stacks
** below it (test_merge_native: a compiled loop calling C through the FFI
** stays in its trace, reaches no safe point and fills the ring).
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

/* two(n, k): ljpf_two -> ljpf_alpha -> ljpf_inner when k is 1,
** ljpf_two -> ljpf_beta -> ljpf_inner otherwise (the same leaf). */
static NOINLINE double ljpf_alpha(long n)
{
  double x = ljpf_inner(n);
  sink = x;
  return x + 2.0;
}

static NOINLINE double ljpf_beta(long n)
{
  double x = ljpf_inner(n);
  sink = x;
  return x + 3.0;
}

double ljpf_two(long n, int k)
{
  double x = k == 1 ? ljpf_alpha(n) : ljpf_beta(n);
  sink = x;
  return x + 1.0;
}
