/* Built -O2 -fomit-frame-pointer: frames without rbp, a variable-size
** frame (alloca), a function with several epilogues (GCC emits
** DW_CFA_remember_state / restore_state for them) and a walk through
** libc's qsort, ending in fp.c's chain and the test's probe. */
#include <alloca.h>
#include <stdlib.h>
#include <string.h>
#include "fixture.h"

#define NOINLINE __attribute__((noinline, noclone))
static volatile long vsink;
static cfi_probe_fn g_probe;
static long g_n, g_res;

static int cmp(const void *a, const void *b)
{
  long x = *(const long *)a, y = *(const long *)b;
  if (g_probe) {  /* the deepest point, once: inside qsort */
    cfi_probe_fn p = g_probe;
    g_probe = NULL;
    g_res = fp_top(g_n, p);
  }
  return (x > y) - (x < y);
}

static NOINLINE long omit_sort(long n)
{
  long v[8];
  int i;
  for (i = 0; i < 8; i++) v[i] = (n * (i + 3)) % 11;
  qsort(v, 8, sizeof(long), cmp);
  return v[0] + g_res;
}

/* Several exits, each with its own epilogue, and callee-saved registers
** live across calls. */
static NOINLINE long omit_multi(long n, long a, long b, long c)
{
  long x = a * n, y = b + n, z = c ^ n;
  if (n < 0) return x;
  vsink = x;
  if (n == 12345) return y + x;
  vsink = y;
  x += omit_sort(n + y);
  if (n == 777) return z + x;
  vsink = z;
  return x + y + z;
}

static NOINLINE long omit_alloca(long n)
{
  size_t len = (size_t)(n % 200) + 64;
  char *buf = alloca(len);  /* a frame of variable size */
  long r;
  memset(buf, (int)n, len);
  r = omit_multi(n, buf[3], buf[len - 1], (long)len);
  vsink = buf[1];
  return r + buf[2];
}

NOINLINE long omit_a(long n, cfi_probe_fn probe)
{
  long r;
  g_probe = probe;
  g_n = n;
  r = omit_alloca(n + 1);
  vsink = r;
  return r - 1;
}
