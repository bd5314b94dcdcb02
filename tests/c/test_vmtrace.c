/* Unit test of the signal-context trace reader (src/vm_luajit.h,
** ljp_vm_trace): trace number tr's object from the trace array, or 0. A
** trace being recorded is J->cur, inside the jit_State that follows the
** global state, before the trace array's field: not a trace yet. A saved
** trace may be allocated anywhere else, right after the GG_State too
** (smaller than 8 KB): the old test (within 8 KB after g) took such a
** trace for the one being recorded, at some heap layouts (test_selfcheck,
** "its object could not be read", 1 run in 11 at CI's checkout path). */
#include <stdint.h>
#include <string.h>

#include "../../src/vm_luajit.h"
#include "check.h"

ljp_tmlayout ljp_tml;

static void test_vm_trace(void)
{
  static uint64_t gg[2048];        /* 16 KB: a GG_State and what follows */
  static uint64_t far_trace[64];   /* a trace elsewhere on the heap */
  uintptr_t g = (uintptr_t)gg, arr[8];
  uint32_t size = 8;
  memset(&ljp_tml, 0, sizeof(ljp_tml));
  ljp_tml.ok = 1;
  ljp_tml.g_trace = 1200;          /* J->trace, after J->cur */
  ljp_tml.g_sizetrace = 1212;
  memcpy((char *)gg + ljp_tml.g_sizetrace, &size, 4);
  arr[0] = 0;
  arr[1] = g + 400;                /* J->cur: the trace being recorded */
  arr[2] = g + 6000;               /* saved right after a 5.9 KB GG_State */
  arr[3] = (uintptr_t)far_trace;
  arr[4] = 0;
  arr[5] = g + ljp_tml.g_trace;    /* (the field itself: never a trace) */
  arr[6] = g + 8191;
  arr[7] = g + 8192;
  {
    uintptr_t a = (uintptr_t)arr;
    memcpy((char *)gg + ljp_tml.g_trace, &a, sizeof(a));
  }
  CHECK_EQ(ljp_vm_trace(g, 1), 0);
  CHECK(ljp_vm_trace(g, 2) == g + 6000);
  CHECK(ljp_vm_trace(g, 3) == (uintptr_t)far_trace);
  CHECK_EQ(ljp_vm_trace(g, 4), 0);
  CHECK_EQ(ljp_vm_trace(g, 5), 0);
  CHECK(ljp_vm_trace(g, 6) == g + 8191);
  CHECK(ljp_vm_trace(g, 7) == g + 8192);
  CHECK_EQ(ljp_vm_trace(g, 8), 0);   /* beyond the array's size */
  CHECK_EQ(ljp_vm_trace(g, 0), 0);
  CHECK_EQ(ljp_vm_trace(g, -1), 0);
  ljp_tml.ok = 0;
  CHECK_EQ(ljp_vm_trace(g, 2), 0);   /* the layout not proven */
}

int main(void)
{
  test_vm_trace();
  return check_done("vmtrace");
}
