/*
** The store (store.h): interning and aggregation. Records move from the
** ring into the tables at a safe point when the ring passes its
** high-water mark, at stop, and before any reader looks; never in signal
** context. No file is written here: outputs are rendered by the Lua
** writers (the C API's output option too: writer.c).
*/
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "os.h"
#include "store.h"

int ljp_store_init(ljp_store *s)
{
  memset(s, 0, sizeof(*s));
  if (ljp_strtab_init(&s->strs) != 0 || ljp_strtab_init(&s->frames) != 0 ||
      ljp_strtab_init(&s->stks) != 0 || ljp_strtab_init(&s->tags) != 0 ||
      ljp_counts_init(&s->stacks) != 0 ||
      ljp_counts_init(&s->funcs) != 0 || ljp_counts_init(&s->traces) != 0) {
    ljp_store_free(s);
    return -1;
  }
  return 0;
}

void ljp_store_free(ljp_store *s)
{
  ljp_counts_free(&s->stacks);
  ljp_counts_free(&s->funcs);
  ljp_counts_free(&s->traces);
  ljp_strtab_free(&s->strs);
  ljp_strtab_free(&s->frames);
  ljp_strtab_free(&s->stks);
  ljp_strtab_free(&s->tags);
}

int ljp_store_reset(ljp_store *s)
{
  ljp_store_free(s);
  return ljp_store_init(s);
}

/* Periodic export and snapshots (auto.c): "take the counts so far and
** start fresh" moves everything into out and leaves s empty, ids and
** all (the caches that hold its ids are reset by the caller); a copy
** leaves s as it is. */
int ljp_store_take(ljp_store *s, ljp_store *out)
{
  *out = *s;
  if (ljp_store_init(s) != 0) {   /* out of memory: nothing moves */
    *s = *out;
    memset(out, 0, sizeof(*out));
    return -1;
  }
  return 0;
}

int ljp_store_copy(ljp_store *dst, const ljp_store *s)
{
  memset(dst, 0, sizeof(*dst));
  if (ljp_strtab_copy(&dst->strs, &s->strs) != 0 ||
      ljp_strtab_copy(&dst->frames, &s->frames) != 0 ||
      ljp_strtab_copy(&dst->stks, &s->stks) != 0 ||
      ljp_strtab_copy(&dst->tags, &s->tags) != 0 ||
      ljp_counts_copy(&dst->stacks, &s->stacks) != 0 ||
      ljp_counts_copy(&dst->funcs, &s->funcs) != 0 ||
      ljp_counts_copy(&dst->traces, &s->traces) != 0) {
    ljp_store_free(dst);
    return -1;
  }
  dst->batches = s->batches;
  dst->aggregated = s->aggregated;
  dst->aggregate_ns = s->aggregate_ns;
  return 0;
}

/* Ticks counted in the stacks table. */
uint64_t ljp_store_total(const ljp_store *s)
{
  uint64_t n = 0;
  uint32_t i;
  for (i = 0; i < s->stacks.cap; i++)
    if (s->stacks.slot[i].key) n += s->stacks.slot[i].count;
  return n;
}

uint32_t ljp_store_intern(ljp_store *s, const char *p, size_t n)
{
  uint32_t id = ljp_strtab_intern(&s->strs, p ? p : "", n);
  return id == UINT32_MAX ? 0 : id;
}

uint32_t ljp_store_frame(ljp_store *s, const ljp_frame *f)
{
  uint32_t id = ljp_strtab_intern(&s->frames, (const char *)f, sizeof(*f));
  return id == UINT32_MAX ? 0 : id;
}

static int late_cmp(const void *a, const void *b)
{
  const ljp_late_name *x = a, *y = b;
  if (x->source != y->source) return x->source < y->source ? -1 : 1;
  if (x->linedefined != y->linedefined)
    return x->linedefined < y->linedefined ? -1 : 1;
  return 0;
}

uint32_t ljp_store_name_lua(ljp_store *s, ljp_late_name *v, uint32_t n)
{
  uint32_t id, renamed = 0;
  if (!n) return 0;
  qsort(v, n, sizeof(*v), late_cmp);
  for (id = 1; id < s->frames.n; id++) {
    ljp_frame f;
    const ljp_late_name *e;
    ljp_late_name key;
    ljp_store_frame_get(s, id, &f);
    if (f.kind != LJP_FR_LUA || f.name || f.linedefined == -1) continue;
    key.source = f.source;
    key.linedefined = f.linedefined;
    if (!(e = bsearch(&key, v, n, sizeof(*v), late_cmp))) continue;
    f.name = e->name;
    if (ljp_strtab_rewrite(&s->frames, id, (const char *)&f, sizeof(f)) == 0)
      renamed++;
  }
  if (renamed) ljp_strtab_reindex(&s->frames);
  return renamed;
}

uint32_t ljp_store_stack(ljp_store *s, const uint32_t *ids, uint32_t n)
{
  uint32_t id;
  if (n > LJP_STACK_FRAMES) n = LJP_STACK_FRAMES;
  id = ljp_strtab_intern(&s->stks, (const char *)ids, (size_t)n * 4);
  return id == UINT32_MAX ? 0 : id;
}

uint32_t ljp_store_tag(ljp_store *s, uint16_t zone, uint16_t labels)
{
  unsigned char b[4];
  uint32_t id;
  if (!labels) return zone;
  b[0] = (unsigned char)zone; b[1] = (unsigned char)(zone >> 8);
  b[2] = (unsigned char)labels; b[3] = (unsigned char)(labels >> 8);
  id = ljp_strtab_intern(&s->tags, (const char *)b, 4);
  if (id == UINT32_MAX || id > LJP_TAG_MAX - LJP_TAG_LABELS)
    return LJP_TAG_MAX + 1;
  return LJP_TAG_LABELS + id;
}

void ljp_store_untag(const ljp_store *s, uint32_t tag, uint16_t *zone,
                     uint16_t *labels)
{
  const unsigned char *b;
  if (tag < LJP_TAG_LABELS || tag - LJP_TAG_LABELS >= s->tags.n) {
    *zone = tag < LJP_TAG_LABELS ? (uint16_t)tag : 0;
    *labels = 0;
    return;
  }
  b = (const unsigned char *)ljp_strtab_get(&s->tags, tag - LJP_TAG_LABELS)->s;
  *zone = (uint16_t)(b[0] | b[1] << 8);
  *labels = (uint16_t)(b[2] | b[3] << 8);
}

size_t ljp_store_bytes(const ljp_store *s)
{
  return s->strs.bytes + s->frames.bytes + s->stks.bytes + s->tags.bytes;
}

void ljp_store_drain(ljp_store *s, ljp_ring *ring, _Atomic uint64_t *dropped)
{
  uint64_t pos, tail, done, t0;
  uint32_t tag = 0, last = 0;   /* the last (zone, labels) and its tag */
  int have = 0;
  if (!ring->rec) return;
  t0 = ljp_now_ns();
  tail = atomic_load_explicit(&ring->tail, memory_order_relaxed);
  done = atomic_load_explicit(&ring->done, memory_order_acquire);
  for (pos = tail; pos < done; pos++) {
    ljp_record *r = ljp_ring_at(ring, pos);
    uint32_t w = atomic_load_explicit(&r->weight, memory_order_relaxed);
    uint32_t pair = (uint32_t)r->zone | (uint32_t)r->labels << 16;
    if (!w) continue;  /* nothing known of it: counted dropped */
    if (!have || pair != last) {
      tag = ljp_store_tag(s, r->zone, r->labels);
      last = pair;
      have = 1;
    }
    if (tag > LJP_TAG_MAX ||
        ljp_counts_add(&s->stacks, ljp_stack_key(r->stack, r->vmstate, tag),
                       w) != 0)
      atomic_fetch_add(dropped, w);  /* out of memory */
    /* Side tables; an out-of-memory there loses detail, not samples. */
    ljp_counts_add(&s->funcs, ljp_func_key(r->func, r->vmstate), w);
    if (r->vmstate == 'N')
      ljp_counts_add(&s->traces, ljp_trace_key(r->tloc, r->trace), w);
  }
  ljp_ring_retire(ring, done);
  if (done != tail) s->batches++;
  s->aggregated += done - tail;
  s->aggregate_ns += ljp_now_ns() - t0;
}

int ljp_store_add(ljp_store *s, const ljp_offrec *x)
{
  uint32_t tag = ljp_store_tag(s, x->zone, x->labels);
  if (!x->w) return 0;
  if (tag > LJP_TAG_MAX ||
      ljp_counts_add(&s->stacks, ljp_stack_key(x->stack, x->vmstate, tag),
                     x->w) != 0)
    return -1;
  ljp_counts_add(&s->funcs, ljp_func_key(x->func, x->vmstate), x->w);
  if (x->vmstate == 'N')
    ljp_counts_add(&s->traces, ljp_trace_key(x->tloc, x->trace), x->w);
  return 0;
}

uint32_t ljp_store_nstacks(const ljp_store *s)
{
  uint8_t *seen = calloc(s->stks.n / 8 + 1, 1);
  uint32_t i, n = 0;
  if (!seen) return 0;
  for (i = 0; i < s->stacks.cap; i++) {
    uint64_t k = s->stacks.slot[i].key;
    uint32_t id;
    if (!k) continue;
    id = ljp_stack_key_stack(k);
    if (!(seen[id / 8] & (1u << (id % 8)))) {
      seen[id / 8] |= (uint8_t)(1u << (id % 8));
      n++;
    }
  }
  free(seen);
  return n;
}

void ljp_store_each_stack(const ljp_store *s, ljp_stack_visit fn, void *d)
{
  uint32_t i;
  for (i = 0; i < s->stacks.cap; i++) {
    const ljp_count *c = &s->stacks.slot[i];
    uint16_t zone, labels;
    if (!c->key) continue;
    ljp_store_untag(s, ljp_stack_key_tag(c->key), &zone, &labels);
    fn(d, ljp_stack_key_stack(c->key), ljp_stack_key_vmstate(c->key), zone,
       labels, c->count);
  }
}

void ljp_store_each_func(const ljp_store *s, ljp_func_visit fn, void *d)
{
  uint32_t i;
  for (i = 0; i < s->funcs.cap; i++) {
    const ljp_count *c = &s->funcs.slot[i];
    if (c->key)
      fn(d, ljp_store_text(s, ljp_func_key_func(c->key)),
         ljp_func_key_vmstate(c->key), c->count);
  }
}

void ljp_store_each_trace(const ljp_store *s, ljp_trace_visit fn, void *d)
{
  uint32_t i;
  for (i = 0; i < s->traces.cap; i++) {
    const ljp_count *c = &s->traces.slot[i];
    if (c->key)
      fn(d, ljp_store_text(s, ljp_trace_key_start(c->key)),
         ljp_trace_key_trace(c->key), c->count);
  }
}
