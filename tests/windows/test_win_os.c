/* The Windows side of the OS interface (src/os_win.c/.h), under Wine: the
** fault-safe read (ljp_peek: ReadProcessMemory) reads what is mapped and
** fails, without a fault, on the first 64 KB and on kernel addresses;
** on a no-access page and a released region it returns without a fault
** (Windows fails them; Wine reads them, as zeros: its reservations stay
** mapped, and its server reads our memory through the kernel, which
** ignores page protections: measured, printed); ljp_peekv stops at the
** first unreadable range; the timer thread's calls stop a busy thread
** (ljp_os_thread_stop: its PC inside the busy function's loop, its SP inside
** its stack), resume it (it runs on), and the cost of a stop + resume is
** printed (QueryPerformanceCounter, 300 rounds: Wine's cost); the
** waitable-timer sleep sleeps about what it is asked. */
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "../../src/cfi.h"
#include "../../src/os.h"
#include "../c/check.h"

static volatile int stop_busy;
static _Atomic unsigned long long spins;

/* the function the sampled thread runs: its code's extent is known */
__attribute__((noinline)) static void busy(void)
{
  while (!stop_busy) atomic_fetch_add_explicit(&spins, 1, memory_order_relaxed);
}

static void *busy_handle;
static uintptr_t busy_sp;

static unsigned busy_main(void *arg)
{
  int here;
  (void)arg;
  busy_sp = (uintptr_t)&here;
  busy_handle = ljp_os_thread_open();
  busy();
  return 0;
}

static void test_peek(void)
{
  static char src[4096];
  char dst[64];
  char *page;
  struct iovec l[2], r[2];
  memset(src, 'x', sizeof(src));
  memcpy(src, "ljprof", 6);
  CHECK_EQ(ljp_peek(dst, (uintptr_t)src, 6), 0);
  CHECK(memcmp(dst, "ljprof", 6) == 0);
  CHECK_EQ(ljp_peek(dst, 0, 8), -1);              /* NULL */
  CHECK_EQ(ljp_peek(dst, 4096, 8), -1);           /* the first 64 KB */
  /* a released region, and a read running off a committed page */
  page = VirtualAlloc(NULL, 8192, MEM_RESERVE, PAGE_NOACCESS);
  CHECK(page != NULL);
  CHECK(VirtualAlloc(page, 4096, MEM_COMMIT, PAGE_READWRITE) == page);
  memcpy(page, "abc", 3);
  CHECK_EQ(ljp_peek(dst, (uintptr_t)page, 3), 0);
  /* no fault either way (the test goes on); what each returned */
  printf("peek into a no-access page: %d, of a released region: ",
         ljp_peek(dst, (uintptr_t)page + 4090, 16));
  VirtualFree(page, 0, MEM_RELEASE);
  printf("%d (0: read, -1: failed)\n", ljp_peek(dst, (uintptr_t)page, 3));
  CHECK_EQ(ljp_peek(dst, (uintptr_t)0xffff800000001000ull, 8), -1); /* kernel */
  /* peekv: the bytes up to the first unreadable range */
  l[0].iov_base = dst; l[0].iov_len = 6; r[0].iov_base = src; r[0].iov_len = 6;
  l[1].iov_base = dst + 6; l[1].iov_len = 4; r[1].iov_base = (void *)4096;
  r[1].iov_len = 4;
  CHECK_EQ(ljp_peekv(l, r, 1), 6);
  CHECK_EQ(ljp_peekv(l, r, 2), 6);
  r[1].iov_base = src + 6;
  CHECK_EQ(ljp_peekv(l, r, 2), 10);
}

static void test_stop(void)
{
  void *th;
  int i, stops = 0, in_busy = 0, sp_ok = 0;
  uint64_t t0, total = 0;
  unsigned long long before;
  CHECK_EQ(ljp_os_ticker_start(&th, busy_main, NULL), 0);
  while (!busy_handle || atomic_load(&spins) < 1000) ljp_os_yield();
  for (i = 0; i < 300; i++) {
    ljp_regs regs;
    uintptr_t pc = 0;
    t0 = ljp_now_ns();
    if (ljp_os_thread_stop(busy_handle, &regs, &pc) == 0) {
      stops++;
      if (pc - (uintptr_t)busy < 256) in_busy++;  /* its small loop */
      if (regs.r[LJP_CFI_RSP] < busy_sp && busy_sp - regs.r[LJP_CFI_RSP] < 4096 &&
          regs.r[LJP_CFI_RA] == pc)
        sp_ok++;
      ljp_os_thread_go(busy_handle);
      total += ljp_now_ns() - t0;
    }
  }
  before = atomic_load(&spins);
  t0 = ljp_now_ns();
  while (atomic_load(&spins) == before && ljp_now_ns() - t0 < 2000000000u)
    ljp_os_yield();
  CHECK(atomic_load(&spins) > before);          /* resumed: it runs on */
  stop_busy = 1;
  ljp_os_ticker_join(th);
  ljp_os_thread_close(busy_handle);
  CHECK_EQ(stops, 300);
  CHECK_EQ(in_busy, stops);
  CHECK_EQ(sp_ok, stops);
  printf("stop + registers + resume: %.1f us per round (%d rounds, Wine's cost "
         "when run under Wine)\n", stops ? total / 1e3 / stops : 0.0, stops);
}

static void test_sleep(void)
{
  void *s = ljp_os_sleeper_open();
  uint64_t t0 = ljp_now_ns(), dt;
  int i;
  CHECK(s != NULL);
  for (i = 0; i < 20; i++) ljp_os_sleep_ns(s, 2000000u);  /* 20 x 2 ms */
  dt = ljp_now_ns() - t0;
  printf("20 sleeps of 2 ms: %.1f ms\n", dt / 1e6);
  CHECK(dt >= 38000000u);                        /* never shorter */
  ljp_os_sleeper_close(s);
}

int main(void)
{
  test_peek();
  test_stop();
  test_sleep();
  return check_done("win_os");
}
