/*
** The object registry: every loaded object (executable, libraries, vDSO)
** in one immutable snapshot, and the one reclamation scheme of ljprof.
**
** Rules. Only this file calls dl_iterate_phdr, and only this file decides
** which object is LuaJIT's (the one holding lua_gettop's code). Inside
** the dl_iterate_phdr callback everything needed later is copied (name,
** segments, the .eh_frame_hdr's first bytes and table location, validated
** by cfi.c): the
** loader's strings and headers are never touched after the callback
** returns, since another thread's dlclose may free or unmap them. The
** registry is process-wide and rebuilt in normal context (safe points,
** start, name lookups) when the loader generation (adds + subs) changed.
** Signal context only enters an epoch section, loads the snapshot pointer
** and binary-searches its spans: no locks, no allocation.
**
** A snapshot is a sorted array of executable spans (kind: LuaJIT's
** object, its interpreter, ljprof itself, other) pointing at objects. An
** object carries its copied name, load bias, segments, its .eh_frame_hdr
** search table with every mapped segment (ljp_ehtab: what the signal
** handler's own unwinder, cfi.c, may read) and, loaded on first use,
** its function symbols (.symtab, else .dynsym; the vDSO from memory),
** plus the IFUNC implementations the program calls, named by their public
** names ("sin", "memcpy"; see add_ifunc_impls).
** Objects still loaded are shared by consecutive snapshots; an object
** that is gone is retired.
**
** Reclamation (epoch). A global epoch E and two reader counters, one per
** parity of E. A reader loads e = E, increments count[e & 1], and re-reads
** E: if it changed it backs out (retrying a few times, then giving up:
** the caller skips and counts). Writers (normal context) unpublish first,
** then retire the pointer tagged with the current E. Collect advances E
** from k to k+1 only when count[(k-1) & 1] is zero, and frees what was
** retired with a tag <= E-2. Why that is safe (all atomics seq_cst):
**  1. A reader that can still hold p loaded it before p was unpublished,
**     so it validated an epoch <= tag(p).
**  2. When E goes k -> k+1 no reader of epoch k-1 is inside (its counter
**     read zero; one that increments later re-reads E != k-1 and backs
**     out), and by induction none of an epoch < k-1 either (the step
**     k-1 -> k checked them, and nobody validates an old epoch again).
**  3. So at E >= tag+2 no reader of an epoch <= tag is left: p is free.
** The same scheme frees replaced snapshots, retired objects, and the code
** map's replaced trace arrays.
*/
#define _GNU_SOURCE
#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <sys/uio.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ljp.h"
#include "cfi.h"
#include "objects.h"

/* -- Reclamation ----------------------------------------------------------- */

typedef struct retired {
  void *p;
  void (*fn)(void *);
  unsigned long tag;
} retired;

static _Atomic unsigned long ep_epoch = 2;
static _Atomic unsigned long ep_readers[2];
static pthread_mutex_t ep_mu = PTHREAD_MUTEX_INITIALIZER;
static retired *ep_list;
static uint32_t ep_n, ep_cap;

int ljp_epoch_enter(void)
{
  int tries;
  for (tries = 0; tries < 4; tries++) {
    unsigned long e = atomic_load(&ep_epoch);
    atomic_fetch_add(&ep_readers[e & 1], 1);
    if (atomic_load(&ep_epoch) == e) return (int)(e & 1);
    atomic_fetch_sub(&ep_readers[e & 1], 1);
  }
  return -1;
}

void ljp_epoch_leave(int token)
{
  if (token >= 0) atomic_fetch_sub(&ep_readers[token], 1);
}

void ljp_epoch_retire(void *p, void (*fn)(void *))
{
  if (!p) return;
  pthread_mutex_lock(&ep_mu);
  if (ep_n == ep_cap) {
    uint32_t c = ep_cap ? ep_cap * 2 : 64;
    retired *l = realloc(ep_list, c * sizeof(*l));
    if (!l) {  /* leak rather than free under a reader */
      pthread_mutex_unlock(&ep_mu);
      return;
    }
    ep_list = l;
    ep_cap = c;
  }
  ep_list[ep_n].p = p;
  ep_list[ep_n].fn = fn;
  ep_list[ep_n].tag = atomic_load(&ep_epoch);  /* after the unpublish */
  ep_n++;
  pthread_mutex_unlock(&ep_mu);
}

void ljp_epoch_collect(void)
{
  uint32_t i, j = 0;
  int round;
  unsigned long e;
  pthread_mutex_lock(&ep_mu);
  if (!ep_n) {
    pthread_mutex_unlock(&ep_mu);
    return;
  }
  for (round = 0; round < 2; round++) {
    unsigned long k = atomic_load(&ep_epoch);
    if (atomic_load(&ep_readers[(k - 1) & 1]) != 0) break;
    atomic_store(&ep_epoch, k + 1);
  }
  e = atomic_load(&ep_epoch);
  for (i = 0; i < ep_n; i++) {
    if (ep_list[i].tag + 2 <= e) {
      if (ep_list[i].fn) ep_list[i].fn(ep_list[i].p);
      else free(ep_list[i].p);
    } else {
      ep_list[j++] = ep_list[i];
    }
  }
  ep_n = j;
  pthread_mutex_unlock(&ep_mu);
}

/* -- Objects ------------------------------------------------------------------ */

typedef struct sym {
  uintptr_t lo, hi;
  uint32_t name;      /* offset in the object's name arena */
  uint32_t ifunc;     /* an STT_GNU_IFUNC symbol (lo: its resolver) */
} sym;

#define OBJ_SEGS 8

struct ljp_object {
  char *name;               /* copy of dlpi_name ("": the main program) */
  const char *short_name;   /* basename, for "object+0x..." */
  uintptr_t base;           /* load bias */
  ljp_ehtab eh;             /* unwind table and mapped segments (cfi.h) */
  unsigned char print[12];  /* the header's first bytes at the scan */
  int kind;                 /* LJP_SPAN_VM, LJP_SPAN_SELF, LJP_SPAN_OTHER */
  int nseg;
  uintptr_t lo[OBJ_SEGS], hi[OBJ_SEGS];  /* executable segments */
  int syms_loaded;
  sym *s;
  uint32_t ns;
  char *names;
};

static pthread_mutex_t reg_mu = PTHREAD_MUTEX_INITIALIZER;
static _Atomic(ljp_objsnap *) reg_cur;
static uintptr_t reg_interp_lo, reg_interp_hi;
static _Atomic unsigned long long reg_gen = ~0ull; /* the snapshot's dlgen */

const ljp_objsnap *ljp_objects_snap(void)
{
  return atomic_load(&reg_cur);
}

const ljp_span *ljp_objects_find(const ljp_objsnap *s, uintptr_t pc)
{
  return s ? ljp_span_find(s->span, s->nspan, sizeof(ljp_span), pc) : NULL;
}

int ljp_objects_is_self(uintptr_t pc)
{
  const ljp_span *e;
  int self, t = ljp_epoch_enter();
  if (t < 0) return 0;
  e = ljp_objects_find(ljp_objects_snap(), pc);
  self = e && e->kind == LJP_SPAN_SELF;
  ljp_epoch_leave(t);
  return self;
}

const ljp_ehtab *ljp_objects_ehtab(const ljp_objsnap *s, const ljp_span *e)
{
  return s && e && e->obj < s->nobj && e->unwind ? &s->obj[e->obj]->eh
                                                 : NULL;
}

/* A fingerprint of the loader's list of objects (load bias and dynamic
** section of each): it changes when an object is loaded, unloaded or
** replaced by another at the same place. Signal context too: the walk is
** bounded (a node freed by another thread's dlclose meanwhile reads as
** garbage, i.e. a mismatch, never as a fault: it is heap memory). */
uint64_t ljp_objects_print(void)
{
  /* The loader's list is read without its lock (this runs in the signal
  ** handler): another thread's dlclose may free a node under the walk.
  ** So each node's first words (l_addr, l_name, l_ld, l_next) are read
  ** with one process_vm_readv: a freed node reads as garbage or fails,
  ** and a print that matches no snapshot only skips a native walk. */
  _Static_assert(offsetof(struct link_map, l_addr) == 0 &&
                 offsetof(struct link_map, l_ld) == 2 * sizeof(void *) &&
                 offsetof(struct link_map, l_next) == 3 * sizeof(void *),
                 "struct link_map's public layout");
  uintptr_t l = (uintptr_t)_r_debug.r_map, w[4];
  uint64_t h = 1469598103934665603ull;
  int n = 0;
  for (; l && n < 1024; l = w[3], n++) {
    struct iovec li = {w, sizeof(w)}, ri = {(void *)l, sizeof(w)};
    if (l < 4096 || process_vm_readv(ljp_self_pid(), &li, 1, &ri, 1, 0) !=
                        (ssize_t)sizeof(w))
      return 0;  /* unreadable: never a snapshot's print */
    h = (h ^ (uint64_t)w[0]) * 1099511628211ull;
    h = (h ^ (uint64_t)w[2]) * 1099511628211ull;
  }
  h ^= (uint64_t)n;
  return h ? h : 1;
}

/* The loader's list now, node by node (normal context, same fault-safe
** reads as the print). Returns the number of nodes, 0 when unreadable or
** longer than max. */
static uint32_t lm_walk(ljp_lmnode *out, uint32_t max)
{
  uintptr_t l = (uintptr_t)_r_debug.r_map, w[4];
  uint32_t n = 0;
  for (; l; l = w[3]) {
    struct iovec li = {w, sizeof(w)}, ri = {(void *)l, sizeof(w)};
    if (n == max || l < 4096 ||
        process_vm_readv(ljp_self_pid(), &li, 1, &ri, 1, 0) != (ssize_t)sizeof(w))
      return 0;
    out[n].node = l;
    out[n].addr = w[0];
    out[n].ld = w[2];
    out[n].next = w[3];
    n++;
  }
  return n;
}

#define LM_BATCH 32

int ljp_objects_unchanged(const ljp_objsnap *s)
{
  uintptr_t w[LM_BATCH][4];
  struct iovec li[LM_BATCH], ri[LM_BATCH];
  uint32_t i, k, m;
  if (!s || !s->nlm || (uintptr_t)_r_debug.r_map != s->lm[0].node) return 0;
  for (i = 0; i < s->nlm; i += m) {
    m = s->nlm - i < LM_BATCH ? s->nlm - i : LM_BATCH;
    for (k = 0; k < m; k++) {
      li[k].iov_base = w[k];
      li[k].iov_len = sizeof(w[k]);
      ri[k].iov_base = (void *)s->lm[i + k].node;
      ri[k].iov_len = sizeof(w[k]);
    }
    if (process_vm_readv(ljp_self_pid(), li, m, ri, m, 0) !=
        (ssize_t)(m * sizeof(w[0])))
      return 0;
    for (k = 0; k < m; k++) {
      const ljp_lmnode *e = &s->lm[i + k];
      if (w[k][0] != e->addr || w[k][2] != e->ld || w[k][3] != e->next)
        return 0;
    }
  }
  return 1;
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

static void obj_free(void *p)
{
  ljp_object *ob = p;
  free(ob->s);
  free(ob->names);
  free(ob->name);
  free(ob);
}

typedef struct scan {
  ljp_object **o;
  uint32_t n, cap;
  int oom;
} scan;

/* Called with the loader's lock held: copy everything needed now. */
static int scan_cb(struct dl_phdr_info *info, size_t size, void *data)
{
  scan *sc = data;
  ljp_object *o;
  uintptr_t vm = (uintptr_t)(void *)lua_gettop;
  uintptr_t self = (uintptr_t)(void *)ljp_objects_refresh;
  uintptr_t hdr = 0;
  int i;
  (void)size;
  if (sc->n == sc->cap) {
    uint32_t c = sc->cap ? sc->cap * 2 : 32;
    ljp_object **p = realloc(sc->o, c * sizeof(*p));
    if (!p) { sc->oom = 1; return 1; }
    sc->o = p;
    sc->cap = c;
  }
  if (!(o = calloc(1, sizeof(*o)))) { sc->oom = 1; return 1; }
  o->base = info->dlpi_addr;
  o->kind = LJP_SPAN_OTHER;
  for (i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type == PT_GNU_EH_FRAME)
      hdr = info->dlpi_addr + ph->p_vaddr;
    if (ph->p_type == PT_LOAD && (ph->p_flags & PF_R) && ph->p_memsz &&
        o->eh.nseg < LJP_EH_SEGS) {  /* what the unwinder may read */
      o->eh.lo[o->eh.nseg] = info->dlpi_addr + ph->p_vaddr;
      o->eh.hi[o->eh.nseg] = info->dlpi_addr + ph->p_vaddr + ph->p_memsz;
      o->eh.nseg++;
    }
    if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X) && ph->p_memsz &&
        o->nseg < OBJ_SEGS) {
      o->lo[o->nseg] = info->dlpi_addr + ph->p_vaddr;
      o->hi[o->nseg] = info->dlpi_addr + ph->p_vaddr + ph->p_memsz;
      o->nseg++;
    }
  }
  if (!o->nseg) { free(o); return 0; }
  for (i = 0; i < o->nseg; i++) {
    if (vm >= o->lo[i] && vm < o->hi[i]) o->kind = LJP_SPAN_VM;
    else if (self >= o->lo[i] && self < o->hi[i]) o->kind = LJP_SPAN_SELF;
  }
  if (hdr && ljp_cfi_init(&o->eh, hdr) == 0)
    memcpy(o->print, (const void *)hdr, sizeof(o->print));
  if (!(o->name = strdup(info->dlpi_name ? info->dlpi_name : ""))) {
    free(o);
    sc->oom = 1;
    return 1;
  }
  if (o->name[0]) {
    const char *slash = strrchr(o->name, '/');
    o->short_name = slash ? slash + 1 : o->name;
  } else {
    o->short_name = o->kind == LJP_SPAN_VM ? "luajit" : "main";
  }
  sc->o[sc->n++] = o;
  return 0;
}

static int same_obj(const ljp_object *a, const ljp_object *b)
{
  return a->base == b->base && a->eh.hdr == b->eh.hdr && a->nseg == b->nseg &&
         a->lo[0] == b->lo[0] && a->hi[0] == b->hi[0] &&
         !strcmp(a->name, b->name) &&
         !memcmp(a->print, b->print, sizeof(a->print));
}

static int span_cmp(const void *a, const void *b)
{
  const ljp_span *x = a, *y = b;
  return x->lo < y->lo ? -1 : x->lo > y->lo;
}

static ljp_objsnap *snap_build(ljp_object **objs, uint32_t nobj,
                               uint64_t print, unsigned long long gen,
                               const ljp_lmnode *lm, uint32_t nlm)
{
  uint32_t i, n = 0;
  ljp_objsnap *s;
  for (i = 0; i < nobj; i++) n += (uint32_t)objs[i]->nseg;
  s = malloc(sizeof(*s) + (n + 2) * sizeof(ljp_span) +
             (nobj ? nobj : 1) * sizeof(ljp_object *) +
             (nlm ? nlm : 1) * sizeof(ljp_lmnode));
  if (!s) return NULL;
  s->print = print;
  s->nlm = nlm;
  s->lm = (ljp_lmnode *)(void *)((ljp_object **)(void *)&s->span[n + 2] +
                                 (nobj ? nobj : 1));
  if (nlm) memcpy(s->lm, lm, nlm * sizeof(ljp_lmnode));
  s->dlgen = gen;
  s->nobj = nobj;
  s->obj = (ljp_object **)(void *)&s->span[n + 2];
  memcpy(s->obj, objs, nobj * sizeof(ljp_object *));
  s->nspan = 0;
  for (i = 0; i < nobj; i++) {
    const ljp_object *ob = objs[i];
    int k;
    for (k = 0; k < ob->nseg; k++) {
      ljp_span *e = &s->span[s->nspan];
      e->lo = ob->lo[k];
      e->hi = ob->hi[k];
      e->kind = (uint16_t)ob->kind;
      e->unwind = ob->eh.hdr != 0;
      e->obj = i;
      if (ob->kind == LJP_SPAN_VM && reg_interp_lo < reg_interp_hi &&
          reg_interp_lo >= e->lo && reg_interp_hi <= e->hi) {
        /* The interpreter: its own span, splitting its object's. */
        ljp_span rest = *e;
        e->hi = reg_interp_lo;
        s->span[s->nspan + 1] = *e;
        s->span[s->nspan + 1].lo = reg_interp_lo;
        s->span[s->nspan + 1].hi = reg_interp_hi;
        s->span[s->nspan + 1].kind = LJP_SPAN_INTERP;
        rest.lo = reg_interp_hi;
        s->span[s->nspan + 2] = rest;
        s->nspan += 3;
      } else {
        s->nspan++;
      }
    }
  }
  qsort(s->span, s->nspan, sizeof(ljp_span), span_cmp);
  /* Drop empty pieces left by the split. */
  for (i = 0, n = 0; i < s->nspan; i++)
    if (s->span[i].lo < s->span[i].hi) s->span[n++] = s->span[i];
  s->nspan = n;
  return s;
}

/* Rebuild from the loaded objects. Normal context, reg_mu held. */
static void refresh_locked(int force)
{
  scan sc;
  ljp_objsnap *old = atomic_load(&reg_cur), *s;
  ljp_object **keep;
  unsigned char *used;
  uint32_t i, j;
  unsigned long long gen;
  /* Taken first: a change during the scan leaves a stale print and
  ** generation, which only make handlers skip until the next refresh. */
  uint64_t print = ljp_objects_print();
  ljp_lmnode *lm;
  uint32_t nlm;
  gen = ljp_dl_generation();
  if (old && !force && old->dlgen == gen) return;
  if (!(lm = malloc(LJP_LM_MAX * sizeof(*lm)))) return;
  nlm = lm_walk(lm, LJP_LM_MAX);
  memset(&sc, 0, sizeof(sc));
  dl_iterate_phdr(scan_cb, &sc);
  used = old ? calloc(old->nobj + 1, 1) : NULL;
  keep = sc.n ? malloc(sc.n * sizeof(*keep)) : NULL;
  if (sc.oom || (old && !used) || (sc.n && !keep)) {
    for (i = 0; i < sc.n; i++) obj_free(sc.o[i]);
    free(sc.o);
    free(used);
    free(keep);
    free(lm);
    return;
  }
  for (j = 0; j < sc.n; j++) {
    keep[j] = sc.o[j];
    if (!old) continue;
    for (i = 0; i < old->nobj; i++)
      if (!used[i] && same_obj(old->obj[i], sc.o[j])) {
        used[i] = 1;
        keep[j] = old->obj[i];
        obj_free(sc.o[j]);
        break;
      }
  }
  s = snap_build(keep, sc.n, print, gen, lm, nlm);
  if (!s) {  /* keep the old snapshot; drop what is new */
    for (j = 0; j < sc.n; j++) {
      int fresh = 1;
      if (old)
        for (i = 0; i < old->nobj; i++)
          if (old->obj[i] == keep[j]) fresh = 0;
      if (fresh) obj_free(keep[j]);  /* never published */
    }
  } else {
    atomic_store(&reg_cur, s);
    atomic_store(&reg_gen, gen);
    if (old) {
      for (i = 0; i < old->nobj; i++)
        if (!used[i])  /* unloaded: leaves the registry */
          ljp_epoch_retire(old->obj[i], obj_free);
      ljp_epoch_retire(old, NULL);
    }
  }
  free(sc.o);
  free(used);
  free(keep);
  free(lm);
  ljp_epoch_collect();
}

void ljp_objects_refresh(void)
{
  if (atomic_load(&reg_gen) == ljp_dl_generation()) return;
  pthread_mutex_lock(&reg_mu);
  refresh_locked(0);
  pthread_mutex_unlock(&reg_mu);
}

int ljp_objects_have_vm(void)
{
  const ljp_objsnap *s;
  uint32_t i;
  int vm = 0;
  pthread_mutex_lock(&reg_mu);
  refresh_locked(0);
  s = atomic_load(&reg_cur);
  for (i = 0; s && i < s->nobj; i++)
    if (s->obj[i]->kind == LJP_SPAN_VM) vm = 1;
  pthread_mutex_unlock(&reg_mu);
  return vm;
}

int ljp_objects_set_interp(uintptr_t lo, uintptr_t hi)
{
  const ljp_span *a, *b;
  int rc = -1;
  pthread_mutex_lock(&reg_mu);
  refresh_locked(0);
  a = ljp_objects_find(atomic_load(&reg_cur), lo);
  b = ljp_objects_find(atomic_load(&reg_cur), hi - 1);
  if (lo < hi && a && a == b &&
      (a->kind == LJP_SPAN_VM || a->kind == LJP_SPAN_INTERP)) {
    reg_interp_lo = lo;
    reg_interp_hi = hi;
    refresh_locked(1);
    rc = 0;
  }
  pthread_mutex_unlock(&reg_mu);
  return rc;
}

int ljp_objects_proc(uintptr_t pc, uintptr_t *lo, uintptr_t *hi)
{
  const ljp_objsnap *s;
  const ljp_span *e;
  int rc = 0, t = ljp_epoch_enter();  /* the snapshot stays */
  if (t < 0) return 0;
  s = ljp_objects_snap();
  e = ljp_objects_find(s, pc);
  /* Only while the loader's list is the one the snapshot was built from
  ** (the object's table is still mapped), except in LuaJIT's own object,
  ** which stays mapped while Lua runs (another thread's dlopen must not
  ** make the interpreter probe fail). */
  if (e && e->unwind &&
      (e->kind == LJP_SPAN_VM || e->kind == LJP_SPAN_INTERP ||
       ljp_objects_print() == s->print))
    rc = ljp_cfi_proc(ljp_objects_ehtab(s, e), pc, lo, hi);
  ljp_epoch_leave(t);
  return rc;
}

/* -- Symbols (normal context, reg_mu held) --------------------------------- */

static int sym_cmp(const void *a, const void *b)
{
  const sym *x = a, *y = b;
  if (x->lo != y->lo) return x->lo < y->lo ? -1 : 1;
  return x->hi > y->hi ? -1 : x->hi < y->hi;  /* the longest first */
}

static int func_sym(const ElfW(Sym) *sy, const ElfW(Shdr) *ss)
{
  int t = ELF64_ST_TYPE(sy->st_info);
  return (t == STT_FUNC || t == STT_GNU_IFUNC) && sy->st_shndx != SHN_UNDEF &&
         sy->st_value && sy->st_name < ss->sh_size;
}

/* Read the function symbols of an ELF image of size bytes at map. */
static void parse_symbols(ljp_object *ob, const void *map, uint64_t size)
{
  const ElfW(Ehdr) *eh = map;
  const ElfW(Shdr) *sh, *tab = NULL;
  size_t bytes = 0, i, nsym, n = 0, used = 0;
  int pass;
  if (size < sizeof(ElfW(Ehdr)) || memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 ||
      eh->e_ident[EI_CLASS] != (sizeof(void *) == 8 ? ELFCLASS64 : ELFCLASS32) ||
      eh->e_shentsize != sizeof(ElfW(Shdr)) ||
      eh->e_shoff + (uint64_t)eh->e_shnum * sizeof(ElfW(Shdr)) > size)
    return;
  sh = (const ElfW(Shdr) *)((const char *)map + eh->e_shoff);
  for (pass = 0; pass < 2 && !tab; pass++)
    for (i = 0; i < eh->e_shnum; i++)
      if (sh[i].sh_type == (pass ? SHT_DYNSYM : SHT_SYMTAB) &&
          sh[i].sh_link < eh->e_shnum && sh[i].sh_entsize == sizeof(ElfW(Sym)) &&
          sh[i].sh_offset + sh[i].sh_size <= size &&
          sh[sh[i].sh_link].sh_offset + sh[sh[i].sh_link].sh_size <= size) {
        tab = &sh[i];
        break;
      }
  if (!tab) return;
  {
    const ElfW(Sym) *sy = (const ElfW(Sym) *)((const char *)map + tab->sh_offset);
    const ElfW(Shdr) *ss = &sh[tab->sh_link];
    const char *str = (const char *)map + ss->sh_offset;
    nsym = tab->sh_size / sizeof(ElfW(Sym));
    for (i = 0; i < nsym; i++)
      if (func_sym(&sy[i], ss)) {
        n++;
        bytes += strnlen(str + sy[i].st_name, ss->sh_size - sy[i].st_name) + 1;
      }
    if (!n || !(ob->s = malloc(n * sizeof(sym))) || !(ob->names = malloc(bytes))) {
      free(ob->s);
      ob->s = NULL;
      return;
    }
    for (i = 0; i < nsym; i++)
      if (func_sym(&sy[i], ss)) {
        const char *nm = str + sy[i].st_name;
        size_t len = strnlen(nm, ss->sh_size - sy[i].st_name);
        sym *e = &ob->s[ob->ns++];
        e->lo = ob->base + sy[i].st_value;
        e->hi = e->lo + (sy[i].st_size ? sy[i].st_size : 1);
        e->name = (uint32_t)used;
        e->ifunc = ELF64_ST_TYPE(sy[i].st_info) == STT_GNU_IFUNC;
        memcpy(ob->names + used, nm, len);
        ob->names[used + len] = '\0';
        used += len + 1;
      }
    qsort(ob->s, ob->ns, sizeof(sym), sym_cmp);
  }
}

/* -- IFUNC implementations --------------------------------------------------
** An STT_GNU_IFUNC symbol ("sin", "memcpy") names the resolver that picks
** an implementation at load time (__sin_fma, __memmove_avx_unaligned_erms);
** in a stripped library the implementation has no symbol of its own, and
** its samples would show as "libm.so.6+0x702c0". dlsym on the object's
** own handle (dlopen RTLD_NOLOAD: never loads anything) returns exactly
** the implementation the program calls, so each one gets a symbol named
** by its public name. Its end is that of its unwind entry (FDE) when the
** object has an unwind table, else the next symbol's start (at
** most 64 KB on). Several public names of one implementation (memcpy and
** memmove): the shortest name, then the first alphabetically ("memcpy").
** An implementation that already has a symbol keeps it. Normal context
** only (dlopen, dlsym and the resolvers take the loader's lock), reg_mu
** held. */

static const sym *find_sym(const ljp_object *ob, uintptr_t a);

typedef struct impl {
  uintptr_t a;
  uint32_t name;
  uint32_t len;
} impl;

static int impl_cmp(const void *x, const void *y)
{
  const impl *a = x, *b = y;
  if (a->a != b->a) return a->a < b->a ? -1 : 1;
  if (a->len != b->len) return a->len < b->len ? -1 : 1;
  return 0;  /* names compared by the caller's second pass */
}

static int in_object(const ljp_object *ob, uintptr_t a)
{
  int i;
  for (i = 0; i < ob->nseg; i++)
    if (a >= ob->lo[i] && a < ob->hi[i]) return 1;
  return 0;
}

static void add_ifunc_impls(ljp_object *ob)
{
  uint32_t i, n = 0, k, nadd = 0, ns = ob->ns;
  impl *im;
  sym *grown;
  void *h;
  for (i = 0; i < ns; i++) n += ob->s[i].ifunc;
  if (!n) return;
  if (!(h = dlopen(ob->name[0] ? ob->name : NULL, RTLD_NOLOAD | RTLD_LAZY))) return;
  if (!(im = malloc(n * sizeof(impl)))) {
    dlclose(h);
    return;
  }
  for (i = 0, n = 0; i < ns; i++) {
    const char *nm = ob->names + ob->s[i].name;
    uintptr_t a;
    const sym *have;
    if (!ob->s[i].ifunc) continue;
    a = (uintptr_t)dlsym(h, nm);
    if (!a || a == ob->s[i].lo || !in_object(ob, a)) continue;
    have = find_sym(ob, a);
    if (have && !have->ifunc) continue;  /* named already */
    im[n].a = a;
    im[n].name = ob->s[i].name;
    im[n].len = (uint32_t)strlen(nm);
    n++;
  }
  dlclose(h);
  qsort(im, n, sizeof(impl), impl_cmp);
  /* One per address: the shortest name, then the first alphabetically. */
  for (i = 0; i < n; i = k) {
    uint32_t best = i;
    for (k = i + 1; k < n && im[k].a == im[i].a; k++)
      if (im[k].len == im[best].len &&
          strcmp(ob->names + im[k].name, ob->names + im[best].name) < 0)
        best = k;
    im[nadd++] = im[best];
  }
  if (nadd && (grown = realloc(ob->s, (ns + nadd) * sizeof(sym)))) {
    ob->s = grown;
    for (i = 0; i < nadd; i++) {
      uintptr_t a = im[i].a, lo, hi, next = a + 65536;
      uint32_t j;
      sym *e = &ob->s[ob->ns++];
      if (i + 1 < nadd && im[i + 1].a < next) next = im[i + 1].a;
      for (j = 0; j < ns; j++)  /* the next symbol of the object */
        if (ob->s[j].lo > a && ob->s[j].lo < next) next = ob->s[j].lo;
      if (ljp_objects_proc(a, &lo, &hi) && lo <= a && a < hi) next = hi;
      e->lo = a;
      e->hi = next;
      e->name = im[i].name;
      e->ifunc = 0;
    }
    qsort(ob->s, ob->ns, sizeof(sym), sym_cmp);
  }
  free(im);
}

/* Read the function symbols of ob, from its file (by the copied path), or
** from memory for the kernel's vDSO (it has no file). */
static void load_symbols(ljp_object *ob)
{
  const char *path = ob->name[0] ? ob->name : "/proc/self/exe";
  struct stat st;
  void *map;
  int fd;
  ob->syms_loaded = 1;
  if (!strncmp(ob->name, "linux-vdso", 10) || !strncmp(ob->name, "linux-gate", 10)) {
    const ElfW(Ehdr) *eh = (const ElfW(Ehdr) *)getauxval(AT_SYSINFO_EHDR);
    if (eh && (uintptr_t)eh >= ob->base && (uintptr_t)eh < ob->hi[ob->nseg - 1] &&
        !memcmp(eh->e_ident, ELFMAG, SELFMAG) &&
        eh->e_shoff + (uint64_t)eh->e_shnum * sizeof(ElfW(Shdr)) <= 65536)
      parse_symbols(ob, eh, eh->e_shoff + (uint64_t)eh->e_shnum * sizeof(ElfW(Shdr)));
    return;
  }
  if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0) return;
  if (fstat(fd, &st) != 0 || st.st_size < (off_t)sizeof(ElfW(Ehdr))) {
    close(fd);
    return;
  }
  map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);
  if (map == MAP_FAILED) return;
  parse_symbols(ob, map, (uint64_t)st.st_size);
  munmap(map, (size_t)st.st_size);
  add_ifunc_impls(ob);
}

static const sym *find_sym(const ljp_object *ob, uintptr_t a)
{
  uint32_t lo = 0, hi = ob->ns, k;
  while (lo < hi) {  /* lo: the first symbol starting after a */
    uint32_t mid = (lo + hi) / 2;
    if (ob->s[mid].lo <= a) lo = mid + 1;
    else hi = mid;
  }
  /* The nearest start may be a nested or zero-size symbol: look at a few
  ** before it for one that covers a. */
  for (k = 0; k < 16 && lo > k; k++) {
    const sym *s = &ob->s[lo - 1 - k];
    if (a < s->hi) return s;
  }
  return NULL;
}

int ljp_objects_lookup(uintptr_t a, ljp_objinfo *out)
{
  const ljp_span *e;
  ljp_object *ob;
  const sym *s;
  pthread_mutex_lock(&reg_mu);
  e = ljp_objects_find(atomic_load(&reg_cur), a);
  if (!e) {  /* an object loaded since the last refresh? */
    refresh_locked(0);
    e = ljp_objects_find(atomic_load(&reg_cur), a);
  }
  if (!e) {
    pthread_mutex_unlock(&reg_mu);
    return 0;
  }
  /* The snapshot cannot change while reg_mu is held: ob stays. */
  ob = atomic_load(&reg_cur)->obj[e->obj];
  if (!ob->syms_loaded) load_symbols(ob);
  out->kind = ob->kind;
  out->base = ob->base;
  snprintf(out->short_name, sizeof(out->short_name), "%s", ob->short_name);
  s = ob->s ? find_sym(ob, a) : NULL;
  out->sym_lo = s ? s->lo : 0;
  out->sym_hi = s ? s->hi : 0;
  snprintf(out->sym, sizeof(out->sym), "%s", s ? ob->names + s->name : "");
  pthread_mutex_unlock(&reg_mu);
  return 1;
}
