/*
** Aggregation: completed ring records -> (stack, vmstate, zone) counts.
** Runs at a safe point when the ring passes its high-water mark, at stop,
** and before any summary is read; never in signal context.
*/
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ljp.h"

void ljp_aggregate(ljp_ctx *ctx)
{
  uint64_t pos, tail, done, t0;
  if (!ctx->ring.rec) return;
  t0 = ljp_now_ns();
  tail = atomic_load_explicit(&ctx->ring.tail, memory_order_relaxed);
  done = atomic_load_explicit(&ctx->ring.done, memory_order_acquire);
  for (pos = tail; pos < done; pos++) {
    ljp_record *r = ljp_ring_at(&ctx->ring, pos);
    uint32_t w = atomic_load_explicit(&r->weight, memory_order_relaxed);
    if (ljp_counts_add(&ctx->counts,
                       ljp_count_key(r->stack, r->vmstate, r->zone), w) != 0)
      atomic_fetch_add(&ctx->n_dropped, w);  /* out of memory */
    /* Side tables; an out-of-memory there loses detail, not samples. */
    ljp_counts_add(&ctx->fcounts, ljp_count_key(r->func, r->vmstate, 0), w);
    if (r->vmstate == 'N')
      ljp_counts_add(&ctx->tcounts, ljp_count_key(r->tloc, 'N',
                     (uint16_t)(r->trace > 0 ? r->trace : 0)), w);
  }
  ljp_ring_retire(&ctx->ring, done);
  if (done != tail) ctx->batches++;
  ctx->aggregated += done - tail;
  ctx->aggregate_ns += ljp_now_ns() - t0;
}

void ljp_aggregate_reset(ljp_ctx *ctx)
{
  ljp_counts_free(&ctx->counts);
  ljp_counts_free(&ctx->fcounts);
  ljp_counts_free(&ctx->tcounts);
  ljp_strtab_free(&ctx->strs);
  ljp_counts_init(&ctx->counts);
  ljp_counts_init(&ctx->fcounts);
  ljp_counts_init(&ctx->tcounts);
  ljp_strtab_init(&ctx->strs);
  ljp_cname_memo_reset(&ctx->cnames);
  ljp_native_names_reset(ctx);  /* its ids are in the string table */
  ctx->last_stack = 0;
  ctx->completed = ctx->safepoints = ctx->batches = ctx->hook_ns = 0;
  ctx->complete_ns = ctx->aggregate_ns = ctx->aggregated = 0;
  atomic_store(&ctx->handler_ns, 0);
  ctx->cb_ticks = 0;
  memset(ctx->vm, 0, sizeof(ctx->vm));
}

/* The temporary file an output is written to before the rename. */
static char *tmp_path(const char *path)
{
  size_t n = strlen(path) + 32;
  char *tmp = malloc(n);
  if (tmp) snprintf(tmp, n, "%s.tmp.%d", path, (int)getpid());
  return tmp;
}

int ljp_check_writable(const char *path, char *err, size_t n)
{
  char *tmp = tmp_path(path);
  FILE *f;
  if (!tmp) {
    snprintf(err, n, "ljprof: out of memory");
    return -1;
  }
  if (!(f = fopen(tmp, "w"))) {
    snprintf(err, n, "ljprof: cannot write output file %s: %s", path,
             strerror(errno));
    free(tmp);
    return -1;
  }
  fclose(f);
  unlink(tmp);
  free(tmp);
  return 0;
}

/* Folded stacks, one "stack count" line per unique stack (VM states
** summed), written to a temporary file and renamed into place. */
int ljp_write_folded(ljp_ctx *ctx, const char *path, char *err, size_t n)
{
  ljp_counts sum;
  char *tmp;
  FILE *f;
  uint32_t i;
  int rc = 0;
  if (ljp_counts_init(&sum) != 0) goto oom;
  for (i = 0; i < ctx->counts.cap; i++) {
    const ljp_count *c = &ctx->counts.slot[i];
    if (c->key)
      ljp_counts_add(&sum, ljp_count_key(ljp_key_stack(c->key), 1, 0),
                     c->count);
  }
  if (!(tmp = tmp_path(path))) { ljp_counts_free(&sum); goto oom; }
  if (!(f = fopen(tmp, "w"))) {
    snprintf(err, n, "ljprof: cannot write %s: %s", path, strerror(errno));
    rc = -1;
  } else {
    for (i = 0; i < sum.cap; i++) {
      const ljp_count *c = &sum.slot[i];
      if (c->key) {
        const ljp_str *s = ljp_strtab_get(&ctx->strs, ljp_key_stack(c->key));
        fprintf(f, "%s %llu\n", s->len ? s->s : "(no stack)",
                (unsigned long long)c->count);
      }
    }
    if (fclose(f) != 0 || rename(tmp, path) != 0) {
      snprintf(err, n, "ljprof: cannot write %s: %s", path, strerror(errno));
      unlink(tmp);
      rc = -1;
    }
  }
  free(tmp);
  ljp_counts_free(&sum);
  return rc;
oom:
  snprintf(err, n, "ljprof: out of memory writing %s", path);
  return -1;
}
