/*
** The object registry: every loaded object (executable, libraries, vDSO)
** in one immutable snapshot (freed through ljprof's one reclamation
** scheme, epoch.c).
**
** Rules. Only this file calls dl_iterate_phdr, and only this file decides
** which object is LuaJIT's (the one holding its API functions' code). Inside
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
** object carries its copied name, build ID, load bias, segments, its .eh_frame_hdr
** search table with every mapped segment (ljp_ehtab: what the signal
** handler's own unwinder, cfi.c, may read) and, loaded on first use by
** the ELF symbol reader (elfsyms.c, called with reg_mu held), its
** function symbols. Objects still loaded are shared by consecutive
** snapshots; an object that is gone is retired.
**
** Reclamation: the epoch of epoch.c (objects.h).
*/
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <elf.h>
#include <link.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "os.h"
#include "cfi.h"
#include "objects.h"
#include "elfsyms.h"

/* LuaJIT's object is found by the address of one of its API functions,
** lua_atpanic (ljprof never calls it), looked up at run time at each
** rebuild (vm_addr): not a link-time reference, which the loader resolves
** when ljprof is loaded, and which stays 0 when LuaJIT comes later (a
** host that dlopens it after start, as nginx's load_module does, with
** libljprof.so preloaded). */

/* -- Objects ------------------------------------------------------------------ */

#define OBJ_SEGS 8

struct ljp_object {
  char *name;               /* copy of dlpi_name ("": the main program) */
  const char *short_name;   /* file name, for "object+0x..." */
  unsigned char build_id[LJP_BUILD_ID_MAX];  /* NT_GNU_BUILD_ID, from memory */
  int build_id_len;
  uintptr_t build_id_at;    /* where it lies (in the mapping's first page) */
  uintptr_t map_start;      /* the loader's start of the mapping (0: not
                            ** known; _dl_find_object's dlfo_map_start) */
  uintptr_t base;           /* load bias */
  ljp_ehtab eh;             /* unwind table and mapped segments (cfi.h) */
  unsigned char print[12];  /* the header's first bytes at the scan */
  int kind;                 /* LJP_SPAN_VM, LJP_SPAN_SELF, LJP_SPAN_OTHER */
  int nseg;
  uintptr_t lo[OBJ_SEGS], hi[OBJ_SEGS];  /* executable segments */
  int syms_loaded;
  ljp_symtab syms;          /* its function symbols (elfsyms.c) */
};

static pthread_mutex_t reg_mu = PTHREAD_MUTEX_INITIALIZER;
static _Atomic(ljp_objsnap *) reg_cur;
static uintptr_t reg_interp_lo, reg_interp_hi;

int ljp_objects_interp_known(void)
{
  return __atomic_load_n(&reg_interp_lo, __ATOMIC_RELAXED) <
         __atomic_load_n(&reg_interp_hi, __ATOMIC_RELAXED);
}
static _Atomic unsigned long long reg_gen = ~0ull; /* the snapshot's dlgen */

const ljp_objsnap *ljp_objects_snap(void)
{
  return atomic_load(&reg_cur);
}

const ljp_span *ljp_objects_find(const ljp_objsnap *s, uintptr_t pc)
{
  return s ? ljp_span_find(s->span, s->nspan, sizeof(ljp_span), pc) : NULL;
}

/* ljprof's own executable segments, copied when its object is scanned
** (they stay mapped while its code runs): ljp_objects_is_self, asked per
** record at the safe point, compares with them, with no epoch section
** and no search of the snapshot (about 85 instructions a call). */
static uintptr_t self_lo[OBJ_SEGS], self_hi[OBJ_SEGS];
static _Atomic int self_nseg;

int ljp_objects_is_self(uintptr_t pc)
{
  const ljp_span *e;
  int self, t, i, n = atomic_load_explicit(&self_nseg, memory_order_acquire);
  if (n > 0) {
    for (i = 0; i < n; i++)
      if (pc >= self_lo[i] && pc < self_hi[i]) return 1;
    return 0;
  }
  if ((t = ljp_epoch_enter()) < 0) return 0;
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
    if (l < 4096 || ljp_peekv(&li, &ri, 1) !=
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
        ljp_peekv(&li, &ri, 1) != (ssize_t)sizeof(w))
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
    if (ljp_peekv(li, ri, (int)m) !=
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
  free(ob->syms.s);
  free(ob->syms.names);
  free(ob->name);
  free(ob);
}

typedef struct scan {
  ljp_object **o;
  uint32_t n, cap;
  int oom;
  uintptr_t vm;             /* vm_addr(): LuaJIT's code, 0 unknown */
} scan;

/* The main program's file, read once (normal context, reg_mu held): its
** path (for its debug link) and its name ("luajit", "nginx"): the loader
** calls it "", and "main+0x12c0" would read like the function main. */
static char exe_path[4096];
static char exe_short[128];

static void exe_init(void)
{
  ssize_t n;
  const char *slash;
  if (exe_short[0]) return;
  n = readlink("/proc/self/exe", exe_path, sizeof(exe_path) - 1);
  exe_path[n > 0 ? n : 0] = '\0';
  if (n > 10 && !strcmp(exe_path + n - 10, " (deleted)")) exe_path[n - 10] = '\0';
  slash = strrchr(exe_path, '/');
  snprintf(exe_short, sizeof(exe_short), "%s",
           slash && slash[1] ? slash + 1 :
           program_invocation_short_name[0] ? program_invocation_short_name : "exe");
}

/* The address of LuaJIT's code, 0 when it is not found. The lua_atpanic
** that dlsym finds in the process's global scope (RTLD_DEFAULT) is the
** one ljprof's own calls into LuaJIT are bound to (ljprof names no
** library: its lua_* calls are resolved in that scope too), hence the
** LuaJIT of every state ljprof can work on. Validated: an exported
** function's start (dladdr names it) in an object that is not ljprof.
** That object is then pinned (dlopen RTLD_NOLOAD, never closed): ljprof's
** bindings point into it, so a host's dlclose must not unmap it. Not
** found: a process without LuaJIT, or one that loaded it RTLD_LOCAL
** (ljprof cannot call it there). Normal context, reg_mu held, outside
** dl_iterate_phdr. */
static uintptr_t vm_addr(void)
{
  static void *pinned;
  void *p = dlsym(RTLD_DEFAULT, "lua_atpanic");
  Dl_info di, self;
  struct link_map *lm = NULL;
  if (!p || !dladdr1(p, &di, (void **)&lm, RTLD_DL_LINKMAP) ||
      di.dli_saddr != p || !di.dli_sname || strcmp(di.dli_sname, "lua_atpanic") ||
      !dladdr((void *)vm_addr, &self) || di.dli_fbase == self.dli_fbase)
    return 0;
  if (!pinned && lm && lm->l_name && lm->l_name[0])
    pinned = dlopen(lm->l_name, RTLD_LAZY | RTLD_NOLOAD);
  return (uintptr_t)p;
}

/* The loader's start of the mapping holding pc, 0 when not known. */
static uintptr_t loader_map_start(uintptr_t pc)
{
  uintptr_t start, eh;
  return ljp_os_find_object(pc, &start, &eh) == 0 ? start : 0;
}

int ljp_objects_current(const ljp_objsnap *s, const ljp_span *e, uintptr_t pc)
{
#if LJP_OS_FIND_OBJECT
  uintptr_t start, eh;
  const ljp_object *o;
  const volatile unsigned char *m;
  uintptr_t page;
  int i;
  if (e->kind != LJP_SPAN_OTHER || !e->unwind) return 1;
  if (!ljp_os_find_object_ready() || e->obj >= s->nobj) return -1;
  o = s->obj[e->obj];
  /* Without a build ID a rebuilt copy loaded at the same place could not
  ** be told from the object scanned: the whole list then. */
  if (!o->build_id_len || !o->map_start) return -1;
  if (ljp_os_find_object(pc, &start, &eh) != 0) return -1;
  /* The same place: the mapping's start and the unwind table's. */
  if (start != o->map_start || eh != o->eh.hdr)
    return 0;
  /* The same build: the build ID where it was, in the mapping's first
  ** page (mapped for as long as an object is loaded there: it holds the
  ** ELF and program headers). */
  page = o->map_start & ~(uintptr_t)4095;
  if (o->build_id_at < page ||
      o->build_id_at + (uintptr_t)o->build_id_len > page + 4096)
    return -1;
  m = (const volatile unsigned char *)o->build_id_at;
  for (i = 0; i < o->build_id_len; i++)
    if (m[i] != o->build_id[i]) return 0;
  /* and the table as scanned (encodings, .eh_frame pointer, entries) */
  m = (const volatile unsigned char *)o->eh.hdr;
  for (i = 0; i < (int)sizeof(o->print); i++)
    if (m[i] != o->print[i]) return 0;
  return 1;
#else
  (void)s;
  (void)pc;
  return e->kind != LJP_SPAN_OTHER || !e->unwind ? 1 : -1;
#endif
}

/* Called with the loader's lock held: copy everything needed now. */
static int scan_cb(struct dl_phdr_info *info, size_t size, void *data)
{
  scan *sc = data;
  ljp_object *o;
  uintptr_t vm = sc->vm;
  uintptr_t self = (uintptr_t)(void *)ljp_objects_refresh;
  uintptr_t hdr = 0;
  const ElfW(Phdr) *note[4];
  int i, nnote = 0;
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
    if (ph->p_type == PT_NOTE && nnote < 4) note[nnote++] = ph;
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
    if (vm && vm >= o->lo[i] && vm < o->hi[i]) o->kind = LJP_SPAN_VM;
    else if (self >= o->lo[i] && self < o->hi[i]) o->kind = LJP_SPAN_SELF;
  }
  if (o->kind == LJP_SPAN_SELF &&
      !atomic_load_explicit(&self_nseg, memory_order_relaxed)) {
    for (i = 0; i < o->nseg; i++) {  /* (the same each scan) */
      self_lo[i] = o->lo[i];
      self_hi[i] = o->hi[i];
    }
    atomic_store_explicit(&self_nseg, o->nseg, memory_order_release);
  }
  if (hdr && ljp_cfi_init(&o->eh, hdr) == 0)
    memcpy(o->print, (const void *)hdr, sizeof(o->print));
  for (i = 0; i < nnote && !o->build_id_len; i++) {
    /* read only when it lies in a mapped segment */
    uintptr_t a = info->dlpi_addr + note[i]->p_vaddr;
    uint32_t k;
    for (k = 0; k < o->eh.nseg; k++)
      if (a >= o->eh.lo[k] && a < o->eh.hi[k] &&
          note[i]->p_memsz <= o->eh.hi[k] - a) {
        uint64_t at = 0;
        o->build_id_len = ljp_elf_build_id((const unsigned char *)a,
                                        note[i]->p_memsz, o->build_id, &at);
        o->build_id_at = a + at;
        break;
      }
  }
  o->map_start = loader_map_start(o->lo[0]);
  if (!(o->name = strdup(info->dlpi_name ? info->dlpi_name : ""))) {
    free(o);
    sc->oom = 1;
    return 1;
  }
  if (o->name[0]) {
    const char *slash = strrchr(o->name, '/');
    o->short_name = slash ? slash + 1 : o->name;
  } else {
    o->short_name = exe_short;  /* the main program: its file's name */
  }
  sc->o[sc->n++] = o;
  return 0;
}

static int same_obj(const ljp_object *a, const ljp_object *b)
{
  return a->base == b->base && a->eh.hdr == b->eh.hdr && a->nseg == b->nseg &&
         a->kind == b->kind &&  /* LuaJIT found since: a new object */
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
  ljp_os_find_object_init();  /* the loader's lookup, at the first refresh */
  if (!(lm = malloc(LJP_LM_MAX * sizeof(*lm)))) return;
  nlm = lm_walk(lm, LJP_LM_MAX);
  exe_init();
  memset(&sc, 0, sizeof(sc));
  sc.vm = vm_addr();
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

/* The library is being unloaded and no run ever started (api.c's
** destructor: no handler is installed, so no reader is inside): the
** snapshot, its objects and everything retired are freed, so that a
** state that loads the module, builds the registry (ljprof.watch(), a
** zone) and closes leaks nothing. Normal context. */
void ljp_objects_release(void)
{
  ljp_objsnap *s;
  uint32_t i;
  pthread_mutex_lock(&reg_mu);
  s = atomic_exchange(&reg_cur, NULL);
  atomic_store(&reg_gen, ~0ull);
  if (s) {
    for (i = 0; i < s->nobj; i++) obj_free(s->obj[i]);
    free(s);
  }
  pthread_mutex_unlock(&reg_mu);
  ljp_epoch_release();
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
  /* Only while the object is the one the snapshot copied (its table is
  ** still mapped: the loader's lookup, else its whole list as when the
  ** snapshot was built). LuaJIT's own object stays mapped while Lua runs
  ** (another thread's dlopen must not make the interpreter probe fail). */
  if (e && e->unwind) {
    int c = ljp_objects_current(s, e, pc);
    if (c < 0) c = ljp_objects_print() == s->print;
    if (c) rc = ljp_cfi_proc(ljp_objects_ehtab(s, e), pc, lo, hi);
  }
  ljp_epoch_leave(t);
  return rc;
}

/* -- Symbols (normal context, reg_mu held) --------------------------------- */

/* Read the function symbols of ob, once (elfsyms.c). */
static void load_symbols(ljp_object *ob)
{
  ljp_elfobj eo;
  eo.name = ob->name;
  eo.exe_path = exe_path;
  eo.base = ob->base;
  eo.nseg = ob->nseg;
  eo.lo = ob->lo;
  eo.hi = ob->hi;
  eo.build_id = ob->build_id;
  eo.build_id_len = ob->build_id_len;
  eo.proc = ljp_objects_proc;
  ob->syms_loaded = 1;
  ljp_elfsyms_load(&ob->syms, &eo);
}

int ljp_objects_lookup(uintptr_t a, ljp_objinfo *out)
{
  const ljp_span *e;
  ljp_object *ob;
  const ljp_sym *s;
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
  {  /* (as snprintf "%s" would, without its ~600 instructions) */
    size_t n = strnlen(ob->short_name, sizeof(out->short_name) - 1);
    memcpy(out->short_name, ob->short_name, n);
    out->short_name[n] = '\0';
  }
  s = ob->syms.s ? ljp_elfsyms_find(&ob->syms, a) : NULL;
  out->sym_lo = s ? s->lo : 0;
  out->sym_hi = s ? s->hi : 0;
  ljp_elfsyms_name(s ? ob->syms.names + s->name : "", out->sym,
                   sizeof(out->sym));
  pthread_mutex_unlock(&reg_mu);
  return 1;
}

int ljp_objects_is_sigreturn(uintptr_t pc)
{
#if defined(__x86_64__)
  /* mov $15,%rax (rt_sigreturn); syscall */
  static const unsigned char code[9] = {0x48, 0xc7, 0xc0, 0x0f, 0x00, 0x00,
                                        0x00, 0x0f, 0x05};
  unsigned char b[sizeof(code)];
  struct iovec li = {b, sizeof(b)}, ri = {(void *)pc, sizeof(b)};
  if (!pc || ljp_peekv(&li, &ri, 1) !=
                 (ssize_t)sizeof(b))
    return 0;
  return !memcmp(b, code, sizeof(code));
#else
  (void)pc;
  return 0;
#endif
}
