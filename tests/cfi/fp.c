/* Built -O2 -fno-omit-frame-pointer: a frame-pointer chain the signal
** test of test_cfi.c can follow by hand. */
#include <math.h>
#include "fixture.h"

#define NOINLINE __attribute__((noinline, noclone))
static volatile double sink;

NOINLINE double fp_leaf(long n)
{
  double s = 0;
  long i;
  for (i = 0; i < n; i++) {
    s += (double)(i & 7) * 0.5;
    if ((i & 1023) == 0) s += sin((double)i);  /* sometimes in libm */
  }
  sink = s;
  return s;
}
const unsigned char *fp_leaf_addr = (const unsigned char *)(void *)fp_leaf;

static NOINLINE double fp_mid(long n)
{
  double r = fp_leaf(n);
  sink = r;
  return r + 1;
}

NOINLINE double fp_busy(long n)
{
  double r = fp_mid(n);
  sink = r;
  return r + 1;
}

/* The end of the normal-context chain: omit.c -> fp_top -> probe. */
static NOINLINE long fp_bottom(long n, cfi_probe_fn probe)
{
  long r = probe(n) + 1;
  sink = (double)r;
  return r;
}

NOINLINE long fp_top(long n, cfi_probe_fn probe)
{
  long r = fp_bottom(n + 1, probe);
  sink = (double)r;
  return r * 2;
}
