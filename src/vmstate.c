/*
** VM state at signal time, from the interrupted PC.
**
**   'N'  the PC lies in a compiled trace's machine code (trace map, kept
**        from jit.attach "trace" events and jit.util.tracemc)
**   'I'  the PC lies in LuaJIT's own code (interpreter, VM helpers,
**        library functions written in C, GC, compiler)
**   'C'  the PC lies in any other loaded object (C modules, libc, FFI
**        callees)
**   'U'  unknown at signal time; resolved at the safe point, where
**        dl_iterate_phdr may run: code outside every loaded object is
**        LuaJIT machine code, so it is 'N'.
**
** ljp_codemap_classify runs in signal context: no locks, no allocation;
** it reads three sorted range arrays under a seqlock and gives up ('U')
** after a few retries. Writers (normal context, profiled thread) replace
** arrays copy-on-write and keep the old ones until the run has stopped.
*/
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "ljp.h"

/* -- Lock-free reads (signal context) ------------------------------------ */

static const ljp_range *range_find(const ljp_range *r, uint32_t n,
                                   uintptr_t pc)
{
  return ljp_span_find(r, n, sizeof(*r), pc);
}

static int classify_once(ljp_codemap *m, uintptr_t pc, int32_t *trace)
{
  const ljp_range *hit;
  ljp_range *r;
  uint32_t n;
  r = m->traces.r; n = m->traces.n;
  if (r && (hit = range_find(r, n, pc))) { *trace = hit->trace; return 'N'; }
  r = m->vm.r; n = m->vm.n;
  if (r && range_find(r, n, pc)) return 'I';
  r = m->objs.r; n = m->objs.n;
  if (r && range_find(r, n, pc)) return 'C';
  return 'U';
}

int ljp_codemap_classify(ljp_codemap *m, uintptr_t pc, int32_t *trace)
{
  int tries;
  for (tries = 0; tries < 4; tries++) {
    uint32_t s1 = atomic_load_explicit(&m->seq, memory_order_acquire), s2;
    int st;
    int32_t tr = 0;
    if (s1 & 1) continue;
    st = classify_once(m, pc, &tr);
    atomic_thread_fence(memory_order_acquire);
    s2 = atomic_load_explicit(&m->seq, memory_order_relaxed);
    if (s1 == s2) { *trace = tr; return st; }
  }
  return 'U';
}

/* -- Writers (normal context) -------------------------------------------- */

static void write_begin(ljp_codemap *m)
{
  atomic_fetch_add_explicit(&m->seq, 1, memory_order_acq_rel);
  atomic_thread_fence(memory_order_release);
}

static void write_end(ljp_codemap *m)
{
  atomic_thread_fence(memory_order_release);
  atomic_fetch_add_explicit(&m->seq, 1, memory_order_release);
}

static void retire(ljp_codemap *m, void *p)
{
  if (!p) return;
  if (m->ngarbage == m->gcap) {
    uint32_t cap = m->gcap ? m->gcap * 2 : 16;
    void **g = realloc(m->garbage, cap * sizeof(void *));
    if (!g) return; /* leak rather than risk a reader on freed memory */
    m->garbage = g;
    m->gcap = cap;
  }
  m->garbage[m->ngarbage++] = p;
}

/* Publish a new array for set s (copy-on-write). */
static void set_publish(ljp_codemap *m, ljp_rangeset *s, ljp_range *r,
                        uint32_t n, uint32_t cap)
{
  ljp_range *old = s->r;
  write_begin(m);
  s->r = r;
  s->n = n;
  s->cap = cap;
  write_end(m);
  if (old != r) retire(m, old);
}

static int range_cmp(const void *a, const void *b)
{
  const ljp_range *x = a, *y = b;
  return x->lo < y->lo ? -1 : x->lo > y->lo;
}

void ljp_codemap_trace_set(ljp_codemap *m, int32_t trace, uintptr_t lo,
                           size_t size)
{
  ljp_rangeset *s = &m->traces;
  uint32_t i, j = 0, cap = s->n + 1 > 64 ? (s->n + 1) * 2 : 64;
  ljp_range *r = malloc(cap * sizeof(ljp_range));
  int placed = 0;
  if (!r) return;
  /* One ordered pass (the array is sorted): copy-on-write for the
  ** handler, O(n) per trace. */
  for (i = 0; i < s->n; i++) {
    const ljp_range *e = &s->r[i];
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
  set_publish(m, s, r, j, cap);
}

void ljp_codemap_trace_flush(ljp_codemap *m)
{
  set_publish(m, &m->traces, NULL, 0, 0);
}

static int dlgen_cb(struct dl_phdr_info *info, size_t size, void *data)
{
  if (size >= offsetof(struct dl_phdr_info, dlpi_subs) + sizeof(info->dlpi_subs))
    *(unsigned long long *)data = info->dlpi_adds + info->dlpi_subs;
  return 1;  /* the counters are global: the first object suffices */
}

unsigned long long ljp_dl_generation(void)
{
  unsigned long long gen = 0;
  dl_iterate_phdr(dlgen_cb, &gen);
  return gen;
}

typedef struct phdr_scan {
  uintptr_t vm_addr;     /* an address inside LuaJIT's code */
  ljp_range *vm, *objs;
  uint32_t nvm, nobjs, cvm, cobjs;
  int oom;
} phdr_scan;

static void scan_add(ljp_range **r, uint32_t *n, uint32_t *cap, int *oom,
                     uintptr_t lo, uintptr_t hi)
{
  if (*n == *cap) {
    uint32_t c = *cap ? *cap * 2 : 32;
    ljp_range *p = realloc(*r, c * sizeof(ljp_range));
    if (!p) { *oom = 1; return; }
    *r = p;
    *cap = c;
  }
  (*r)[*n].lo = lo;
  (*r)[*n].hi = hi;
  (*r)[*n].trace = 0;
  (*n)++;
}

static int phdr_cb(struct dl_phdr_info *info, size_t size, void *data)
{
  phdr_scan *sc = data;
  int i, is_vm = 0;
  (void)size;
  for (i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
    if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X) &&
        sc->vm_addr >= lo && sc->vm_addr < lo + ph->p_memsz)
      is_vm = 1;
  }
  for (i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
    if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X) || !ph->p_memsz)
      continue;
    if (is_vm)
      scan_add(&sc->vm, &sc->nvm, &sc->cvm, &sc->oom, lo, lo + ph->p_memsz);
    else
      scan_add(&sc->objs, &sc->nobjs, &sc->cobjs, &sc->oom, lo,
               lo + ph->p_memsz);
  }
  return 0;
}

void ljp_codemap_refresh_objs(ljp_codemap *m)
{
  phdr_scan sc;
  memset(&sc, 0, sizeof(sc));
  /* lua_sethook is exported by whatever object holds the VM: the luajit
  ** executable or libluajit. */
  sc.vm_addr = (uintptr_t)(void *)lua_sethook;
  m->dlgen = ljp_dl_generation();
  dl_iterate_phdr(phdr_cb, &sc);
  if (sc.oom) { free(sc.vm); free(sc.objs); return; }
  qsort(sc.vm, sc.nvm, sizeof(ljp_range), range_cmp);
  qsort(sc.objs, sc.nobjs, sizeof(ljp_range), range_cmp);
  set_publish(m, &m->vm, sc.vm, sc.nvm, sc.cvm);
  set_publish(m, &m->objs, sc.objs, sc.nobjs, sc.cobjs);
}

int ljp_codemap_init(ljp_codemap *m)
{
  memset(m, 0, sizeof(*m));
  ljp_codemap_refresh_objs(m);
  return m->vm.n ? 0 : -1;
}

void ljp_codemap_collect(ljp_codemap *m)
{
  uint32_t i;
  for (i = 0; i < m->ngarbage; i++) free(m->garbage[i]);
  m->ngarbage = 0;
}

void ljp_codemap_free(ljp_codemap *m)
{
  ljp_codemap_collect(m);
  free(m->garbage);
  free(m->traces.r);
  free(m->vm.r);
  free(m->objs.r);
  memset(m, 0, sizeof(*m));
}

int ljp_codemap_resolve(ljp_codemap *m, uintptr_t pc, int32_t *trace)
{
  int st = ljp_codemap_classify(m, pc, trace);
  if (st != 'U') return st;
  if (ljp_dl_generation() != m->dlgen) {  /* a library (un)loaded */
    ljp_codemap_refresh_objs(m);
    st = ljp_codemap_classify(m, pc, trace);
    if (st != 'U') return st;
  }
  *trace = 0;                    /* anonymous code: LuaJIT machine code */
  return 'N';
}
