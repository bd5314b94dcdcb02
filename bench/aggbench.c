/*
** Aggregation throughput and memory of ljprof's data structures (bench/run).
**
** Replays real stacks through the same code ljprof runs per sample,
** compiled in from src/ring.c and src/table.c (included by path, not
** modified): the handler's ring reserve/publish, the safe point's claim,
** the stack as an array of frame ids (each frame of the profile interned
** once, as complete.c's caches hand out ids per level) interned as one
** key, the leaf function's id, and the aggregation of completed records
** into the (stack, vmstate, zone) and (function, vmstate) count tables
** when the ring is half full. What it leaves out is measured elsewhere:
** the signal delivery, the handler's VM-state reads and the walk that
** produces the frames (bench/lib/cost.lua).
**
**   aggbench STACKS [SAMPLES]
**
** STACKS: "count<TAB>vmstate<TAB>key" lines (bench/with_ljprof.lua
** stacks=, from a profiled run of a real program). Samples are drawn
** independently from the counts' distribution (deterministic PRNG), so
** consecutive samples rarely share a stack. Prints "key value" lines;
** times are the best of REPS passes (noise from other processes only
** ever adds time), with the median alongside.
*/
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../src/ring.h"
#include "../src/store.h"
#include "../src/table.h"

#define REPS 5
#define RING 1024  /* ljprof's default ring size */

typedef struct key {
  const char *s;
  size_t len;        /* the key's text (what ljprof interned before) */
  uint32_t *ids;     /* its frames, innermost first */
  uint32_t nids;
  uint32_t func;     /* its leaf's function */
  int vmstate;
  double count;
} key;

static key *keys;
static size_t nkeys;
static ljp_strtab frames;  /* frame text -> id, filled once at load */

static double now(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void die(const char *msg) __attribute__((noreturn));
static void die(const char *msg)
{
  fprintf(stderr, "aggbench: %s\n", msg);
  exit(1);
}

/* Frames in -jprof's key format are separated by byte 30 (\036),
** outermost first: each interned once; the key becomes their ids,
** innermost first (the order complete.c builds). */
static void split_frames(key *k)
{
  size_t i = 0, n = 0, cap = 16;
  uint32_t *ids = malloc(cap * sizeof(uint32_t));
  if (!ids) die("out of memory");
  while (i < k->len) {
    size_t j = i;
    uint32_t id;
    while (j < k->len && k->s[j] != '\036') j++;
    id = ljp_strtab_intern(&frames, k->s + i, j - i);
    if (id == UINT32_MAX) die("out of memory");
    if (n == cap && !(ids = realloc(ids, (cap *= 2) * sizeof(uint32_t))))
      die("out of memory");
    ids[n++] = id;
    i = j + 1;
  }
  for (i = 0; i < n / 2; i++) {
    uint32_t t = ids[i];
    ids[i] = ids[n - 1 - i];
    ids[n - 1 - i] = t;
  }
  k->ids = ids;
  k->nids = (uint32_t)n;
  k->func = n ? ids[0] : 0;  /* a function per leaf frame (its id) */
}

static void load(const char *path)
{
  FILE *f = fopen(path, "rb");
  char *line = NULL;
  size_t cap = 0, kcap = 0;
  ssize_t n;
  if (!f) die("cannot open the stacks file");
  if (ljp_strtab_init(&frames)) die("out of memory");
  while ((n = getline(&line, &cap, f)) > 0) {
    char *t1, *t2;
    key k;
    if (line[n - 1] == '\n') line[--n] = '\0';
    if (!(t1 = strchr(line, '\t')) || !(t2 = strchr(t1 + 1, '\t'))) continue;
    k.count = atof(line);
    k.vmstate = t1[1];
    k.len = (size_t)(line + n - (t2 + 1));
    k.s = memcpy(malloc(k.len + 1), t2 + 1, k.len + 1);
    split_frames(&k);
    if (nkeys == kcap) {
      kcap = kcap ? kcap * 2 : 1024;
      if (!(keys = realloc(keys, kcap * sizeof(key)))) die("out of memory");
    }
    keys[nkeys++] = k;
  }
  free(line);
  fclose(f);
  if (!nkeys) die("no stacks in the file");
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t xorshift(void)
{
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return rng;
}

/* Sample sequence: key indices drawn with probability count/total. */
static uint32_t *draw(size_t n)
{
  double *cum = malloc(nkeys * sizeof(double)), total = 0;
  uint32_t *seq = calloc(n, sizeof(uint32_t));
  size_t i;
  if (!cum || !seq) die("out of memory");
  for (i = 0; i < nkeys; i++) cum[i] = (total += keys[i].count);
  for (i = 0; i < n; i++) {
    double x = (double)(xorshift() >> 11) / 9007199254740992.0 * total;
    size_t lo = 0, hi = nkeys - 1;
    while (lo < hi) {
      size_t mid = (lo + hi) / 2;
      if (cum[mid] > x) hi = mid; else lo = mid + 1;
    }
    seq[i] = (uint32_t)lo;
  }
  free(cum);
  return seq;
}

/* -- The per-sample path -------------------------------------------------- */

typedef struct agg {
  ljp_ring ring;
  ljp_strtab stks;  /* stacks: frame id arrays */
  ljp_counts counts, fcounts;
} agg;

static void agg_init(agg *a)
{
  if (ljp_ring_init(&a->ring, RING) || ljp_strtab_init(&a->stks) ||
      ljp_counts_init(&a->counts) || ljp_counts_init(&a->fcounts))
    die("out of memory");
}

static void agg_free(agg *a)
{
  ljp_ring_free(&a->ring);
  ljp_strtab_free(&a->stks);
  ljp_counts_free(&a->counts);
  ljp_counts_free(&a->fcounts);
}

enum { DO_INTERN = 1, DO_COUNT = 2, DO_COPY = 4, DO_HASH = 8 };

/* The safe point's frame buffer (stack_of's ids): the frame ids are
** copied here first, as the walk's per-level lookups would write them, so
** that interning reads a buffer that is in the cache. */
static uint32_t *dump;
static volatile uint64_t sink;

/* Completed records -> count tables (ljp_aggregate). */
static void aggregate(agg *a, int what)
{
  uint64_t pos, tail = atomic_load(&a->ring.tail), done = atomic_load(&a->ring.done);
  if (what & DO_COUNT) {
    for (pos = tail; pos < done; pos++) {
      ljp_record *r = ljp_ring_at(&a->ring, pos);
      uint32_t w = atomic_load_explicit(&r->weight, memory_order_relaxed);
      ljp_counts_add(&a->counts, ljp_stack_key(r->stack, r->vmstate, r->zone), w);
      ljp_counts_add(&a->fcounts, ljp_func_key(r->func, r->vmstate), w);
    }
  }
  ljp_ring_retire(&a->ring, done);
}

/* One sample of key k: handler push, safe point completion, and the
** aggregation of a batch when the ring is half full. */
static inline void sample(agg *a, uint32_t k, uint64_t seq, int what)
{
  ljp_push_result res;
  ljp_like like = {0, 0, 0, (uint8_t)keys[k].vmstate};
  ljp_record *r = ljp_ring_reserve(&a->ring, 1, &like, NULL, &res);
  uint64_t from, to, pos;
  if (r) {  /* the handler's part (ljp_sample), minus the VM reads */
    r->seq = seq;
    r->time_ns = seq;
    r->pc = k;  /* stands for the PC; here: which key the "stack" is */
    r->trace = 0;
    r->cfunc = 0;
    r->vmstate = like.vmstate;
    r->zone = 0;
    r->nnative = 0;
    r->stack = 0;
    atomic_store_explicit(&r->weight, 1, memory_order_relaxed);
    ljp_ring_publish(&a->ring);
  }
  /* Safe point: complete the pending record(s) (ljp_complete). */
  ljp_ring_claim(&a->ring, &from, &to);
  for (pos = from; pos < to; pos++) {
    ljp_record *c = ljp_ring_at(&a->ring, pos);
    const key *kk = &keys[c->pc];
    size_t nb = (size_t)kk->nids * 4;
    if (what & DO_COPY) memcpy(dump, kk->ids, nb);
    if (what & DO_HASH) sink += ljp_hash(dump, nb);
    if (what & DO_INTERN) {
      c->stack = ljp_strtab_intern(&a->stks, (const char *)dump, nb);
      c->func = kk->func;  /* the leaf frame's function: a cache lookup */
    } else {
      c->stack = (uint32_t)c->pc + 1;  /* ids as if interned */
      c->func = (uint32_t)c->pc + 1;
    }
  }
  if (ljp_ring_completed(&a->ring) >= a->ring.cap / 2) aggregate(a, what);
}

static int cmp_double(const void *x, const void *y)
{
  double a = *(const double *)x, b = *(const double *)y;
  return a < b ? -1 : a > b;
}

/* Run the sequence REPS times (tables kept between passes: the steady
** state of a long run; the first pass also inserts). Prints the best and
** median ns per sample. */
static void bench(const char *name, const uint32_t *seq, size_t n, int what)
{
  double t[REPS];
  agg a;
  size_t i;
  int rep;
  agg_init(&a);
  for (i = 0; i < n && i < 100000; i++) sample(&a, seq[i], i, what);  /* warm up */
  for (rep = 0; rep < REPS; rep++) {
    double t0 = now();
    for (i = 0; i < n; i++) sample(&a, seq[i], i, what);
    aggregate(&a, what);
    t[rep] = (now() - t0) / (double)n * 1e9;
  }
  qsort(t, REPS, sizeof(double), cmp_double);
  printf("%s_ns %.2f\n%s_median_ns %.2f\n%s_per_s %.0f\n", name, t[0], name,
         t[REPS / 2], name, 1e9 / t[0]);
  agg_free(&a);
}

/* Memory held by the tables for n distinct stacks: the real stacks, then
** (for n beyond them) real stacks with a distinct synthetic leaf frame on
** top, each aggregated once; the frames table (each frame once) too. */
static void memory(size_t n)
{
  agg a;
  ljp_strtab fr;
  uint32_t *buf = NULL;
  size_t i, cap = 0, fb = 0, nstacks = 0, depth = 0;
  double bytes;
  agg_init(&a);
  if (ljp_strtab_init(&fr)) die("out of memory");
  for (i = 0; i < n; i++) {
    const key *k = &keys[i % nkeys];
    size_t m = k->nids;
    uint32_t id, before, f;
    if (cap < m + 1 && !(buf = realloc(buf, (cap = m + 1) * sizeof(uint32_t))))
      die("out of memory");
    memcpy(buf + 1, k->ids, m * sizeof(uint32_t));
    if (i >= nkeys) {  /* a frame no other stack has, on top */
      char t[64];
      int len = snprintf(t, sizeof(t), "synthetic\37synthetic.lua:%zu", i);
      buf[0] = frames.n + ljp_strtab_intern(&fr, t, (size_t)len);
      fb += (size_t)len;
      m++;
    }
    depth += m;
    before = a.stks.n;
    id = ljp_strtab_intern(&a.stks, (const char *)(i >= nkeys ? buf : buf + 1),
                           m * sizeof(uint32_t));
    if (a.stks.n > before) nstacks++;  /* a new stack */
    f = i >= nkeys ? buf[0] : k->func;
    ljp_counts_add(&a.counts, ljp_stack_key(id, k->vmstate, 0), 1);
    ljp_counts_add(&a.fcounts, ljp_func_key(f, k->vmstate), 1);
  }
  bytes = (double)a.stks.bytes + (double)frames.bytes + (double)fr.bytes +
          (double)(a.counts.cap + a.fcounts.cap) * sizeof(ljp_count);
  printf("mem_%zu_stacks %zu\nmem_%zu_frames_per_stack %.1f\n"
         "mem_%zu_bytes_per_stack %.1f\n", n, nstacks, n, (double)depth / n, n,
         bytes / (double)nstacks);
  (void)fb;
  free(buf);
  ljp_strtab_free(&fr);
  agg_free(&a);
}

int main(int argc, char **argv)
{
  size_t n = argc > 2 ? (size_t)atol(argv[2]) : 1000000, i, maxids = 0;
  double kbytes = 0, kframes = 0, total = 0;
  uint32_t *seq, *uniq;
  if (argc < 2) die("usage: aggbench STACKS [SAMPLES]");
  load(argv[1]);
  for (i = 0; i < nkeys; i++) {
    kbytes += keys[i].len * keys[i].count;
    kframes += keys[i].nids * keys[i].count;
    total += keys[i].count;
    if (keys[i].nids > maxids) maxids = keys[i].nids;
  }
  if (!(dump = malloc((maxids + 1) * sizeof(uint32_t)))) die("out of memory");
  printf("keys %zu\nkey_bytes_mean %.1f\nkey_frames_mean %.1f\nframes %u\n"
         "samples %zu\nrecord_bytes %zu\nring_records %d\n",
         nkeys, kbytes / total, kframes / total, frames.n, n,
         sizeof(ljp_record), RING);
  seq = draw(n);
  /* Stages, each run adding one: the ring alone; + counting (the whole
  ** ring -> table stage, ljp_aggregate); + the copy standing for the stack
  ** walk's output; + hashing the key; the whole path with interning. */
  bench("ring", seq, n, 0);
  bench("count", seq, n, DO_COUNT);
  bench("copy", seq, n, DO_COUNT | DO_COPY);
  bench("hash", seq, n, DO_COUNT | DO_COPY | DO_HASH);
  bench("full", seq, n, DO_COUNT | DO_COPY | DO_INTERN);
  /* Every sample a different stack, in turn. */
  uniq = calloc(n, sizeof(uint32_t));
  if (!uniq) die("out of memory");
  for (i = 0; i < n; i++) uniq[i] = (uint32_t)(i % nkeys);
  bench("distinct", uniq, n, DO_COUNT | DO_COPY | DO_INTERN);
  memory(nkeys);
  memory(100000);
  free(uniq);
  free(seq);
  free(dump);
  return 0;
}
