/*
** The code map: VM state at signal time, from the interrupted PC.
**
**   'N'  the PC lies in a compiled trace's machine code (trace map, kept
**        from jit.attach "trace" events and jit.util.tracemc)
**   'I'  the PC lies in LuaJIT's own code (interpreter, VM helpers,
**        library functions written in C, GC, compiler)
**   'C'  the PC lies in any other loaded object (C modules, libc, FFI
**        callees)
**   'U'  unknown at signal time; resolved at the safe point, where the
**        object registry may be refreshed: code outside every loaded
**        object is LuaJIT machine code, so it is 'N'.
**
** Rules: ljp_codemap_classify runs in signal context: no locks, no
** allocation; inside one epoch section (objects.h) it searches this
** context's immutable trace array and the registry's snapshot. Writers
** (normal context, profiled thread) replace the trace array copy-on-write
** and retire the old one to the epoch. Loaded objects are not kept here:
** they are the registry's (objects.c).
*/
#include <stdlib.h>
#include <string.h>

#include "codemap.h"
#include "objects.h"

/* -- Lock-free reads (signal context) ------------------------------------ */

int ljp_codemap_classify(ljp_codemap *m, uintptr_t pc, int32_t *trace)
{
  const ljp_tracemap *tm;
  const ljp_range *hit;
  const ljp_span *sp;
  int st = 'U', t = ljp_epoch_enter();
  if (t < 0) return 'U';
  tm = atomic_load(&m->traces);
  if (tm && (hit = ljp_span_find(tm->r, tm->n, sizeof(ljp_range), pc))) {
    *trace = hit->trace;
    st = 'N';
  } else if ((sp = ljp_objects_find(ljp_objects_snap(), pc))) {
    st = sp->kind == LJP_SPAN_VM || sp->kind == LJP_SPAN_INTERP ? 'I' : 'C';
  }
  ljp_epoch_leave(t);
  return st;
}

/* The kind (LJP_SPAN_*) of the loaded object's span holding pc, and
** whether the interpreter's own span is known (*known, read in the same
** epoch section); SPAN_NONE in no object, SPAN_UNREAD when the registry
** cannot be read now. */
#define SPAN_NONE (-1)
#define SPAN_UNREAD (-2)
static inline int span_kind(uintptr_t pc, int *known)
{
  const ljp_span *sp;
  int k = SPAN_NONE, t = ljp_epoch_enter();
  *known = 0;
  if (t < 0) return SPAN_UNREAD;
  if ((sp = ljp_objects_find(ljp_objects_snap(), pc))) {
    k = sp->kind;
    *known = ljp_objects_interp_known();
  }
  ljp_epoch_leave(t);
  return k;
}

int ljp_codemap_in_interp(uintptr_t pc)
{
  int known, k = span_kind(pc, &known);
  return k == SPAN_UNREAD || k == LJP_SPAN_INTERP ||
         (k == LJP_SPAN_VM && !known);
}

int ljp_codemap_outside_interp(uintptr_t pc)
{
  int known, k = span_kind(pc, &known);
  return k >= 0 && k != LJP_SPAN_INTERP && known;
}

/* -- Writers (normal context) -------------------------------------------- */

/* Publish a new trace array (copy-on-write); the old one is retired and
** freed as soon as no handler can be reading it: a program that compiles
** thousands of traces replaces the array once per trace learnt, and
** arrays left to a later collect piled up (2,000 hot functions at 10 kHz:
** 132 MB of retired arrays, heaptrack). */
static void publish(ljp_codemap *m, ljp_tracemap *tm)
{
  ljp_epoch_retire(atomic_exchange(&m->traces, tm), NULL);
  ljp_epoch_collect();
}

void ljp_codemap_trace_set(ljp_codemap *m, int32_t trace, uintptr_t lo,
                           size_t size)
{
  const ljp_tracemap *old = atomic_load(&m->traces);  /* ours: we write */
  uint32_t i, j = 0, n = old ? old->n : 0;
  ljp_tracemap *tm = malloc(sizeof(*tm) + (n + 1) * sizeof(ljp_range));
  ljp_range *r;
  int placed = 0;
  if (!tm) return;
  r = tm->r;
  /* One ordered pass (the array is sorted): O(n) per trace. */
  for (i = 0; i < n; i++) {
    const ljp_range *e = &old->r[i];
    /* Drop the old trace of that number and anything it now overlaps. */
    if (e->trace == trace || (e->lo < lo + size && lo < e->hi)) continue;
    if (!placed && e->lo > lo) {
      r[j].lo = lo;
      r[j].hi = lo + size;
      r[j].trace = trace;
      j++;
      placed = 1;
    }
    r[j++] = *e;
  }
  if (!placed) {
    r[j].lo = lo;
    r[j].hi = lo + size;
    r[j].trace = trace;
    j++;
  }
  tm->n = j;
  publish(m, tm);
}

void ljp_codemap_trace_flush(ljp_codemap *m)
{
  publish(m, NULL);
}

int ljp_codemap_init(ljp_codemap *m)
{
  memset(m, 0, sizeof(*m));
  return ljp_objects_have_vm() ? 0 : -1;
}

void ljp_codemap_free(ljp_codemap *m)
{
  publish(m, NULL);
  ljp_epoch_collect();
}

int ljp_codemap_resolve(ljp_codemap *m, uintptr_t pc, int32_t *trace)
{
  int st = ljp_codemap_classify(m, pc, trace);
  if (st != 'U') return st;
  ljp_objects_refresh();  /* a library (un)loaded? */
  st = ljp_codemap_classify(m, pc, trace);
  if (st != 'U') return st;
  *trace = 0;                    /* anonymous code: LuaJIT machine code */
  return 'N';
}
