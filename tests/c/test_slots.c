/* Unit tests for the slot table (slots.c): a context's slot, found by its
** state's registry; a run's token, which reaches the context only while
** the run is live; and the close, which waits until no tick is inside the
** slot, so that a late tick never reaches a freed context. The tick here
** runs in another thread, as the Windows sampler thread's does (and a
** signal handler's may, on another CPU). The same file runs on Linux and,
** cross-built, on Windows under Wine (issue 31). */
#define _GNU_SOURCE
#include <stdatomic.h>
#include <string.h>
#ifdef _WIN32
#define WIN32_LEAN_AND_MEAN
#include <windows.h>
#else
#include <pthread.h>
#include <time.h>
#endif

#include "../../src/slots.h"
#include "check.h"

static void sleep_ms(int ms)
{
#ifdef _WIN32
  Sleep((DWORD)ms);
#else
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
  nanosleep(&ts, NULL);
#endif
}

static int ctx_a, ctx_b, reg_a, reg_b;   /* stand-ins: only addresses */
#define CTX(p) ((ljp_ctx *)(void *)(p))

static void test_table(void)
{
  int a = ljp_slot_alloc(CTX(&ctx_a), &reg_a);
  int b = ljp_slot_alloc(CTX(&ctx_b), &reg_b);
  uint32_t ta, ta2;
  CHECK(a >= 0 && b >= 0 && a != b);
  CHECK(ljp_slot_find(&reg_a) == CTX(&ctx_a));
  CHECK(ljp_slot_find(&reg_b) == CTX(&ctx_b));
  CHECK(ljp_slot_find(&ctx_a) == NULL);       /* not a registry */
  ta = ljp_slot_open(a);
  CHECK(ta != 0);
  CHECK_EQ(ta & 0xff, a);                     /* the slot is the low byte */
  CHECK(ljp_slot_enter(ta) == CTX(&ctx_a));
  ljp_slot_leave(ta);
  CHECK(ljp_slot_enter(0) == NULL);
  ljp_slot_leave(0);
  ljp_slot_close(a);
  CHECK(ljp_slot_enter(ta) == NULL);          /* the run is over */
  ljp_slot_leave(ta);
  ta2 = ljp_slot_open(a);                     /* a new run: a new token */
  CHECK(ta2 != 0 && ta2 != ta);
  CHECK(ljp_slot_enter(ta) == NULL);          /* the old one stays dead */
  ljp_slot_leave(ta);
  CHECK(ljp_slot_enter(ta2) == CTX(&ctx_a));
  ljp_slot_leave(ta2);
  ljp_slot_free(a);
  ljp_slot_free(b);
  CHECK(ljp_slot_find(&reg_a) == NULL);
  CHECK(ljp_slot_enter(ta2) == NULL);
  ljp_slot_leave(ta2);
}

static void test_full(void)
{
  static int regs[LJP_MAX_SLOTS + 1];
  int i, ok = 1;
  for (i = 0; i < LJP_MAX_SLOTS; i++)
    ok &= ljp_slot_alloc(CTX(&ctx_a), &regs[i]) == i;
  CHECK(ok);
  CHECK_EQ(ljp_slot_alloc(CTX(&ctx_a), &regs[LJP_MAX_SLOTS]), -1);
  for (i = 0; i < LJP_MAX_SLOTS; i++) ljp_slot_free(i);
  CHECK_EQ(ljp_slot_alloc(CTX(&ctx_a), &regs[0]), 0);
  ljp_slot_free(0);
}

/* A tick in another thread enters the slot, stays 300 ms, leaves. The
** close starts while it is inside: it must not return before the leave. */
static uint32_t tick_token;
static atomic_int tick_inside, tick_left;

static void tick_body(void)
{
  ljp_ctx *c = ljp_slot_enter(tick_token);
  atomic_store(&tick_inside, c == CTX(&ctx_a) ? 1 : -1);
  sleep_ms(300);
  atomic_store(&tick_left, 1);
  ljp_slot_leave(tick_token);
}

#ifdef _WIN32
static DWORD WINAPI tick_thread(LPVOID arg) { (void)arg; tick_body(); return 0; }
#else
static void *tick_thread(void *arg) { (void)arg; tick_body(); return NULL; }
#endif

static void test_close_waits(void)
{
  int a = ljp_slot_alloc(CTX(&ctx_a), &reg_a), left_at_close;
#ifdef _WIN32
  HANDLE th;
#else
  pthread_t th;
#endif
  tick_token = ljp_slot_open(a);
#ifdef _WIN32
  th = CreateThread(NULL, 0, tick_thread, NULL, 0, NULL);
  CHECK(th != NULL);
#else
  CHECK_EQ(pthread_create(&th, NULL, tick_thread, NULL), 0);
#endif
  while (!atomic_load(&tick_inside)) sleep_ms(1);
  CHECK_EQ(atomic_load(&tick_inside), 1);      /* it reached the context */
  ljp_slot_close(a);
  left_at_close = atomic_load(&tick_left);
  CHECK_EQ(left_at_close, 1);                  /* close waited for it */
#ifdef _WIN32
  WaitForSingleObject(th, INFINITE);
  CloseHandle(th);
#else
  pthread_join(th, NULL);
#endif
  ljp_slot_free(a);
}

int main(void)
{
  test_table();
  test_full();
  test_close_waits();
  return check_done("slots");
}
