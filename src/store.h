/*
** The store: every text a run produces, interned once (stack dumps, leaf
** function names, trace start locations, native frame names), and the
** tick counts aggregated from completed ring records, in three tables
** with typed keys:
**
**   stacks   (stack, VM state, zone)     -> ticks   summary(), outputs
**   funcs    (leaf function, VM state)   -> ticks   functions()
**   traces   (trace start, trace number) -> ticks   traces()
**
** Normal context only (the safe point, stop, and readers); never touched
** by the signal handler.
*/
#ifndef LJP_STORE_H
#define LJP_STORE_H

#include <stdatomic.h>
#include <stdint.h>

#include "ring.h"
#include "table.h"

typedef struct ljp_store {
  ljp_strtab strs;          /* id -> text; id 0 is "" */
  ljp_counts stacks, funcs, traces;
  uint64_t batches;         /* drains that moved records */
  uint64_t aggregated;      /* records moved */
  uint64_t aggregate_ns;    /* time spent moving them */
} ljp_store;

/* -- Typed keys (a key is never 0: the VM state or a tag bit is set) ------ */

static inline uint64_t ljp_stack_key(uint32_t stack, int vmstate,
                                     uint16_t zone)
{
  return ((uint64_t)(uint8_t)vmstate << 48) | ((uint64_t)zone << 32) | stack;
}
static inline uint32_t ljp_stack_key_stack(uint64_t k) { return (uint32_t)k; }
static inline uint16_t ljp_stack_key_zone(uint64_t k) { return (uint16_t)(k >> 32); }
static inline int ljp_stack_key_vmstate(uint64_t k) { return (int)(uint8_t)(k >> 48); }

static inline uint64_t ljp_func_key(uint32_t func, int vmstate)
{
  return ((uint64_t)(uint8_t)vmstate << 48) | func;
}
static inline uint32_t ljp_func_key_func(uint64_t k) { return (uint32_t)k; }
static inline int ljp_func_key_vmstate(uint64_t k) { return (int)(uint8_t)(k >> 48); }

static inline uint64_t ljp_trace_key(uint32_t start, int32_t trace)
{
  return (1ull << 63) | ((uint64_t)(uint32_t)(trace > 0 ? trace : 0) << 32) |
         start;
}
static inline uint32_t ljp_trace_key_start(uint64_t k) { return (uint32_t)k; }
static inline int32_t ljp_trace_key_trace(uint64_t k)
{
  return (int32_t)((k >> 32) & 0x7fffffff);
}

/* -- The store ------------------------------------------------------------ */

int ljp_store_init(ljp_store *s);     /* 0, or -1 out of memory */
void ljp_store_free(ljp_store *s);
int ljp_store_reset(ljp_store *s);    /* a new run: everything forgotten */
/* Intern text; its id, or 0 ("") when out of memory. */
uint32_t ljp_store_intern(ljp_store *s, const char *p, size_t n);
static inline const ljp_str *ljp_store_text(const ljp_store *s, uint32_t id)
{
  return ljp_strtab_get(&s->strs, id);
}
/* Move the completed records of ring into the tables. A record that does
** not fit (out of memory) is added to *dropped. */
void ljp_store_drain(ljp_store *s, ljp_ring *ring, _Atomic uint64_t *dropped);
/* Distinct stacks counted (not every interned text). */
uint32_t ljp_store_nstacks(const ljp_store *s);

typedef void (*ljp_stack_visit)(void *d, const ljp_str *stack, int vmstate,
                                uint16_t zone, uint64_t ticks);
typedef void (*ljp_func_visit)(void *d, const ljp_str *func, int vmstate,
                               uint64_t ticks);
typedef void (*ljp_trace_visit)(void *d, const ljp_str *start, int32_t trace,
                                uint64_t ticks);
void ljp_store_each_stack(const ljp_store *s, ljp_stack_visit fn, void *d);
void ljp_store_each_func(const ljp_store *s, ljp_func_visit fn, void *d);
void ljp_store_each_trace(const ljp_store *s, ljp_trace_visit fn, void *d);

/* Folded stacks ("stack count" per line, VM states and zones summed),
** written to a temporary file and renamed into place (the C API's output
** option). 0, or -1 with one line in err. */
int ljp_store_write_folded(const ljp_store *s, const char *path, char *err,
                           size_t n);
/* Can files be created next to path? Checked before profiling starts. */
int ljp_check_writable(const char *path, char *err, size_t n);

#endif
