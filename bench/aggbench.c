/*
** Aggregation throughput and memory of ljprof's data structures (bench/run).
**
** Replays real stack keys through the same code ljprof runs per sample,
** compiled in from src/ring.c and src/table.c (included by path, not
** modified): the handler's ring reserve/publish, the safe point's claim
** and interning of the stack key and of the leaf function (with the
** "same stack as last time" shortcut), and the aggregation of completed
** records into the (stack, vmstate, zone) and (function, vmstate) count
** tables when the ring is half full. What it leaves out is measured
** elsewhere: the signal delivery, the handler's VM-state reads and the
** stack walk that produces the key (bench/lib/cost.lua).
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
  size_t len;
  const char *leaf;  /* last frame of the key: what the leaf function */
  size_t leaflen;    /* interning hashes (its chunk:line string) */
  int vmstate;
  double count;
} key;

static key *keys;
static size_t nkeys;

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

/* Frames in -jprof's key format end with \30 (record separator). */
static void find_leaf(key *k)
{
  size_t end = k->len, i;
  if (end && k->s[end - 1] == '\30') end--;
  for (i = end; i > 0 && k->s[i - 1] != '\30' && k->s[i - 1] != ';'; i--) {}
  k->leaf = k->s + i;
  k->leaflen = end - i;
}

static void load(const char *path)
{
  FILE *f = fopen(path, "rb");
  char *line = NULL;
  size_t cap = 0, kcap = 0;
  ssize_t n;
  if (!f) die("cannot open the stacks file");
  while ((n = getline(&line, &cap, f)) > 0) {
    char *t1, *t2;
    key k;
    if (line[n - 1] == '\n') line[--n] = '\0';
    if (!(t1 = strchr(line, '\t')) || !(t2 = strchr(t1 + 1, '\t'))) continue;
    k.count = atof(line);
    k.vmstate = t1[1];
    k.len = (size_t)(line + n - (t2 + 1));
    k.s = memcpy(malloc(k.len + 1), t2 + 1, k.len + 1);
    find_leaf(&k);
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
  ljp_strtab strs;
  ljp_counts counts, fcounts;
  uint32_t last;   /* id of the previous stack key */
} agg;

static void agg_init(agg *a)
{
  if (ljp_ring_init(&a->ring, RING) || ljp_strtab_init(&a->strs) ||
      ljp_counts_init(&a->counts) || ljp_counts_init(&a->fcounts))
    die("out of memory");
  a->last = 0;
}

static void agg_free(agg *a)
{
  ljp_ring_free(&a->ring);
  ljp_strtab_free(&a->strs);
  ljp_counts_free(&a->counts);
  ljp_counts_free(&a->fcounts);
}

enum { DO_INTERN = 1, DO_COUNT = 2, DO_COPY = 4, DO_HASH = 8 };

/* The stack walk's output buffer (ljp_ctx.dump): the key is copied here
** first, as the walk would write it, so that interning reads a buffer
** that is in the cache, as in the profiler. */
static char *dump;
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
  ljp_record *r = ljp_ring_reserve(&a->ring, 1, &like, &res);
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
    if (what & DO_COPY) memcpy(dump, kk->s, kk->len);
    if (what & DO_HASH) sink += ljp_hash(dump, kk->len);
    if (what & DO_INTERN) {
      const ljp_str *last = ljp_strtab_get(&a->strs, a->last);
      if (kk->len == last->len && memcmp(dump, last->s, kk->len) == 0) {
        c->stack = a->last;
      } else {
        c->stack = ljp_strtab_intern(&a->strs, dump, kk->len);
        a->last = c->stack;
      }
      c->func = ljp_strtab_intern(&a->strs, dump + (kk->leaf - kk->s), kk->leaflen);
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

/* Memory held by the tables for n distinct stacks: the real keys, then
** (for n beyond them) real keys with a distinct synthetic leaf frame
** appended, each aggregated once. */
static void memory(size_t n)
{
  agg a;
  char *buf = NULL;
  size_t i, cap = 0, kb = 0, nstacks = 0;
  double bytes;
  agg_init(&a);
  for (i = 0; i < n; i++) {
    const key *k = &keys[i % nkeys];
    size_t len = k->len;
    const char *s = k->s;
    uint32_t id, fid, before;
    if (i >= nkeys) {
      if (cap < len + 64) {
        cap = len + 64;
        if (!(buf = realloc(buf, cap))) die("out of memory");
      }
      memcpy(buf, s, len);
      len += (size_t)sprintf(buf + len, "synthetic.lua\37%zu\30", i);
      s = buf;
    }
    kb += len;
    before = a.strs.n;
    id = ljp_strtab_intern(&a.strs, s, len);
    if (a.strs.n > before) nstacks++;  /* a new stack */
    fid = ljp_strtab_intern(&a.strs, k->leaf, k->leaflen);
    ljp_counts_add(&a.counts, ljp_stack_key(id, k->vmstate, 0), 1);
    ljp_counts_add(&a.fcounts, ljp_func_key(fid, k->vmstate), 1);
  }
  bytes = (double)a.strs.bytes + (double)(a.counts.cap + a.fcounts.cap) * sizeof(ljp_count);
  printf("mem_%zu_stacks %zu\nmem_%zu_key_bytes %.1f\nmem_%zu_bytes_per_stack %.1f\n",
         n, nstacks, n, (double)kb / n, n, bytes / (double)nstacks);
  free(buf);
  agg_free(&a);
}

int main(int argc, char **argv)
{
  size_t n = argc > 2 ? (size_t)atol(argv[2]) : 1000000, i, maxlen = 0;
  double kbytes = 0, total = 0;
  uint32_t *seq, *uniq;
  if (argc < 2) die("usage: aggbench STACKS [SAMPLES]");
  load(argv[1]);
  for (i = 0; i < nkeys; i++) {
    kbytes += keys[i].len * keys[i].count;
    total += keys[i].count;
    if (keys[i].len > maxlen) maxlen = keys[i].len;
  }
  if (!(dump = malloc(maxlen + 1))) die("out of memory");
  printf("keys %zu\nkey_bytes_mean %.1f\nsamples %zu\nrecord_bytes %zu\nring_records %d\n",
         nkeys, kbytes / total, n, sizeof(ljp_record), RING);
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
