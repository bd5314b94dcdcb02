/*
** Labels (labels.c): a per-state stack of label sets, key/value pairs
** such as endpoint=/api that every sample taken while they are pushed
** carries (pprof sample labels, summary() entries' labels). Scoped like
** zones: a push merges its pairs onto the current set (a key pushed again
** takes the new value) and a pop restores the set before.
**
** A set is interned once per context to a small id (0: the empty set)
** and ids are never reused while the context lives, so ids kept in
** samples stay valid across runs. Normal context only, except cur, which
** the signal handler reads (one 16-bit load): a sample carries the set
** active at its tick.
*/
#ifndef LJP_LABELS_H
#define LJP_LABELS_H

#include <stddef.h>
#include <stdint.h>

#include "table.h"

#define LJP_LABEL_DEPTH 64      /* pushes nested */
#define LJP_LABEL_SETS 65535    /* distinct sets per context */
#define LJP_LABEL_PAIRS 64      /* pairs per set */
#define LJP_LABEL_TEXT 256      /* bytes per key or value */

typedef struct ljp_labels {
  volatile uint16_t cur;    /* current set id, 0: none (the handler) */
  int depth;
  uint16_t stack[LJP_LABEL_DEPTH];
  ljp_strtab sets;          /* id -> "key\0value\0..." sorted by key;
                               id 0 is the empty set ("") */
  int ready;                /* sets initialised */
  uint64_t *merge;          /* (set, pushed set) -> merged set: a cache
                               of open-addressing slots, (key + 1) << 16
                               | merged id, key = set << 16 | pushed */
  uint32_t mcap, mn;
} ljp_labels;

/* Why a label call failed, for the caller's one-line error (the C API
** returns them negated: LJPROF_LABEL_EKEY is -LJP_LABEL_BADKEY, ...). */
typedef enum {
  LJP_LABEL_OK = 0,
  LJP_LABEL_BADKEY,         /* empty, too long, NUL inside, reserved */
  LJP_LABEL_BADVALUE,       /* too long, NUL inside */
  LJP_LABEL_TOOMANY,        /* more than LJP_LABEL_PAIRS pairs */
  LJP_LABEL_FULL,           /* LJP_LABEL_SETS sets, or out of memory */
  LJP_LABEL_DEEP,           /* the stack is full */
  LJP_LABEL_NOSET,          /* not an id of this context */
  LJP_LABEL_EMPTY,          /* pop with nothing pushed */
  LJP_LABEL_MISS            /* (push without interning) a merge not seen
                               before: push again with may_intern */
} ljp_label_err;

/* Keys ljprof puts on every pprof sample itself: refused as user keys. */
int ljp_label_reserved(const char *key, size_t len);

/* The set of n pairs (kv[2i] key, kv[2i+1] value, lengths in len[2i],
** len[2i+1]; a later pair wins over an earlier one with the same key):
** its id (> 0, or 0 for no pairs) in *id. */
ljp_label_err ljp_label_set(ljp_labels *l, const char *const *kv,
                            const size_t *len, int n, uint16_t *id);
/* Push set id merged onto the current one; pop back. Without may_intern
** a merge not seen before is not made (LJP_LABEL_MISS): the caller makes
** it with may_intern set, where interning may happen (api.c's gate). */
ljp_label_err ljp_label_push(ljp_labels *l, uint16_t id, int may_intern);
int ljp_label_pop(ljp_labels *l);  /* the set popped, -1: the stack is empty */
void ljp_label_flush(ljp_labels *l);
/* Set id's pairs: calls fn(d, key, klen, value, vlen) for each, by key.
** Returns the number of pairs. */
typedef void (*ljp_label_visit)(void *d, const char *k, size_t kn,
                                const char *v, size_t vn);
int ljp_label_each(const ljp_labels *l, uint16_t id, ljp_label_visit fn,
                   void *d);
uint32_t ljp_label_count(const ljp_labels *l); /* sets interned, with 0 */
void ljp_labels_free(ljp_labels *l);
/* A snapshot's labels (dst zeroed): src's sets, with the same ids (none
** when src has none yet). 0, or -1 out of memory (dst then has none). */
int ljp_labels_copy_sets(ljp_labels *dst, const ljp_labels *src);

#endif
