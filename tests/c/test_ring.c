/* Unit tests for the lock-free sample ring: wrap-around, full ring
** (merge into the pending record, drop when nothing is pending), and an
** interleaved producer/consumer where the producer interrupts the
** consumer as the profiler's sampler does: on Linux in a SIGALRM handler
** (a real signal); on Windows (built and run under Wine) from a thread
** that suspends the consumer, pushes a burst of ticks and resumes it, the
** Windows backend's way (issue 31). */
#define _GNU_SOURCE
#include <signal.h>
#include <string.h>
#include <time.h>
#ifdef _WIN32
#define WIN32_LEAN_AND_MEAN
#include <windows.h>
#else
#include <sys/time.h>
#endif

#include "../../src/ring.h"
#include "check.h"

static uint64_t seqno;

static int push(ljp_ring *r, uint32_t w, ljp_push_result *res)
{
  ljp_record *rec = ljp_ring_reserve(r, w, NULL, NULL, res);
  if (!rec) return 0;
  rec->seq = seqno++;
  rec->vmstate = 'I';
  rec->trace = 0;
  rec->zone = 0;
  rec->cfunc = 0;
  atomic_store(&rec->weight, w);
  ljp_ring_publish(r);
  return 1;
}

static void test_basic(void)
{
  ljp_ring r;
  ljp_push_result res;
  uint64_t from, to;
  CHECK_EQ(ljp_ring_init(&r, 100), 0);
  CHECK_EQ(r.cap, 128);               /* rounded up to a power of two */
  CHECK_EQ(ljp_ring_pending(&r), 0);
  ljp_ring_claim(&r, &from, &to);
  CHECK_EQ(to - from, 0);
  CHECK(push(&r, 1, &res) && res == LJP_PUSHED);
  CHECK(push(&r, 2, &res));
  CHECK_EQ(ljp_ring_pending(&r), 2);
  ljp_ring_claim(&r, &from, &to);
  CHECK_EQ(from, 0);
  CHECK_EQ(to, 2);
  CHECK_EQ(ljp_ring_pending(&r), 0);
  CHECK_EQ(ljp_ring_completed(&r), 2);
  CHECK_EQ(atomic_load(&ljp_ring_at(&r, 1)->weight), 2);
  ljp_ring_retire(&r, to);
  CHECK_EQ(ljp_ring_completed(&r), 0);
  ljp_ring_free(&r);
}

static void test_wrap(void)
{
  ljp_ring r;
  ljp_push_result res;
  uint64_t from, to, pos, expect = 0;
  int round, i, ok = 1;
  ljp_ring_init(&r, 16);
  seqno = 0;
  for (round = 0; round < 1000; round++) {  /* 7 per round: wraps often */
    for (i = 0; i < 7; i++) ok &= push(&r, 1, &res);
    ljp_ring_claim(&r, &from, &to);
    for (pos = from; pos < to; pos++) ok &= ljp_ring_at(&r, pos)->seq == expect++;
    ljp_ring_retire(&r, to);
  }
  CHECK(ok);
  CHECK_EQ(expect, 7000);
  CHECK_EQ(atomic_load(&r.head), 7000);
  ljp_ring_free(&r);
}

static void test_full(void)
{
  ljp_ring r;
  ljp_push_result res;
  uint64_t from, to;
  int i;
  ljp_ring_init(&r, 16);
  for (i = 0; i < 16; i++) CHECK(push(&r, 1, &res));
  /* Full with pending records: ticks merge into the newest one. */
  CHECK(!push(&r, 3, &res));
  CHECK_EQ(res, LJP_MERGED);
  CHECK_EQ(atomic_load(&ljp_ring_at(&r, 15)->weight), 4);
  /* Full with everything completed but not aggregated: dropped. */
  ljp_ring_claim(&r, &from, &to);
  CHECK(!push(&r, 1, &res));
  CHECK_EQ(res, LJP_DROPPED);
  /* Retiring half makes room again. */
  ljp_ring_retire(&r, 8);
  for (i = 0; i < 8; i++) CHECK(push(&r, 1, &res));
  CHECK(!push(&r, 1, &res));
  CHECK_EQ(res, LJP_MERGED);
  ljp_ring_free(&r);
}

/* Producer interrupting the consumer (a signal handler, or a thread that
** suspends it), consumer in the interrupted code. Every tick must be
** accounted for exactly once: pushed, merged or dropped. */
static ljp_ring sr;
static volatile sig_atomic_t produced, merged, dropped;

static void produce(void)
{
  ljp_push_result res;
  ljp_record *rec;
  rec = ljp_ring_reserve(&sr, 1, NULL, NULL, &res);
  if (rec) {
    rec->seq = (uint64_t)produced;
    atomic_store(&rec->weight, 1);
    ljp_ring_publish(&sr);
  } else if (res == LJP_MERGED) {
    merged++;
  } else {
    dropped++;
  }
  produced++;
}

#ifdef _WIN32
/* The consumer (this thread) is stopped while ticks are pushed: suspend,
** wait until it is (GetThreadContext returns once it has stopped), push
** 1 to 24 ticks (at times more than the ring's 16 hold: it fills, merges
** and drops), resume, let the consumer run a while. Under Wine a suspend
** costs ~6 ms, so fewer ticks are asked for than on Linux. */
#define TICKS_WANTED 5000
static HANDLE consumer, ticker;
static volatile LONG ticks_stop_now;

static DWORD WINAPI producer(LPVOID arg)
{
  unsigned n = 0;
  (void)arg;
  while (!ticks_stop_now) {
    CONTEXT c;
    int k;
    if (SuspendThread(consumer) == (DWORD)-1) break;
    memset(&c, 0, sizeof(c));
    c.ContextFlags = CONTEXT_CONTROL;
    if (GetThreadContext(consumer, &c))
      for (k = 0; k < (int)(n++ % 24) + 1; k++) produce();
    ResumeThread(consumer);
    Sleep(1);
  }
  return 0;
}

static void ticks_start(void)
{
  consumer = OpenThread(THREAD_SUSPEND_RESUME | THREAD_GET_CONTEXT, FALSE,
                        GetCurrentThreadId());
  ticks_stop_now = 0;
  ticker = consumer ? CreateThread(NULL, 0, producer, NULL, 0, NULL) : NULL;
  CHECK(ticker != NULL);
}

static void ticks_stop(void)
{
  ticks_stop_now = 1;
  if (ticker) WaitForSingleObject(ticker, INFINITE), CloseHandle(ticker);
  if (consumer) CloseHandle(consumer);
}
#else
#define TICKS_WANTED 20000

static void on_signal(int sig)
{
  (void)sig;
  produce();
}

static void ticks_start(void)
{
  struct sigaction sa;
  struct itimerval it;
  memset(&sa, 0, sizeof(sa));
  sa.sa_handler = on_signal;
  sigaction(SIGALRM, &sa, NULL);
  memset(&it, 0, sizeof(it));
  it.it_interval.tv_usec = 50;
  it.it_value.tv_usec = 50;
  setitimer(ITIMER_REAL, &it, NULL);
}

static void ticks_stop(void)
{
  struct itimerval it;
  memset(&it, 0, sizeof(it));
  setitimer(ITIMER_REAL, &it, NULL);
}
#endif

static void test_interleaved(void)
{
  uint64_t from, to, pos, ticks = 0, records = 0;
  time_t t0 = time(NULL);
  int ok = 1;
  uint64_t last = 0;
  ljp_ring_init(&sr, 16);
  ticks_start();
  do {  /* Consume in uneven bursts so the ring is sometimes full. */
    volatile int spin;
    for (spin = 0; spin < (int)(records % 7) * 20000; spin++) {}
    ljp_ring_claim(&sr, &from, &to);
    for (pos = from; pos < to; pos++) {
      ljp_record *r = ljp_ring_at(&sr, pos);
      if (records && r->seq <= last) ok = 0;  /* order preserved */
      last = r->seq;
      ticks += atomic_load(&r->weight);
      records++;
    }
    ljp_ring_retire(&sr, to);
  } while (produced < TICKS_WANTED && time(NULL) - t0 < 20);
  ticks_stop();
  ljp_ring_claim(&sr, &from, &to);
  for (pos = from; pos < to; pos++) ticks += atomic_load(&ljp_ring_at(&sr, pos)->weight);
  ljp_ring_retire(&sr, to);
  CHECK(ok);
  CHECK(produced > 1000);
  CHECK_EQ(ticks + dropped, (uint64_t)produced);
  printf("interleaved: %d ticks, %llu records, %d merged, %d dropped\n",
         (int)produced, (unsigned long long)records, (int)merged, (int)dropped);
  ljp_ring_free(&sr);
}

/* Fill ring r (16 slots) with copies of the templates t[i % n]. */
static void fill(ljp_ring *r, const ljp_record *t, int n)
{
  ljp_push_result res;
  int i;
  for (i = 0; i < 16; i++) {
    ljp_record *rec = ljp_ring_reserve(r, 1, NULL, NULL, &res);
    CHECK(rec != NULL);
    memcpy(rec, &t[i % n], sizeof(*rec));
    atomic_store(&rec->weight, 1);
    ljp_ring_publish(r);
  }
}

static uint32_t weight_at(ljp_ring *r, int i)
{
  return atomic_load(&r->rec[i].weight);
}

/* A full ring merges a tick into the newest pending record like it (same
** state, trace, zone); a tick like none is dropped, not charged to
** another trace or state. */
static void test_merge_like(void)
{
  static ljp_record t[16], a, c, d;
  ljp_ring r;
  ljp_push_result res;
  int i;
  CHECK_EQ(ljp_ring_init(&r, 16), 0);
  t[0].vmstate = 'N';                  /* trace 1 then 15 x trace 2 */
  t[0].trace = 1;
  for (i = 1; i < 16; i++) {
    t[i].vmstate = 'N';
    t[i].trace = 2;
    t[i].zone = 7;
  }
  fill(&r, t, 16);
  a = t[0];
  /* trace 1 is 15 records back: found within the scan window */
  CHECK(ljp_ring_reserve(&r, 5, &a, NULL, &res) == NULL);
  CHECK_EQ(res, LJP_MERGED);
  CHECK_EQ(weight_at(&r, 0), 6);
  CHECK_EQ(weight_at(&r, 15), 1);
  /* nothing like trace 3: dropped, no record charged */
  c = t[0];
  c.trace = 3;
  CHECK(ljp_ring_reserve(&r, 2, &c, NULL, &res) == NULL);
  CHECK_EQ(res, LJP_DROPPED);
  for (i = 0; i < 16; i++) CHECK_EQ(weight_at(&r, i), i ? 1 : 6);
  /* a C tick where all is compiled: dropped */
  d.vmstate = 'C';
  d.cfunc = 0x1234;
  CHECK(ljp_ring_reserve(&r, 3, &d, NULL, &res) == NULL);
  CHECK_EQ(res, LJP_DROPPED);
  CHECK_EQ(weight_at(&r, 15), 1);
  ljp_ring_free(&r);
}

/* C ticks with native stacks (issue 27): a compiled loop calls two C
** functions through stitched traces and the ring is full. A tick merges
** into a record of its own C function and Lua frames only, and of its own
** native stack (the same native functions, the leaf at another PC inside
** its function); with no cut record pending (test_merge_cut), a tick of
** another native stack is dropped. Before, any C tick joined the newest
** C record, whatever its function; later, one with the same leaf or
** outermost function, whose other frames were not the tick's. */
static void test_merge_cfunc(void)
{
  static ljp_record t[2], k;
  ljp_ring r;
  ljp_push_result res;
  int i;
  CHECK_EQ(ljp_ring_init(&r, 16), 0);
  for (i = 0; i < 2; i++) {           /* A at even slots, B at odd ones */
    t[i].vmstate = 'C';
    t[i].cfunc = i ? 0xb000 : 0xa000;
    t[i].nnative = 3;
    t[i].native[0] = i ? 0xb810 : 0xa810;  /* the PC, in a helper */
    t[i].native[1] = i ? 0xb550 : 0xa550;
    t[i].native[2] = i ? 0xb060 : 0xa060;  /* in the C function */
    t[i].nfuncs = i ? 0xb0b0 : 0xa0a0;     /* its functions' hash */
    t[i].nleaf[0] = i ? 0xb800 : 0xa800;   /* the helper */
    t[i].nleaf[1] = t[i].cfunc;
    t[i].nlua = 2;
    t[i].lua[0].fn = i ? 0x7b : 0x7a;
    t[i].lua[0].cf = t[i].cfunc;
    t[i].lua[0].kind = 1;
    t[i].lua[1].fn = 0x9000;
    t[i].lua[1].bc = 0x9100;
    t[i].lua[1].pc = 0x9140;
  }
  fill(&r, t, 2);
  /* A at another PC in the same function: A's newest record (14), not
  ** the newest record (15, B) */
  k = t[0];
  k.native[0] = 0xa844;
  k.pc = 0xa844;
  CHECK(ljp_ring_reserve(&r, 2, &k, NULL, &res) == NULL);
  CHECK_EQ(res, LJP_MERGED);
  CHECK_EQ(weight_at(&r, 14), 3);
  CHECK_EQ(weight_at(&r, 15), 1);
  /* B's tick: B's record */
  k = t[1];
  CHECK(ljp_ring_reserve(&r, 1, &k, NULL, &res) == NULL);
  CHECK_EQ(res, LJP_MERGED);
  CHECK_EQ(weight_at(&r, 15), 2);
  /* A's leaf function reached another way (other frames in between):
  ** no record has its stack, no cut record is pending: dropped, not
  ** given A's record's frames (before: merged into it, "leaf") */
  k = t[0];
  k.nnative = 4;
  k.nfuncs = 0xa1a1;
  CHECK(ljp_ring_reserve(&r, 1, &k, NULL, &res) == NULL);
  CHECK_EQ(res, LJP_DROPPED);
  CHECK_EQ(weight_at(&r, 14), 3);
  /* A in another leaf function: dropped (before: A's record, "func") */
  k = t[0];
  k.nfuncs = 0xa2a2;
  k.nleaf[0] = 0xa900;
  CHECK(ljp_ring_reserve(&r, 1, &k, NULL, &res) == NULL);
  CHECK_EQ(res, LJP_DROPPED);
  /* B's leaf function under A's C function: dropped, charged to neither */
  k = t[0];
  k.nfuncs = 0xa3a3;
  k.nleaf[0] = t[1].nleaf[0];
  CHECK(ljp_ring_reserve(&r, 1, &k, NULL, &res) == NULL);
  CHECK_EQ(res, LJP_DROPPED);
  CHECK_EQ(weight_at(&r, 14), 3);
  CHECK_EQ(weight_at(&r, 15), 2);
  /* a C function no record has (same Lua frames, same leaf as A):
  ** dropped, charged to neither */
  k = t[0];
  k.cfunc = 0xc000;
  k.lua[0].cf = 0xc000;
  k.nleaf[1] = 0xc000;
  k.nfuncs = 0xc0c0;
  CHECK(ljp_ring_reserve(&r, 1, &k, NULL, &res) == NULL);
  CHECK_EQ(res, LJP_DROPPED);
  /* A called from another Lua line: dropped */
  k = t[0];
  k.lua[1].pc = 0x9150;
  CHECK(ljp_ring_reserve(&r, 1, &k, NULL, &res) == NULL);
  CHECK_EQ(res, LJP_DROPPED);
  /* A named, but its outermost native frame in another function */
  k = t[0];
  k.nleaf[1] = 0xd000;
  k.nfuncs = 0xd0d0;
  CHECK(ljp_ring_reserve(&r, 1, &k, NULL, &res) == NULL);
  CHECK_EQ(res, LJP_DROPPED);
  for (i = 0; i < 14; i++) CHECK_EQ(weight_at(&r, i), 1);
  CHECK_EQ(weight_at(&r, 14), 3);
  CHECK_EQ(weight_at(&r, 15), 2);
  ljp_ring_free(&r);
}

/* Label sets keep merged ticks apart: a tick under labels joins a record
** with the same labels, even an older one, before a newer one without. */
static void test_merge_labels(void)
{
  static ljp_record t[16], api, none, other;
  ljp_ring r;
  ljp_push_result res;
  int i;
  CHECK_EQ(ljp_ring_init(&r, 16), 0);
  for (i = 0; i < 16; i++) {          /* one record with labels 3, first */
    t[i].vmstate = 'N';
    t[i].trace = 1;
    t[i].labels = i ? 0 : 3;
  }
  fill(&r, t, 16);
  api = t[0];
  none = t[1];
  other = t[0];
  other.trace = 9;
  CHECK(ljp_ring_reserve(&r, 4, &api, NULL, &res) == NULL);
  CHECK_EQ(res, LJP_MERGED);
  CHECK_EQ(weight_at(&r, 0), 5);   /* its own set */
  CHECK_EQ(weight_at(&r, 15), 1);
  /* another trace under the same labels: like no record, dropped */
  CHECK(ljp_ring_reserve(&r, 2, &other, NULL, &res) == NULL);
  CHECK_EQ(res, LJP_DROPPED);
  CHECK_EQ(weight_at(&r, 0), 5);
  CHECK(ljp_ring_reserve(&r, 1, &none, NULL, &res) == NULL);
  CHECK_EQ(weight_at(&r, 15), 2);
  ljp_ring_free(&r);
}

/* Ticks in one trace with its inlined frames decoded (issues 26 and 27):
** a compiled loop reaches no safe point, the ring is full, and the
** frames are decoded at the safe point from each record's PC (the
** snapshot whose code holds it). A tick joins only a record whose PC (or,
** in a C function the trace called, return address) lies in the span
** the tick's own PC names (its ljp_tickspan, beside the tick: sample.c,
** its snapshot's code); with no rule (span[1] 0 or none: inline frames
** off) any PC of the trace. Before, every tick of the trace joined the
** newest record, whatever its snapshot. */
static void test_merge_snapshot(void)
{
  static ljp_record t[16], in2, in3, tail, cret, none, off;
  ljp_tickspan s2, s3, stail, scret, snone, soff;
  ljp_ring r;
  ljp_push_result res;
  /* trace code [0x10000, 0x11000): snapshot spans at 0x100 steps */
  const uintptr_t mc = 0x10000, end = 0x11000;
  int i;
  CHECK_EQ(ljp_ring_init(&r, 16), 0);
  for (i = 0; i < 16; i++) {
    t[i].vmstate = 'N';
    t[i].trace = 4;
    t[i].tobj = 0xabc0;
    t[i].nlua = 1;
    t[i].lua[0].fn = 0x5550;
    t[i].pc = mc + 0x100 * (uintptr_t)(i % 8) + 0x10;  /* spans 0..7 */
  }
  t[15].pc = 0x7000;                 /* a C function called from span 9 */
  t[15].tret = mc + 0x900 + 0x21;
  fill(&r, t, 16);
  in2 = t[0];                        /* a tick in span 2, elsewhere in it */
  in2.pc = mc + 0x2f0;
  s2.code[0] = mc;
  s2.code[1] = end;
  s2.span[0] = mc + 0x200;
  s2.span[1] = mc + 0x300;
  CHECK(ljp_ring_reserve(&r, 3, &in2, &s2, &res) == NULL);
  CHECK_EQ(res, LJP_MERGED);
  CHECK_EQ(weight_at(&r, 10), 4);    /* the newest record in span 2 */
  CHECK_EQ(weight_at(&r, 14), 1);    /* not the newest of the trace */
  CHECK_EQ(weight_at(&r, 2), 1);
  /* span 3's end is not in it: its record is span 3's (0x310) */
  in3 = in2;
  in3.pc = mc + 0x3ff;
  s3 = s2;
  s3.span[0] = mc + 0x300;
  s3.span[1] = mc + 0x400;
  CHECK(ljp_ring_reserve(&r, 1, &in3, &s3, &res) == NULL);
  CHECK_EQ(res, LJP_MERGED);
  CHECK_EQ(weight_at(&r, 11), 2);
  /* a span no record lies in (the trace's tail): dropped, none charged */
  tail = in2;
  tail.pc = end - 4;
  stail = s2;
  stail.span[0] = end - 24;
  stail.span[1] = end;
  CHECK(ljp_ring_reserve(&r, 2, &tail, &stail, &res) == NULL);
  CHECK_EQ(res, LJP_DROPPED);
  /* in a C function the trace called: by its return address (span 9) */
  cret = t[15];
  cret.pc = 0x7100;
  cret.tret = mc + 0x980;
  scret.code[0] = mc;
  scret.code[1] = end;
  scret.span[0] = mc + 0x900;
  scret.span[1] = mc + 0xa00;
  CHECK(ljp_ring_reserve(&r, 2, &cret, &scret, &res) == NULL);
  CHECK_EQ(res, LJP_MERGED);
  CHECK_EQ(weight_at(&r, 15), 3);
  /* in none of the trace's code ({0, 1}): only a record in none, and
  ** there is none */
  none = t[15];
  none.tret = 0;
  snone.code[0] = mc;
  snone.code[1] = end;
  snone.span[0] = 0;
  snone.span[1] = 1;
  CHECK(ljp_ring_reserve(&r, 2, &none, &snone, &res) == NULL);
  CHECK_EQ(res, LJP_DROPPED);
  /* no rule (inline frames off): the newest record of the trace, with a
  ** span whose span[1] is 0 or with none */
  off = in2;
  soff = s2;
  soff.span[1] = 0;
  CHECK(ljp_ring_reserve(&r, 5, &off, &soff, &res) == NULL);
  CHECK_EQ(res, LJP_MERGED);
  CHECK_EQ(weight_at(&r, 15), 8);
  CHECK(ljp_ring_reserve(&r, 1, &off, NULL, &res) == NULL);
  CHECK_EQ(res, LJP_MERGED);
  CHECK_EQ(weight_at(&r, 15), 9);
  for (i = 0; i < 16; i++)
    if (i != 10 && i != 11 && i != 15) CHECK_EQ(weight_at(&r, i), 1);
  ljp_ring_free(&r);
}

/* Merged ticks keep their own stacks (issue 27): with the ring full, a
** tick whose native frames no pending record has joins a cut record of
** its outermost function (the records pushed into the ring's last free
** slots keep that frame only, ljp_ring_low, ljp_record_cut), never a
** record showing another tick's frames. Each case below was merged into
** a record with other frames by the rule before ("leaf": the same
** innermost and outermost functions; "func": the same outermost one; or
** the same hash of the functions alone). */
static void test_merge_cut(void)
{
  static ljp_record k, c;
  ljp_ring r;
  ljp_push_result res;
  int i;
  CHECK_EQ(ljp_ring_init(&r, 16), 0);
  /* the cut zone: the last 16 / 8 = 2 free slots */
  for (i = 0; i < 16; i++) {
    ljp_record *rec;
    CHECK_EQ(ljp_ring_low(&r), i >= 14);
    rec = ljp_ring_reserve(&r, 1, NULL, NULL, &res);
    CHECK(rec != NULL);
    memset(rec, 0, sizeof(*rec));
    rec->vmstate = 'C';
    rec->cfunc = 0xa000;
    rec->nnative = 3;
    rec->native[0] = 0xa810;               /* the PC, in the leaf */
    rec->native[1] = 0xa550;               /* in a helper */
    rec->native[2] = 0xa068;               /* return address into A */
    rec->nfuncs = 0xa0a0;
    rec->nleaf[0] = 0xa800;
    rec->nleaf[1] = 0xa000;
    rec->nflags = LJP_NATIVE_FROM_INTERP;
    rec->nlua = 1;
    rec->lua[0].fn = 0x9000;
    rec->lua[0].pc = 0x9140;
    if (i >= 14) {                         /* as the handler does */
      if (i == 15) rec->nleaf[0] = 0xa900; /* (the cut drops the leaf) */
      if (ljp_ring_low(&r)) ljp_record_cut(rec);
    }
    atomic_store(&rec->weight, 1);
    ljp_ring_publish(&r);
  }
  CHECK(ljp_ring_slot(&r) == NULL);
  /* a cut record: the outermost frame, inside its call, and the flag */
  c = r.rec[15];
  CHECK_EQ(c.nnative, 1);
  CHECK_EQ(c.native[0], 0xa067);
  CHECK(c.nflags & LJP_NATIVE_CUT);
  CHECK(c.nflags & LJP_NATIVE_FROM_INTERP);
  CHECK_EQ(c.nleaf[0], 0xa000);
  CHECK_EQ(c.nleaf[1], 0xa000);
  CHECK_EQ(r.rec[13].nnative, 3);          /* before the zone: whole */
  /* a tick with the whole records' stack: the newest whole one (13) */
  k = r.rec[0];
  k.native[0] = 0xa844;
  CHECK(ljp_ring_reserve(&r, 2, &k, NULL, &res) == NULL);
  CHECK_EQ(res, LJP_MERGED);
  CHECK_EQ(weight_at(&r, 13), 3);
  /* the same outermost and leaf functions, other frames between ("leaf"
  ** before): the newest cut record (15), whose frames are the tick's */
  k = r.rec[0];
  k.nnative = 5;
  k.nfuncs = 0xa1a1;
  CHECK(ljp_ring_reserve(&r, 1, &k, NULL, &res) == NULL);
  CHECK_EQ(res, LJP_MERGED_CUT);
  CHECK_EQ(weight_at(&r, 15), 2);
  CHECK_EQ(weight_at(&r, 13), 3);
  /* another leaf function under A ("func" before): the cut record */
  k = r.rec[0];
  k.nfuncs = 0xa2a2;
  k.nleaf[0] = 0xa700;
  CHECK(ljp_ring_reserve(&r, 1, &k, NULL, &res) == NULL);
  CHECK_EQ(res, LJP_MERGED_CUT);
  CHECK_EQ(weight_at(&r, 15), 3);
  /* the hash of its functions equal, its leaf function not (a hash
  ** collision, or the functions in another order): not the whole
  ** records' stack (merged into 13 before), the cut record */
  k = r.rec[0];
  k.nleaf[0] = 0xa600;
  CHECK(ljp_ring_reserve(&r, 1, &k, NULL, &res) == NULL);
  CHECK_EQ(res, LJP_MERGED_CUT);
  CHECK_EQ(weight_at(&r, 13), 3);
  CHECK_EQ(weight_at(&r, 15), 4);
  /* its outermost frame in another function (B's, below the same Lua
  ** frame and C function): no record shows its frames, dropped */
  k = r.rec[0];
  k.nfuncs = 0xb0b0;
  k.nleaf[1] = 0xb000;
  CHECK(ljp_ring_reserve(&r, 1, &k, NULL, &res) == NULL);
  CHECK_EQ(res, LJP_DROPPED);
  /* A called from compiled code (not from the interpreter): the cut
  ** records were called from the interpreter, dropped */
  k = r.rec[0];
  k.nfuncs = 0xa3a3;
  k.nflags = 0;
  CHECK(ljp_ring_reserve(&r, 1, &k, NULL, &res) == NULL);
  CHECK_EQ(res, LJP_DROPPED);
  /* one native frame only: it has nothing "[merged]" would stand for,
  ** so a cut record is not its stack; dropped */
  k = r.rec[0];
  k.nnative = 1;
  k.nfuncs = 0xa000;
  k.nleaf[0] = 0xa000;
  CHECK(ljp_ring_reserve(&r, 1, &k, NULL, &res) == NULL);
  CHECK_EQ(res, LJP_DROPPED);
  /* another Lua line: no record of its Lua frames, dropped */
  k = r.rec[0];
  k.nfuncs = 0xa4a4;
  k.lua[0].pc = 0x9150;
  CHECK(ljp_ring_reserve(&r, 1, &k, NULL, &res) == NULL);
  CHECK_EQ(res, LJP_DROPPED);
  for (i = 0; i < 13; i++) CHECK_EQ(weight_at(&r, i), 1);
  CHECK_EQ(weight_at(&r, 14), 1);
  ljp_ring_free(&r);
}

/* The cut zone of a large ring is at most a quarter of the records a
** merge scans (LJP_MERGE_SCAN): the whole records before it stay within
** reach. A 1024-record ring cut its last 128 before: a merge saw only
** cut records. */
static void test_cut_zone(void)
{
  ljp_ring r;
  CHECK_EQ(ljp_ring_init(&r, 1024), 0);
  atomic_store(&r.head, 1024 - LJP_MERGE_SCAN / 4 - 1);
  CHECK(!ljp_ring_low(&r));
  atomic_store(&r.head, 1024 - LJP_MERGE_SCAN / 4);
  CHECK(ljp_ring_low(&r));
  atomic_store(&r.tail, 1);            /* one record retired: room again */
  CHECK(!ljp_ring_low(&r));
  CHECK_EQ(LJP_MERGE_SCAN / 4, 16);
  ljp_ring_free(&r);
}

int main(void)
{
  test_cut_zone();
  test_merge_like();
  test_merge_cfunc();
  test_merge_cut();
  test_merge_labels();
  test_merge_snapshot();
  test_basic();
  test_wrap();
  test_full();
  test_interleaved();
  return check_done("ring");
}
