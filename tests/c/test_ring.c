/* Unit tests for the lock-free sample ring: wrap-around, full ring
** (merge into the pending record, drop when nothing is pending), and an
** interleaved producer/consumer driven by a real signal (the producer
** runs in a SIGALRM-style handler, as in the profiler). */
#define _GNU_SOURCE
#include <signal.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

#include "../../src/ring.h"
#include "check.h"

static uint64_t seqno;

static int push(ljp_ring *r, uint32_t w, ljp_push_result *res)
{
  ljp_record *rec = ljp_ring_reserve(r, w, NULL, res);
  if (!rec) return 0;
  rec->seq = seqno++;
  rec->vmstate = 'I';
  rec->trace = 0;
  rec->zone = 0;
  rec->cfunc = 0;
  rec->like_cfunc = 0;
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

/* Producer in a signal handler, consumer in the interrupted code. Every
** tick must be accounted for exactly once: pushed, merged or dropped. */
static ljp_ring sr;
static volatile sig_atomic_t produced, merged, dropped;

static void on_signal(int sig)
{
  ljp_push_result res;
  ljp_record *rec;
  (void)sig;
  rec = ljp_ring_reserve(&sr, 1, NULL, &res);
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

static void test_interleaved(void)
{
  struct sigaction sa;
  struct itimerval it;
  uint64_t from, to, pos, ticks = 0, records = 0;
  struct timespec t0, t1;
  int ok = 1;
  uint64_t last = 0;
  ljp_ring_init(&sr, 16);
  memset(&sa, 0, sizeof(sa));
  sa.sa_handler = on_signal;
  sigaction(SIGALRM, &sa, NULL);
  memset(&it, 0, sizeof(it));
  it.it_interval.tv_usec = 50;
  it.it_value.tv_usec = 50;
  setitimer(ITIMER_REAL, &it, NULL);
  clock_gettime(CLOCK_MONOTONIC, &t0);
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
    clock_gettime(CLOCK_MONOTONIC, &t1);
  } while (produced < 20000 && t1.tv_sec - t0.tv_sec < 20);
  memset(&it, 0, sizeof(it));
  setitimer(ITIMER_REAL, &it, NULL);
  ljp_ring_claim(&sr, &from, &to);
  for (pos = from; pos < to; pos++) ticks += atomic_load(&ljp_ring_at(&sr, pos)->weight);
  ljp_ring_retire(&sr, to);
  CHECK(ok);
  CHECK(produced > 1000);
  CHECK_EQ(ticks + dropped, (uint64_t)produced);
  printf("interleaved: %d signals, %llu records, %d merged, %d dropped\n",
         (int)produced, (unsigned long long)records, (int)merged, (int)dropped);
  ljp_ring_free(&sr);
}

/* A full ring merges a tick into the newest pending record that is like
** it (same state, trace, C function as reserved, zone), else into the
** newest of the same state and zone, else into the newest. */
static void test_merge_like(void)
{
  ljp_ring r;
  ljp_push_result res;
  ljp_like a = {.trace = 1, .vmstate = 'N'},
           b = {.trace = 2, .zone = 7, .vmstate = 'N'},
           c = {.trace = 3, .vmstate = 'N'}, d = {.vmstate = 'C'};
  uint32_t i;
  CHECK_EQ(ljp_ring_init(&r, 16), 0);
  for (i = 0; i < 16; i++) {          /* fill: trace 1 then 15 x trace 2 */
    ljp_record *rec = ljp_ring_reserve(&r, 1, i ? &b : &a, &res);
    CHECK(rec != NULL);
    rec->vmstate = 'N';
    rec->trace = i ? 2 : 1;
    rec->zone = i ? 7 : 0;
    rec->labels = 0;
    rec->cfunc = 0;
    rec->like_cfunc = 0;
    atomic_store(&rec->weight, 1);
    ljp_ring_publish(&r);
  }
  /* trace 1 is 15 records back: found within the scan window */
  CHECK(ljp_ring_reserve(&r, 5, &a, &res) == NULL);
  CHECK_EQ(res, LJP_MERGED);
  CHECK_EQ(atomic_load(&r.rec[0].weight), 6);
  CHECK_EQ(atomic_load(&r.rec[15].weight), 1);
  /* nothing like trace 3: the newest record of its state and zone */
  CHECK(ljp_ring_reserve(&r, 2, &c, &res) == NULL);
  CHECK_EQ(atomic_load(&r.rec[0].weight), 8);
  CHECK_EQ(atomic_load(&r.rec[15].weight), 1);
  /* a C tick where all is compiled: the newest record */
  CHECK(ljp_ring_reserve(&r, 3, &d, &res) == NULL);
  CHECK_EQ(atomic_load(&r.rec[15].weight), 4);
  /* a C function named after the reserve still matches its tick */
  r.rec[15].cfunc = 0x1234;
  CHECK(ljp_ring_reserve(&r, 1, &b, &res) == NULL);
  CHECK_EQ(atomic_load(&r.rec[15].weight), 5);
  ljp_ring_free(&r);
}

/* Label sets keep merged ticks apart: a tick under labels joins a record
** with the same labels, even an older one, before a newer one without. */
static void test_merge_labels(void)
{
  ljp_ring r;
  ljp_push_result res;
  ljp_like api = {.trace = 1, .labels = 3, .vmstate = 'N'},
           none = {.trace = 1, .vmstate = 'N'},
           other = {.trace = 9, .labels = 3, .vmstate = 'N'};
  uint32_t i;
  CHECK_EQ(ljp_ring_init(&r, 16), 0);
  for (i = 0; i < 16; i++) {          /* one record with labels 3, first */
    ljp_record *rec = ljp_ring_reserve(&r, 1, i ? &none : &api, &res);
    CHECK(rec != NULL);
    rec->vmstate = 'N';
    rec->trace = 1;
    rec->zone = 0;
    rec->labels = i ? 0 : 3;
    rec->cfunc = rec->like_cfunc = 0;
    atomic_store(&rec->weight, 1);
    ljp_ring_publish(&r);
  }
  CHECK(ljp_ring_reserve(&r, 4, &api, &res) == NULL);
  CHECK_EQ(res, LJP_MERGED);
  CHECK_EQ(atomic_load(&r.rec[0].weight), 5);   /* its own set */
  CHECK_EQ(atomic_load(&r.rec[15].weight), 1);
  /* another trace under the same labels: the newest of state and labels */
  CHECK(ljp_ring_reserve(&r, 2, &other, &res) == NULL);
  CHECK_EQ(atomic_load(&r.rec[0].weight), 7);
  CHECK(ljp_ring_reserve(&r, 1, &none, &res) == NULL);
  CHECK_EQ(atomic_load(&r.rec[15].weight), 2);
  ljp_ring_free(&r);
}

int main(void)
{
  test_merge_like();
  test_merge_labels();
  test_basic();
  test_wrap();
  test_full();
  test_interleaved();
  return check_done("ring");
}
