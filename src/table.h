/*
** Aggregation tables (normal context only; never touched by the handler).
**
** ljp_strtab interns stack strings: each distinct dump is stored once and
** named by a dense 32-bit id (id 0 is the empty string). ljp_counts maps a
** nonzero 64-bit key (the store's typed keys, store.h) to a tick count. Both are open-
** addressing hash tables with power-of-two capacity that double at 70%
** load, so memory is proportional to the number of unique stacks.
*/
#ifndef LJP_TABLE_H
#define LJP_TABLE_H

#include <stddef.h>
#include <stdint.h>

uint64_t ljp_hash(const void *p, size_t len);
/* A 32-bit hash of an address (open-addressing tables keyed by one). */
static inline uint32_t ljp_hash_addr(uintptr_t a)
{
  return (uint32_t)(((uint64_t)a * 0x9e3779b97f4a7c15ull) >> 32);
}

typedef struct ljp_str {
  const char *s;
  uint32_t len;
  uint64_t hash;
} ljp_str;

typedef struct ljp_strtab {
  ljp_str *str;        /* id -> string */
  uint32_t n, ncap;
  uint32_t *index;     /* hash slot -> id + 1 (0 = empty) */
  uint32_t icap;
  char *chunk;         /* current string chunk; chunks are chained */
  size_t used, size;
  size_t bytes;        /* memory held */
} ljp_strtab;

int ljp_strtab_init(ljp_strtab *t);
void ljp_strtab_free(ljp_strtab *t);
/* Intern s; returns its id, or UINT32_MAX when out of memory. */
uint32_t ljp_strtab_intern(ljp_strtab *t, const char *s, size_t len);
/* Entry id's bytes replaced by s, of the same length (its id kept);
** 0, or -1 (no such entry, another length). Interning finds the new
** content only after ljp_strtab_reindex (one call after a batch of
** rewrites; before it, or if it fails, the content is interned again
** under a new id, never mistaken for the old). An entry made equal to
** another stays apart (two ids, one content). */
int ljp_strtab_rewrite(ljp_strtab *t, uint32_t id, const char *s, size_t len);
int ljp_strtab_reindex(ljp_strtab *t);
/* A copy of t with the same ids (a snapshot of a live table); 0, or -1
** when out of memory. */
int ljp_strtab_copy(ljp_strtab *dst, const ljp_strtab *t);
static inline const ljp_str *ljp_strtab_get(const ljp_strtab *t, uint32_t id)
{
  return &t->str[id];
}

typedef struct ljp_count {
  uint64_t key;        /* a typed key (store.h); 0 = empty slot */
  uint64_t count;
} ljp_count;

typedef struct ljp_counts {
  ljp_count *slot;
  uint32_t cap, n;
} ljp_counts;

int ljp_counts_init(ljp_counts *c);
void ljp_counts_free(ljp_counts *c);
/* Add n to key's count; -1 when out of memory. key must be nonzero. */
int ljp_counts_add(ljp_counts *c, uint64_t key, uint64_t n);
uint64_t ljp_counts_get(const ljp_counts *c, uint64_t key);
int ljp_counts_copy(ljp_counts *dst, const ljp_counts *c); /* 0, or -1 */

#endif
