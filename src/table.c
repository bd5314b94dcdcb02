/*
** Aggregation tables: stack-string interning and (stack, vmstate, zone)
** tick counts. Normal context only: these allocate.
*/
#include <stdlib.h>
#include <string.h>

#include "table.h"

#define STR_CHUNK (64 * 1024)

static inline uint64_t mix(uint64_t h)
{
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ull;
  h ^= h >> 33;
  return h;
}

uint64_t ljp_hash(const void *p, size_t len)
{
  const unsigned char *s = p;
  uint64_t h = 0x9e3779b97f4a7c15ull ^ (len * 0x100000001b3ull);
  while (len >= 8) {
    uint64_t w;
    memcpy(&w, s, 8);
    h = (h ^ w) * 0x9fb21c651e98df25ull;
    h ^= h >> 29;
    s += 8;
    len -= 8;
  }
  if (len) {
    uint64_t w = 0;
    memcpy(&w, s, len);
    h = (h ^ w) * 0x9fb21c651e98df25ull;
  }
  return mix(h);
}

/* -- String interning ---------------------------------------------------- */

int ljp_strtab_init(ljp_strtab *t)
{
  memset(t, 0, sizeof(*t));
  t->icap = 256;
  t->index = calloc(t->icap, sizeof(uint32_t));
  if (!t->index) return -1;
  t->bytes = t->icap * sizeof(uint32_t);
  return ljp_strtab_intern(t, "", 0) == 0 ? 0 : -1;
}

void ljp_strtab_free(ljp_strtab *t)
{
  char *c = t->chunk;
  while (c) {  /* Each chunk starts with a pointer to the previous one. */
    char *prev;
    memcpy(&prev, c, sizeof(prev));
    free(c);
    c = prev;
  }
  free(t->str);
  free(t->index);
  memset(t, 0, sizeof(*t));
}

static const char *str_store(ljp_strtab *t, const char *s, size_t len)
{
  char *d;
  if (!t->chunk || t->used + len + 1 > t->size) {
    size_t size = sizeof(char *) + (len + 1 > STR_CHUNK ? len + 1 : STR_CHUNK);
    char *c = malloc(size);
    if (!c) return NULL;
    memcpy(c, &t->chunk, sizeof(char *));
    t->chunk = c;
    t->used = sizeof(char *);
    t->size = size;
    t->bytes += size;
  }
  d = t->chunk + t->used;
  memcpy(d, s, len);
  d[len] = '\0';
  t->used += len + 1;
  return d;
}

/* The index rebuilt at capacity cap from the strings' hashes. */
static int index_build(ljp_strtab *t, uint32_t cap)
{
  uint32_t mask = cap - 1, i;
  uint32_t *idx = calloc(cap, sizeof(uint32_t));
  if (!idx) return -1;
  for (i = 0; i < t->n; i++) {
    uint32_t h = (uint32_t)t->str[i].hash & mask;
    while (idx[h]) h = (h + 1) & mask;
    idx[h] = i + 1;
  }
  free(t->index);
  t->bytes += (cap - t->icap) * sizeof(uint32_t);
  t->index = idx;
  t->icap = cap;
  return 0;
}

static int index_grow(ljp_strtab *t)
{
  return index_build(t, t->icap * 2);
}

int ljp_strtab_rewrite(ljp_strtab *t, uint32_t id, const char *s, size_t len)
{
  ljp_str *e;
  if (!id || id >= t->n || t->str[id].len != len) return -1;
  e = &t->str[id];
  memcpy((char *)e->s, s, len);        /* (the chunks are this table's) */
  e->hash = ljp_hash(s, len);
  return 0;
}

int ljp_strtab_reindex(ljp_strtab *t)
{
  return index_build(t, t->icap);
}

uint32_t ljp_strtab_intern(ljp_strtab *t, const char *s, size_t len)
{
  uint64_t hash = ljp_hash(s, len);
  uint32_t mask = t->icap - 1, h = (uint32_t)hash & mask, id;
  const char *d;
  if (len > UINT32_MAX - 1) return UINT32_MAX;
  while (t->index[h]) {
    const ljp_str *e = &t->str[t->index[h] - 1];
    if (e->hash == hash && e->len == len && memcmp(e->s, s, len) == 0)
      return t->index[h] - 1;
    h = (h + 1) & mask;
  }
  if (t->n + 1 >= UINT32_MAX - 1 || t->n + 1 >= t->icap) return UINT32_MAX;
  if (t->n == t->ncap) {
    uint32_t ncap = t->ncap ? t->ncap * 2 : 64;
    ljp_str *str = realloc(t->str, ncap * sizeof(ljp_str));
    if (!str) return UINT32_MAX;
    t->bytes += (ncap - t->ncap) * sizeof(ljp_str);
    t->str = str;
    t->ncap = ncap;
  }
  if (!(d = str_store(t, s, len))) return UINT32_MAX;
  id = t->n++;
  t->str[id].s = d;
  t->str[id].len = (uint32_t)len;
  t->str[id].hash = hash;
  t->index[h] = id + 1;
  if ((uint64_t)t->n * 10 > (uint64_t)t->icap * 7) index_grow(t);
  return id;
}

/* A copy of t, with the same ids: one chunk for all the strings, the
** index as it is. 0, or -1 (out of memory: dst is left empty). */
int ljp_strtab_copy(ljp_strtab *dst, const ljp_strtab *t)
{
  size_t total = sizeof(char *), at = sizeof(char *);
  uint32_t i;
  char *c;
  memset(dst, 0, sizeof(*dst));
  for (i = 0; i < t->n; i++) total += (size_t)t->str[i].len + 1;
  dst->str = malloc((t->ncap ? t->ncap : 1) * sizeof(ljp_str));
  dst->index = malloc((size_t)t->icap * sizeof(uint32_t));
  c = malloc(total);
  if (!dst->str || !dst->index || !c) {
    free(dst->str);
    free(dst->index);
    free(c);
    memset(dst, 0, sizeof(*dst));
    return -1;
  }
  {
    char *none = NULL;              /* no previous chunk */
    memcpy(c, &none, sizeof(none));
  }
  for (i = 0; i < t->n; i++) {
    dst->str[i] = t->str[i];
    dst->str[i].s = c + at;
    memcpy(c + at, t->str[i].s, t->str[i].len);
    c[at + t->str[i].len] = '\0';
    at += (size_t)t->str[i].len + 1;
  }
  memcpy(dst->index, t->index, (size_t)t->icap * sizeof(uint32_t));
  dst->n = t->n;
  dst->ncap = t->ncap ? t->ncap : 1;
  dst->icap = t->icap;
  dst->chunk = c;
  dst->used = dst->size = total;    /* full: a new string gets a new chunk */
  dst->bytes = total + dst->ncap * sizeof(ljp_str) +
               (size_t)t->icap * sizeof(uint32_t);
  return 0;
}

/* -- Counts -------------------------------------------------------------- */

int ljp_counts_init(ljp_counts *c)
{
  c->cap = 256;
  c->n = 0;
  c->slot = calloc(c->cap, sizeof(ljp_count));
  return c->slot ? 0 : -1;
}

void ljp_counts_free(ljp_counts *c)
{
  free(c->slot);
  memset(c, 0, sizeof(*c));
}

static int counts_grow(ljp_counts *c)
{
  uint32_t cap = c->cap * 2, mask = cap - 1, i;
  ljp_count *s = calloc(cap, sizeof(ljp_count));
  if (!s) return -1;
  for (i = 0; i < c->cap; i++) {
    if (c->slot[i].key) {
      uint32_t h = (uint32_t)mix(c->slot[i].key) & mask;
      while (s[h].key) h = (h + 1) & mask;
      s[h] = c->slot[i];
    }
  }
  free(c->slot);
  c->slot = s;
  c->cap = cap;
  return 0;
}

int ljp_counts_add(ljp_counts *c, uint64_t key, uint64_t n)
{
  uint32_t mask = c->cap - 1, h = (uint32_t)mix(key) & mask;
  while (c->slot[h].key) {
    if (c->slot[h].key == key) { c->slot[h].count += n; return 0; }
    h = (h + 1) & mask;
  }
  c->slot[h].key = key;
  c->slot[h].count = n;
  c->n++;
  if ((uint64_t)c->n * 10 > (uint64_t)c->cap * 7 && counts_grow(c) != 0) {
    /* Still consistent (not full yet); the next add retries the growth. */
    if (c->n + 1 >= c->cap) return -1;
  }
  return 0;
}

int ljp_counts_copy(ljp_counts *dst, const ljp_counts *c)
{
  dst->slot = malloc((size_t)c->cap * sizeof(ljp_count));
  if (!dst->slot) {
    memset(dst, 0, sizeof(*dst));
    return -1;
  }
  memcpy(dst->slot, c->slot, (size_t)c->cap * sizeof(ljp_count));
  dst->cap = c->cap;
  dst->n = c->n;
  return 0;
}

uint64_t ljp_counts_get(const ljp_counts *c, uint64_t key)
{
  uint32_t mask = c->cap - 1, h = (uint32_t)mix(key) & mask;
  while (c->slot[h].key) {
    if (c->slot[h].key == key) return c->slot[h].count;
    h = (h + 1) & mask;
  }
  return 0;
}
