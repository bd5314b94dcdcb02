/*
** Test library for separate debug files (tests/lua/test_native_names.lua):
** ljpd_outer (exported) -> dbg_middle -> dbg_inner (static: named only by
** a symbol table). tests/native/mkdebug.sh makes stripped copies whose
** symbols live in separate debug files, found by build ID or by
** .gnu_debuglink.
*/
#define NOINLINE __attribute__((noinline))

static volatile double sink;

static NOINLINE double dbg_inner(long n)
{
  double x = 0.0;
  long i;
  for (i = 0; i < n; i++) x += (double)(i % 7) * 0.5;
  return x;
}

static NOINLINE double dbg_middle(long n)
{
  double x = dbg_inner(n);
  sink = x;
  return x + 2.0;
}

double ljpd_outer(long n)
{
  double x = dbg_middle(n);
  sink = x;
  return x + 1.0;
}
