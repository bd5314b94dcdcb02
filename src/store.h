/*
** The store: what a run produces, each interned once under a dense id,
**
**   texts    chunk names, function names, leaf functions, trace starts,
**            native frame names
**   frames   one level of a stack: a Lua function at a line (chunk, name,
**            first line, line), a C function, a fast function, a native
**            frame (ljp_frame, a fixed-size record)
**   stacks   arrays of frame ids, innermost first
**
** and the tick counts aggregated from completed ring records, in three
** tables with typed keys:
**
**   stacks   (stack, VM state, tag)      -> ticks   summary(), outputs
**   funcs    (leaf function, VM state)   -> ticks   functions()
**   traces   (trace start, trace number) -> ticks   traces()
**
** A tag is a sample's (zone, label set) in 24 bits: the zone id itself
** when the sample has no labels (so a run without labels keys exactly as
** before), else 65536 + the pair's id in the store's tags table, a second
** level of interning (a run sees few distinct pairs). The key stays one
** 64-bit word: stack 32 bits, tag 24, VM state 8.
**
** Aggregation hashes ids, never text: a stack's text is built only by the
** views that ask for one (dumpstack.c renders frames in a format).
**
** Normal context only (the safe point, stop, and readers); never touched
** by the signal handler.
*/
#ifndef LJP_STORE_H
#define LJP_STORE_H

#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "buf.h"
#include "ring.h"
#include "table.h"

/* One level of a stack. Fixed size, no padding holes (interned by its
** bytes). */
typedef enum {
  LJP_FR_LUA = 1,   /* source, name (0: none), linedefined, line */
  LJP_FR_C,         /* a C function on the Lua stack: ptr = its entry,
                       printed as jit.profile does (@0x...) */
  LJP_FR_CNAMED,    /* the C function a sample ran in: ptr = its entry,
                       printed by name (string.rep, cjson.encode); aux: a
                       fast function's id, for one without a known name */
  LJP_FR_FFUNC,     /* a fast function: aux = its id, ptr = its entry */
  LJP_FR_NATIVE     /* a native (C) frame: source = its name */
} ljp_frame_kind;

typedef struct ljp_frame {
  uint32_t kind;            /* ljp_frame_kind */
  int32_t linedefined;      /* Lua: first line (-1: bytecode builtin) */
  int32_t line;             /* Lua: the line shown by 'l' */
  uint32_t source;          /* Lua: chunk name; native: name (text ids) */
  uint32_t name;            /* Lua: its name where it was called (0) */
  uint32_t aux;             /* fast function id */
  uint64_t ptr;             /* C entry */
} ljp_frame;

#define LJP_STACK_FRAMES 1024  /* frames kept per stack (the innermost) */

typedef struct ljp_store {
  ljp_strtab strs;          /* id -> text; id 0 is "" */
  ljp_strtab frames;        /* id -> ljp_frame; id 0 is no frame */
  ljp_strtab stks;          /* id -> frame ids (uint32), innermost first;
                               id 0 is the empty stack */
  ljp_strtab tags;          /* id -> (zone, label set), 2 + 2 bytes: the
                               tags of samples with labels */
  ljp_counts stacks, funcs, traces;
  uint64_t batches;         /* drains that moved records */
  uint64_t aggregated;      /* records moved */
  uint64_t aggregate_ns;    /* time spent moving them */
} ljp_store;

/* -- Typed keys (a key is never 0: the VM state or a tag bit is set) ------ */

#define LJP_TAG_LABELS 0x10000u   /* tags from here name a (zone, labels)
                                     pair; below, a zone alone */
#define LJP_TAG_MAX 0xffffffu

static inline uint64_t ljp_stack_key(uint32_t stack, int vmstate,
                                     uint32_t tag)
{
  return ((uint64_t)(uint8_t)vmstate << 56) |
         ((uint64_t)(tag & LJP_TAG_MAX) << 32) | stack;
}
static inline uint32_t ljp_stack_key_stack(uint64_t k) { return (uint32_t)k; }
static inline uint32_t ljp_stack_key_tag(uint64_t k)
{
  return (uint32_t)(k >> 32) & LJP_TAG_MAX;
}
static inline int ljp_stack_key_vmstate(uint64_t k) { return (int)(uint8_t)(k >> 56); }

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
/* Take everything counted so far into out and start fresh (s is then a
** new empty store: its ids start over); 0, or -1 when out of memory
** (nothing moved). A copy of s with the same ids, s unchanged; 0 or -1.
** Both for periodic export and snapshots (auto.c). */
int ljp_store_take(ljp_store *s, ljp_store *out);
int ljp_store_copy(ljp_store *dst, const ljp_store *s);
uint64_t ljp_store_total(const ljp_store *s);  /* ticks in the stacks table */
/* Intern text; its id, or 0 ("") when out of memory. */
uint32_t ljp_store_intern(ljp_store *s, const char *p, size_t n);
static inline const ljp_str *ljp_store_text(const ljp_store *s, uint32_t id)
{
  return ljp_strtab_get(&s->strs, id);
}
/* Intern a frame, a stack of n frame ids; 0 when out of memory (then a
** frame is left out, a stack is the empty one). */
uint32_t ljp_store_frame(ljp_store *s, const ljp_frame *f);
uint32_t ljp_store_stack(ljp_store *s, const uint32_t *ids, uint32_t n);
/* Names found after frames were interned without one (the run's end:
** luaframes.c ljp_frames_name_late): every Lua frame of chunk source
** (text id) and first line linedefined that has no name takes name (a
** text id). v is sorted here; returns the frames renamed. Equal frames
** may then appear twice (the views merge them). */
typedef struct ljp_late_name {
  uint32_t source, name;
  int32_t linedefined;
} ljp_late_name;
uint32_t ljp_store_name_lua(ljp_store *s, ljp_late_name *v, uint32_t n);
static inline void ljp_store_frame_get(const ljp_store *s, uint32_t id,
                                       ljp_frame *f)
{
  memcpy(f, ljp_strtab_get(&s->frames, id)->s, sizeof(*f));
}
/* Frame i of stack id (0: innermost); *n: its frame count. */
static inline uint32_t ljp_store_stack_len(const ljp_store *s, uint32_t id)
{
  return ljp_strtab_get(&s->stks, id)->len / 4;
}
static inline uint32_t ljp_store_stack_at(const ljp_store *s, uint32_t id,
                                          uint32_t i)
{
  uint32_t v;
  memcpy(&v, ljp_strtab_get(&s->stks, id)->s + 4 * i, 4);
  return v;
}
/* The tag of (zone, label set): LJP_TAG_MAX + 1 when it cannot be made
** (out of memory, or 2^24 - 2^16 pairs). */
uint32_t ljp_store_tag(ljp_store *s, uint16_t zone, uint16_t labels);
/* The zone and label set of a tag. */
void ljp_store_untag(const ljp_store *s, uint32_t tag, uint16_t *zone,
                     uint16_t *labels);
/* Memory held by the interned texts, frames and stacks. */
size_t ljp_store_bytes(const ljp_store *s);

/* Move the completed records of ring into the tables. A record that does
** not fit (out of memory) is added to *dropped. */
void ljp_store_drain(ljp_store *s, ljp_ring *ring, _Atomic uint64_t *dropped);
/* A sample completed outside the ring (auto.c: the pending records the
** export helper counts, complete.c) and its count into a store: 0, or -1
** when out of memory (then it is not counted). */
typedef struct ljp_offrec {
  uint32_t stack, func, tloc, w;
  int32_t trace;
  uint16_t zone, labels;
  uint8_t vmstate;
} ljp_offrec;
int ljp_store_add(ljp_store *s, const ljp_offrec *x);
/* Distinct stacks counted (not every interned text). */
uint32_t ljp_store_nstacks(const ljp_store *s);

typedef void (*ljp_stack_visit)(void *d, uint32_t stack, int vmstate,
                                uint16_t zone, uint16_t labels,
                                uint64_t ticks);
typedef void (*ljp_func_visit)(void *d, const ljp_str *func, int vmstate,
                               uint64_t ticks);
typedef void (*ljp_trace_visit)(void *d, const ljp_str *start, int32_t trace,
                                uint64_t ticks);
void ljp_store_each_stack(const ljp_store *s, ljp_stack_visit fn, void *d);
void ljp_store_each_func(const ljp_store *s, ljp_func_visit fn, void *d);
void ljp_store_each_trace(const ljp_store *s, ljp_trace_visit fn, void *d);

#endif
