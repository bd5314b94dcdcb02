/*
** Labels: a per-state stack of label sets (endpoint=/api, region=eu),
** scoped like zones. The signal handler reads the current set id
** lock-free (l->cur, one 16-bit store per push or pop), so a sample
** carries the labels that were active when its tick happened. All
** coroutines of a state share the stack, as they share the zone stack.
**
** A set is its pairs sorted by key, each "key\0value\0", interned in a
** string table: id 0 is the empty set, ids are never reused while the
** context lives, so ids stored in samples stay valid. A push merges the
** pushed set onto the current one; the merged set of each (current,
** pushed) pair is remembered, so a push seen before is a hash lookup and
** two stores. Normal context only, except cur, which the handler reads.
*/
#include <stdlib.h>
#include <string.h>

#include "labels.h"

static const char *const reserved[] = {"vmstate", "zone", "thread",
                                       "thread_id", "state", NULL};

int ljp_label_reserved(const char *key, size_t len)
{
  int i;
  for (i = 0; reserved[i]; i++)
    if (strlen(reserved[i]) == len && memcmp(reserved[i], key, len) == 0)
      return 1;
  return 0;
}

static int ready(ljp_labels *l)
{
  if (l->ready) return 1;
  if (ljp_strtab_init(&l->sets) != 0) return 0;
  l->ready = 1;
  return 1;
}

typedef struct pair {
  const char *k, *v;
  size_t kn, vn;
  int at;                   /* input order: a later pair wins */
} pair;

static int key_cmp(const pair *x, const pair *y)
{
  size_t n = x->kn < y->kn ? x->kn : y->kn;
  int c = memcmp(x->k, y->k, n);
  if (c) return c;
  return x->kn < y->kn ? -1 : x->kn > y->kn;
}

/* By key, then by input order. */
static int pair_cmp(const void *a, const void *b)
{
  const pair *x = a, *y = b;
  int c = key_cmp(x, y);
  return c ? c : (x->at > y->at) - (x->at < y->at);
}

/* Intern the set of pairs p[0..n) (a later pair wins over an earlier one
** with the same key). */
static ljp_label_err intern(ljp_labels *l, pair *p, int n, uint16_t *id)
{
  int i, k = 0;
  size_t size = 0;
  char *buf, *w;
  uint32_t got;
  *id = 0;
  if (n == 0) return LJP_LABEL_OK;
  if (!ready(l)) return LJP_LABEL_FULL;
  /* Sorted by key, then input order: the last pair of each key wins. */
  for (i = 0; i < n; i++) p[i].at = i;
  qsort(p, (size_t)n, sizeof(*p), pair_cmp);
  for (i = 0; i < n; i++) {
    if (i + 1 < n && !key_cmp(&p[i], &p[i + 1])) continue;
    p[k] = p[i];
    size += p[k].kn + p[k].vn + 2;
    k++;
  }
  if (k > LJP_LABEL_PAIRS) return LJP_LABEL_TOOMANY;
  if (!(buf = malloc(size))) return LJP_LABEL_FULL;
  for (w = buf, i = 0; i < k; i++) {
    memcpy(w, p[i].k, p[i].kn);
    w += p[i].kn;
    *w++ = '\0';
    memcpy(w, p[i].v, p[i].vn);
    w += p[i].vn;
    *w++ = '\0';
  }
  got = ljp_strtab_intern(&l->sets, buf, size);
  free(buf);
  if (got == UINT32_MAX || got > LJP_LABEL_SETS) return LJP_LABEL_FULL;
  *id = (uint16_t)got;
  return LJP_LABEL_OK;
}

ljp_label_err ljp_label_set(ljp_labels *l, const char *const *kv,
                            const size_t *len, int n, uint16_t *id)
{
  pair p[LJP_LABEL_PAIRS];
  int i;
  *id = 0;
  if (n < 0 || n > LJP_LABEL_PAIRS) return LJP_LABEL_TOOMANY;
  for (i = 0; i < n; i++) {
    const char *k = kv[2 * i], *v = kv[2 * i + 1];
    size_t kn = len[2 * i], vn = len[2 * i + 1];
    if (!k || kn == 0 || kn > LJP_LABEL_TEXT || memchr(k, '\0', kn) ||
        ljp_label_reserved(k, kn))
      return LJP_LABEL_BADKEY;
    if (!v || vn > LJP_LABEL_TEXT || memchr(v, '\0', vn))
      return LJP_LABEL_BADVALUE;
    p[i].k = k; p[i].kn = kn;
    p[i].v = v; p[i].vn = vn;
  }
  return intern(l, p, n, id);
}

/* The pairs of set id appended to p (at most max); their number. */
static int pairs_of(const ljp_labels *l, uint16_t id, pair *p, int max)
{
  const ljp_str *s;
  const char *q, *end;
  int n = 0;
  if (!id || !l->ready || id >= l->sets.n) return 0;
  s = ljp_strtab_get(&l->sets, id);
  for (q = s->s, end = s->s + s->len; q < end && n < max; n++) {
    p[n].k = q;
    p[n].kn = strlen(q);
    q += p[n].kn + 1;
    p[n].v = q;
    p[n].vn = strlen(q);
    q += p[n].vn + 1;
  }
  return n;
}

static uint32_t merge_hash(uint32_t key)
{
  return (uint32_t)(((uint64_t)key * 0x9e3779b97f4a7c15ull) >> 32);
}

/* The remembered merge of key (cur << 16 | pushed), or 0. */
static uint16_t merge_find(const ljp_labels *l, uint32_t key)
{
  uint32_t i;
  if (!l->mcap) return 0;
  for (i = merge_hash(key) & (l->mcap - 1);; i = (i + 1) & (l->mcap - 1)) {
    uint64_t e = l->merge[i];
    if (!e) return 0;
    if ((e >> 16) - 1 == key) return (uint16_t)e;
  }
}

static void merge_put(ljp_labels *l, uint32_t key, uint16_t id)
{
  uint64_t *t = l->merge;
  uint32_t i;
  if ((l->mn + 1) * 10 > l->mcap * 7) {  /* grow at 70% */
    uint32_t cap = l->mcap ? l->mcap * 2 : 64, j;
    uint64_t *n = calloc(cap, sizeof(uint64_t));
    if (!n) return;                        /* a cache: merged again later */
    for (j = 0; j < l->mcap; j++) {
      uint64_t e = t[j];
      if (!e) continue;
      for (i = merge_hash((uint32_t)((e >> 16) - 1)) & (cap - 1); n[i];
           i = (i + 1) & (cap - 1)) {}
      n[i] = e;
    }
    free(t);
    l->merge = n;
    l->mcap = cap;
    t = n;
  }
  for (i = merge_hash(key) & (l->mcap - 1); t[i]; i = (i + 1) & (l->mcap - 1)) {}
  t[i] = ((uint64_t)key + 1) << 16 | id;
  l->mn++;
}

ljp_label_err ljp_label_push(ljp_labels *l, uint16_t id, int may_intern)
{
  uint16_t cur = l->cur, to;
  if (id && (!l->ready || id >= l->sets.n)) return LJP_LABEL_NOSET;
  if (l->depth >= LJP_LABEL_DEPTH) return LJP_LABEL_DEEP;
  if (!cur || cur == id) {
    to = id;
  } else if (!id) {
    to = cur;
  } else {
    uint32_t key = (uint32_t)cur << 16 | id;
    if (!(to = merge_find(l, key))) {
      pair p[2 * LJP_LABEL_PAIRS];
      if (!may_intern) return LJP_LABEL_MISS;
      int n = pairs_of(l, cur, p, LJP_LABEL_PAIRS);
      ljp_label_err e;
      n += pairs_of(l, id, p + n, LJP_LABEL_PAIRS);
      if ((e = intern(l, p, n, &to)) != LJP_LABEL_OK) return e;
      merge_put(l, key, to);
    }
  }
  l->stack[l->depth++] = to;
  l->cur = to;
  return LJP_LABEL_OK;
}

int ljp_label_pop(ljp_labels *l)
{
  uint16_t id;
  if (l->depth == 0) return -1;
  id = l->stack[--l->depth];
  l->cur = l->depth ? l->stack[l->depth - 1] : 0;
  return id;
}

void ljp_label_flush(ljp_labels *l)
{
  l->depth = 0;
  l->cur = 0;
}

int ljp_label_each(const ljp_labels *l, uint16_t id, ljp_label_visit fn,
                   void *d)
{
  pair p[LJP_LABEL_PAIRS];
  int i, n = pairs_of(l, id, p, LJP_LABEL_PAIRS);
  for (i = 0; i < n; i++) fn(d, p[i].k, p[i].kn, p[i].v, p[i].vn);
  return n;
}

uint32_t ljp_label_count(const ljp_labels *l)
{
  return l->ready ? l->sets.n : 1;
}

int ljp_labels_copy_sets(ljp_labels *dst, const ljp_labels *src)
{
  if (!src->ready) return 0;
  if (ljp_strtab_copy(&dst->sets, &src->sets) != 0) return -1;
  dst->ready = 1;
  return 0;
}

void ljp_labels_free(ljp_labels *l)
{
  if (l->ready) ljp_strtab_free(&l->sets);
  free(l->merge);
  l->merge = NULL;
  l->mcap = l->mn = 0;
  l->ready = 0;
  ljp_label_flush(l);
}
