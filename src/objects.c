/*
** The object registry: every loaded object (executable, libraries, vDSO)
** in one immutable snapshot, and the one reclamation scheme of ljprof.
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
** handler's own unwinder, cfi.c, may read) and, loaded on first use,
** its function symbols (.symtab, else the .symtab of its separate debug
** file, else .dynsym; the vDSO from memory; see load_symbols), plus the
** IFUNC implementations the program calls that no symbol names, named by
** their public names ("sin", "memcpy"; see add_ifunc_impls), and its PLT
** stubs ("realloc@plt"; see add_plt_syms). A looked-up name is without
** its symbol version ("clock_nanosleep", not "...@@GLIBC_2.17").
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
#include <errno.h>
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

/* LuaJIT's object is found by the address of one of its API functions,
** lua_atpanic (ljprof never calls it), looked up at run time at each
** rebuild (vm_addr): not a link-time reference, which the loader resolves
** when ljprof is loaded, and which stays 0 when LuaJIT comes later (a
** host that dlopens it after start, as nginx's load_module does, with
** libljprof.so preloaded). */

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
  uint8_t ifunc;      /* an STT_GNU_IFUNC symbol (lo: its resolver) */
  uint8_t bind;       /* STB_* (which alias is shown: pick_aliases) */
  uint8_t sized;      /* st_size was not 0 */
} sym;

#define BUILD_ID_MAX 64

#define OBJ_SEGS 8

struct ljp_object {
  char *name;               /* copy of dlpi_name ("": the main program) */
  const char *short_name;   /* file name, for "object+0x..." */
  unsigned char build_id[BUILD_ID_MAX];  /* NT_GNU_BUILD_ID, from memory */
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
  sym *s;
  uint32_t ns;
  char *names;
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

/* The build ID (NT_GNU_BUILD_ID) in the notes [p, p + n) of an object,
** in memory or in a file: its length, 0 when there is none. */
static int note_build_id(const unsigned char *p, uint64_t n, unsigned char *id,
                         uint64_t *at)
{
  uint64_t off = 0;
  while (off + sizeof(ElfW(Nhdr)) <= n) {
    const ElfW(Nhdr) *nh = (const ElfW(Nhdr) *)(const void *)(p + off);
    uint64_t name = off + sizeof(*nh), desc = name + ((nh->n_namesz + 3ull) & ~3ull);
    uint64_t end = desc + ((nh->n_descsz + 3ull) & ~3ull);
    if (end > n || desc + nh->n_descsz > n) break;
    if (nh->n_type == NT_GNU_BUILD_ID && nh->n_namesz == 4 &&
        !memcmp(p + name, "GNU", 4) && nh->n_descsz > 0 &&
        nh->n_descsz <= BUILD_ID_MAX) {
      memcpy(id, p + desc, nh->n_descsz);
      if (at) *at = desc;
      return (int)nh->n_descsz;
    }
    off = end;
  }
  return 0;
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

/* glibc's _dl_find_object (2.35 and later; looked up at the first
** refresh, NULL before or without it): the object the loader has at an
** address, lock-free and async-signal-safe by design (two copies of its
** table, switched by a version counter), for unwinders. */
#ifdef DLFO_EH_SEGMENT_TYPE
typedef int (*dlfo_fn)(void *, struct dl_find_object *);
static _Atomic(dlfo_fn) dlfo;
#endif

/* The loader's start of the mapping holding pc, 0 when not known. */
static uintptr_t loader_map_start(uintptr_t pc)
{
#ifdef DLFO_EH_SEGMENT_TYPE
  dlfo_fn find = atomic_load(&dlfo);
  struct dl_find_object f;
  if (find && find((void *)pc, &f) == 0) return (uintptr_t)f.dlfo_map_start;
#endif
  (void)pc;
  return 0;
}

int ljp_objects_current(const ljp_objsnap *s, const ljp_span *e, uintptr_t pc)
{
#ifdef DLFO_EH_SEGMENT_TYPE
  dlfo_fn find = atomic_load_explicit(&dlfo, memory_order_relaxed);
  struct dl_find_object f;
  const ljp_object *o;
  const volatile unsigned char *m;
  uintptr_t page;
  int i;
  if (e->kind != LJP_SPAN_OTHER || !e->unwind) return 1;
  if (!find || e->obj >= s->nobj) return -1;
  o = s->obj[e->obj];
  /* Without a build ID a rebuilt copy loaded at the same place could not
  ** be told from the object scanned: the whole list then. */
  if (!o->build_id_len || !o->map_start) return -1;
  if (find((void *)pc, &f) != 0) return -1;
  /* The same place: the mapping's start and the unwind table's. */
  if ((uintptr_t)f.dlfo_map_start != o->map_start ||
      (uintptr_t)f.dlfo_eh_frame != o->eh.hdr)
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
        o->build_id_len = note_build_id((const unsigned char *)a,
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
#ifdef DLFO_EH_SEGMENT_TYPE
  if (!atomic_load(&dlfo))
    atomic_store(&dlfo, (dlfo_fn)dlsym(RTLD_DEFAULT, "_dl_find_object"));
#endif
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
  pthread_mutex_lock(&ep_mu);
  for (i = 0; i < ep_n; i++) {
    if (ep_list[i].fn) ep_list[i].fn(ep_list[i].p);
    else free(ep_list[i].p);
  }
  free(ep_list);
  ep_list = NULL;
  ep_n = ep_cap = 0;
  pthread_mutex_unlock(&ep_mu);
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

/* Do len bytes at offset off fit in a file of size bytes? */
static int fits(uint64_t off, uint64_t len, uint64_t size)
{
  return len <= size && off <= size - len;
}

/* The section headers of the ELF image of size bytes at map (a file
** mapped, or the vDSO), NULL when it is not one of this process's class or
** its headers do not fit. */
static const ElfW(Shdr) *elf_shdrs(const void *map, uint64_t size)
{
  const ElfW(Ehdr) *eh = map;
  if (size < sizeof(ElfW(Ehdr)) || memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 ||
      eh->e_ident[EI_CLASS] != (sizeof(void *) == 8 ? ELFCLASS64 : ELFCLASS32) ||
      eh->e_shentsize != sizeof(ElfW(Shdr)) ||
      !fits(eh->e_shoff, (uint64_t)eh->e_shnum * sizeof(ElfW(Shdr)), size))
    return NULL;
  return (const ElfW(Shdr) *)(const void *)((const char *)map + eh->e_shoff);
}

/* The symbol table of type type (SHT_SYMTAB, SHT_DYNSYM) with its strings
** in the image, NULL when it has none (or none stored in the file). */
static const ElfW(Shdr) *elf_symtab(const void *map, uint64_t size, uint32_t type)
{
  const ElfW(Ehdr) *eh = map;
  const ElfW(Shdr) *sh = elf_shdrs(map, size);
  size_t i;
  for (i = 0; sh && i < eh->e_shnum; i++)
    if (sh[i].sh_type == type && sh[i].sh_link < eh->e_shnum &&
        sh[i].sh_entsize == sizeof(ElfW(Sym)) &&
        sh[sh[i].sh_link].sh_type == SHT_STRTAB &&
        fits(sh[i].sh_offset, sh[i].sh_size, size) &&
        fits(sh[sh[i].sh_link].sh_offset, sh[sh[i].sh_link].sh_size, size))
      return &sh[i];
  return NULL;
}

/* Read the function symbols of the ELF image of size bytes at map: its
** .symtab, else (unless symtab_only) its .dynsym. Returns their number. */
static uint32_t parse_symbols(ljp_object *ob, const void *map, uint64_t size,
                              int symtab_only)
{
  const ElfW(Shdr) *sh = elf_shdrs(map, size), *tab;
  size_t bytes = 0, i, nsym, n = 0, used = 0;
  if (!sh) return 0;
  if (!(tab = elf_symtab(map, size, SHT_SYMTAB)) &&
      (symtab_only || !(tab = elf_symtab(map, size, SHT_DYNSYM))))
    return 0;
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
      return 0;
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
        e->bind = (uint8_t)ELF64_ST_BIND(sy[i].st_info);
        e->sized = sy[i].st_size != 0;
        memcpy(ob->names + used, nm, len);
        ob->names[used + len] = '\0';
        used += len + 1;
      }
    qsort(ob->s, ob->ns, sizeof(sym), sym_cmp);
  }
  return ob->ns;
}

/* Several symbols at one address (aliases: memcpy and __memcpy_avx...,
** malloc and __libc_malloc): keep the one perf shows (its
** choose_best_symbol): one with a size, then not weak, then global, then
** with fewer leading underscores, then the longest name. */
static int leading_(const char *s)
{
  int n = 0;
  while (s[n] == '_') n++;
  return n;
}

static int better_alias(const ljp_object *ob, const sym *a, const sym *b)
{
  const char *na = ob->names + a->name, *nb = ob->names + b->name;
  size_t la, lb;
  if (a->sized != b->sized) return a->sized;
  if ((a->bind == STB_WEAK) != (b->bind == STB_WEAK)) return b->bind == STB_WEAK;
  if ((a->bind == STB_GLOBAL) != (b->bind == STB_GLOBAL)) return a->bind == STB_GLOBAL;
  if (leading_(na) != leading_(nb)) return leading_(na) < leading_(nb);
  la = strlen(na);
  lb = strlen(nb);
  if (la != lb) return la > lb;
  return strcmp(na, nb) < 0;  /* the same in every run */
}

static void pick_aliases(ljp_object *ob)
{
  uint32_t i, k, n = 0;
  for (i = 0; i < ob->ns; i = k) {
    uint32_t best = i;
    for (k = i + 1; k < ob->ns && ob->s[k].lo == ob->s[i].lo; k++)
      if (better_alias(ob, &ob->s[k], &ob->s[best])) best = k;
    ob->s[n] = ob->s[best];
    if (ob->s[n].hi < ob->s[i].hi) ob->s[n].hi = ob->s[i].hi;  /* the longest */
    n++;
  }
  ob->ns = n;
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
      e->bind = STB_GLOBAL;
      e->sized = 1;
    }
    qsort(ob->s, ob->ns, sizeof(sym), sym_cmp);
  }
  free(im);
}

/* -- PLT stubs --------------------------------------------------------------
** A call to another object's function (or to an IFUNC of the object's own)
** goes through a stub in .plt, .plt.sec or .plt.got: one indirect jump
** through a GOT slot. A sample that lands there is named "memcpy@plt" as
** perf names it, not "libc.so.6+0x26000" (the stubs share one unwind
** entry). Each stub's jmp *disp(%rip) gives its GOT slot; the relocation
** of that slot gives the name: its dynamic symbol (JUMP_SLOT, GLOB_DAT), or
** for IRELATIVE the IFUNC whose resolver is the addend. x86-64 only; the
** first stub of .plt (the lazy binder's) has no slot of its own and keeps
** its offset. Read from the object's own file (a debug file has no
** contents), before the IFUNC implementations are added. */

#if defined(__x86_64__)
typedef struct pltslot {
  uint64_t got;      /* the GOT slot's address (unrelocated) */
  const char *name;  /* in the file map or the name arena */
  size_t len;
} pltslot;

static int pltslot_cmp(const void *x, const void *y)
{
  const pltslot *a = x, *b = y;
  return a->got < b->got ? -1 : a->got > b->got;
}

/* The name of the IFUNC whose resolver is at vaddr, else NULL. Of its
** aliases (a debug file has many: __GI___strnlen, __strnlen, strnlen) the
** one a program calls: not local, then the fewest leading underscores,
** then the shortest, then the first alphabetically; its symbol version
** ("memcpy@@GLIBC_2.14" in a .symtab) is not part of the name. */
static const char *ifunc_at(const ljp_object *ob, uint64_t vaddr)
{
  const char *best = NULL;
  int best_local = 1;
  uint32_t i;
  for (i = 0; i < ob->ns; i++)
    if (ob->s[i].ifunc && ob->s[i].lo == ob->base + vaddr) {
      const char *nm = ob->names + ob->s[i].name;
      int local = ob->s[i].bind == STB_LOCAL, d;
      if (best && local != best_local) {
        if (local) continue;
      } else if (best) {
        d = leading_(nm) - leading_(best);
        if (!d) d = (int)strcspn(nm, "@") - (int)strcspn(best, "@");
        if (!d) d = strcmp(nm, best);
        if (d >= 0) continue;
      }
      best = nm;
      best_local = local;
    }
  return best;
}

static void add_plt_syms(ljp_object *ob, const void *map, uint64_t size)
{
  const ElfW(Ehdr) *eh = map;
  const ElfW(Shdr) *sh = elf_shdrs(map, size), *ds = elf_symtab(map, size, SHT_DYNSYM);
  const ElfW(Shdr) *ss;
  pltslot *slot = NULL;
  sym *grown;
  char *arena = NULL;
  size_t nslot = 0, cap = 0, i, k, used = 0, bytes = 0, nstub = 0;
  if (!sh || !ds || eh->e_shstrndx >= eh->e_shnum) return;
  ss = &sh[eh->e_shstrndx];
  if (!fits(ss->sh_offset, ss->sh_size, size)) return;
  /* Every relocation of a GOT slot with a name. */
  for (i = 0; i < eh->e_shnum; i++) {
    const ElfW(Rela) *r = (const ElfW(Rela) *)(const void *)((const char *)map + sh[i].sh_offset);
    const ElfW(Sym) *dsym = (const ElfW(Sym) *)(const void *)((const char *)map + ds->sh_offset);
    const ElfW(Shdr) *dstr = &sh[ds->sh_link];
    size_t nr, nd = ds->sh_size / sizeof(ElfW(Sym));
    if (sh[i].sh_type != SHT_RELA || sh[i].sh_entsize != sizeof(ElfW(Rela)) ||
        !fits(sh[i].sh_offset, sh[i].sh_size, size))
      continue;
    nr = sh[i].sh_size / sizeof(ElfW(Rela));
    for (k = 0; k < nr; k++) {
      uint32_t t = (uint32_t)ELF64_R_TYPE(r[k].r_info), si = (uint32_t)ELF64_R_SYM(r[k].r_info);
      const char *nm = NULL;
      if ((t == R_X86_64_JUMP_SLOT || t == R_X86_64_GLOB_DAT) && si && si < nd &&
          dsym[si].st_name < dstr->sh_size)
        nm = (const char *)map + dstr->sh_offset + dsym[si].st_name;
      else if (t == R_X86_64_IRELATIVE)
        nm = ifunc_at(ob, (uint64_t)r[k].r_addend);
      if (!nm || !*nm) continue;
      if (nslot == cap) {
        pltslot *g = realloc(slot, (cap = cap ? 2 * cap : 64) * sizeof(pltslot));
        if (!g) goto out;
        slot = g;
      }
      slot[nslot].got = r[k].r_offset;
      slot[nslot].name = nm;
      slot[nslot].len = nm >= (const char *)map && nm < (const char *)map + size
                            ? strnlen(nm, dstr->sh_size - dsym[si].st_name)
                            : strcspn(nm, "@");  /* "memcpy@@GLIBC_2.14" */
      nslot++;
    }
  }
  if (!nslot) goto out;
  qsort(slot, nslot, sizeof(pltslot), pltslot_cmp);
  /* Two passes over the stubs: count (and size the names), then add. */
  for (k = 0; k < 2; k++) {
    size_t at = 0;
    if (k == 1) {
      for (i = 0; i < ob->ns; i++) {
        size_t end = ob->s[i].name + strlen(ob->names + ob->s[i].name) + 1;
        if (end > used) used = end;
      }
      if (!nstub || !(grown = realloc(ob->s, (ob->ns + nstub) * sizeof(sym)))) goto out;
      ob->s = grown;
      /* A new arena: the slots' IRELATIVE names point into the old one. */
      if (!(arena = malloc(used + bytes))) goto out;
      if (used) memcpy(arena, ob->names, used);
    }
    for (i = 0; i < eh->e_shnum; i++) {
      const char *sn = (const char *)map + ss->sh_offset + sh[i].sh_name;
      size_t sl = sh[i].sh_name < ss->sh_size ? strnlen(sn, ss->sh_size - sh[i].sh_name) : 0;
      const unsigned char *p = (const unsigned char *)map + sh[i].sh_offset;
      uint64_t ent = sh[i].sh_entsize ? sh[i].sh_entsize : 16, off;
      if (sh[i].sh_type != SHT_PROGBITS || !(sh[i].sh_flags & SHF_EXECINSTR) ||
          !((sl == 4 && !memcmp(sn, ".plt", 4)) || (sl == 8 && !memcmp(sn, ".plt.sec", 8)) ||
            (sl == 8 && !memcmp(sn, ".plt.got", 8))) ||
          !fits(sh[i].sh_offset, sh[i].sh_size, size) || ent > 32)
        continue;
      for (off = 0; off + ent <= sh[i].sh_size; off += ent) {
        uint64_t j, got;
        int32_t disp;
        pltslot key, *hit;
        for (j = 0; j + 6 <= ent && !(p[off + j] == 0xff && p[off + j + 1] == 0x25); j++)
          ;
        if (j + 6 > ent) continue;
        memcpy(&disp, p + off + j + 2, 4);
        got = sh[i].sh_addr + off + j + 6 + (uint64_t)(int64_t)disp;
        key.got = got;
        if (!(hit = bsearch(&key, slot, nslot, sizeof(pltslot), pltslot_cmp))) continue;
        if (k == 0) {
          nstub++;
          bytes += hit->len + 5;  /* "@plt" and NUL */
          continue;
        }
        if (at++ >= nstub) continue;  /* (the same stubs both times) */
        {
          sym *e = &ob->s[ob->ns++];
          e->lo = ob->base + sh[i].sh_addr + off;
          e->hi = e->lo + ent;
          e->name = (uint32_t)used;
          e->ifunc = 0;
          e->bind = STB_GLOBAL;
          e->sized = 1;
          memcpy(arena + used, hit->name, hit->len);
          memcpy(arena + used + hit->len, "@plt", 5);
          used += hit->len + 5;
        }
      }
    }
  }
  free(ob->names);
  ob->names = arena;
  arena = NULL;
  qsort(ob->s, ob->ns, sizeof(sym), sym_cmp);
out:
  free(arena);
  free(slot);
}
#else
static void add_plt_syms(ljp_object *ob, const void *map, uint64_t size)
{
  (void)ob;
  (void)map;
  (void)size;
}
#endif

/* -- Separate debug files ---------------------------------------------------
** A stripped library's static functions are named by its separate debug
** file when one is installed (Debian's *-dbg and *-dbgsym packages), found
** as gdb and perf find it:
**  1. by build ID (the object's NT_GNU_BUILD_ID note, read from memory):
**     DIR/.build-id/xx/rest.debug, whose own build ID must be the same;
**  2. by the object's .gnu_debuglink (a file name and a CRC-32 of the
**     debug file): OBJDIR/NAME, OBJDIR/.debug/NAME, DIR/OBJDIR/NAME, the
**     first whose CRC matches (OBJDIR: the object's directory, as loaded
**     and with links resolved);
** for each DIR of LJPROF_DEBUG_DIR (a colon-separated list, default
** /usr/lib/debug; set and empty: no separate debug files at all). Its
** .symtab is read with the object's load bias (a debug file keeps the
** object's addresses). Only for an object without a .symtab of its own. */

static void *map_file(const char *path, uint64_t *size)
{
  struct stat st;
  void *map;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return NULL;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) ||
      st.st_size < (off_t)sizeof(ElfW(Ehdr))) {
    close(fd);
    return NULL;
  }
  map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);
  if (map == MAP_FAILED) return NULL;
  *size = (uint64_t)st.st_size;
  return map;
}

/* The contents of the section named name, NULL when absent or not in the
** file. */
static const unsigned char *elf_section(const void *map, uint64_t size,
                                        const char *name, uint64_t *len)
{
  const ElfW(Ehdr) *eh = map;
  const ElfW(Shdr) *sh = elf_shdrs(map, size), *ss;
  size_t i, nl = strlen(name) + 1;
  if (!sh || eh->e_shstrndx >= eh->e_shnum) return NULL;
  ss = &sh[eh->e_shstrndx];
  if (!fits(ss->sh_offset, ss->sh_size, size)) return NULL;
  for (i = 0; i < eh->e_shnum; i++)
    if (sh[i].sh_type != SHT_NOBITS && sh[i].sh_name < ss->sh_size &&
        ss->sh_size - sh[i].sh_name >= nl &&
        !memcmp((const char *)map + ss->sh_offset + sh[i].sh_name, name, nl) &&
        fits(sh[i].sh_offset, sh[i].sh_size, size)) {
      *len = sh[i].sh_size;
      return (const unsigned char *)map + sh[i].sh_offset;
    }
  return NULL;
}

/* The CRC-32 of .gnu_debuglink (that of zlib and binutils). */
static uint32_t crc32_gnu(const unsigned char *p, uint64_t n)
{
  static uint32_t tab[256];
  uint32_t c = 0xffffffffu, k;
  uint64_t i;
  if (!tab[1])
    for (i = 0; i < 256; i++) {
      c = (uint32_t)i;
      for (k = 0; k < 8; k++) c = c & 1 ? 0xedb88320u ^ (c >> 1) : c >> 1;
      tab[i] = c;
    }
  for (c = 0xffffffffu, i = 0; i < n; i++) c = tab[(c ^ p[i]) & 0xff] ^ (c >> 8);
  return ~c;
}

/* Map path if it is a debug file of ob: by build ID (want_id) or by CRC. */
static void *map_debug(const char *path, const ljp_object *ob, int want_id,
                       uint32_t crc, uint64_t *size)
{
  uint64_t len = 0;
  const unsigned char *note;
  unsigned char id[BUILD_ID_MAX];
  void *map = map_file(path, size);
  int ok;
  if (!map) return NULL;
  if (want_id)
    ok = (note = elf_section(map, *size, ".note.gnu.build-id", &len)) &&
         note_build_id(note, len, id, NULL) == ob->build_id_len &&
         !memcmp(id, ob->build_id, (size_t)ob->build_id_len);
  else
    ok = crc32_gnu(map, *size) == crc;
  if (ok && elf_symtab(map, *size, SHT_SYMTAB)) return map;
  munmap(map, (size_t)*size);
  return NULL;
}

/* The debug file of ob (its own file mapped at map), mapped, or NULL. */
#define DBG_PATH 4096

static void *find_debug(const ljp_object *ob, const char *path,
                        const void *map, uint64_t size, uint64_t *dsize)
{
  const char *env = getenv("LJPROF_DEBUG_DIR"), *d, *e;
  const char *dirs = env ? env : "/usr/lib/debug";
  const unsigned char *link;
  char *buf, *real, *odir[2], *slash;  /* 4 paths: off the (Lua) stack */
  uint64_t len = 0;
  size_t at;
  uint32_t crc;
  void *dbg = NULL;
  int i, k, nodir = 0;
  if (!dirs[0] || !(buf = malloc(4 * DBG_PATH))) return NULL;
  real = buf + DBG_PATH;
  odir[0] = buf + 2 * DBG_PATH;
  odir[1] = buf + 3 * DBG_PATH;
  if (ob->build_id_len >= 2)
    for (d = dirs; *d && !dbg; d = *e ? e + 1 : e) {
      int n;
      e = strchr(d, ':');
      if (!e) e = d + strlen(d);
      n = snprintf(buf, DBG_PATH, "%.*s/.build-id/%02x/", (int)(e - d), d,
                   ob->build_id[0]);
      for (i = 1; i < ob->build_id_len && n > 0 && n + 3 < DBG_PATH; i++)
        n += snprintf(buf + n, DBG_PATH - (size_t)n, "%02x", ob->build_id[i]);
      if (n > 0 && n + 7 < DBG_PATH && e > d) {
        memcpy(buf + n, ".debug", 7);
        dbg = map_debug(buf, ob, 1, 0, dsize);
      }
    }
  /* .gnu_debuglink: a file name, padding to 4 bytes, the CRC-32 */
  if (dbg || !(link = elf_section(map, size, ".gnu_debuglink", &len)) ||
      len < 8 || !memchr(link, 0, (size_t)len - 4) ||
      (at = (strlen((const char *)link) + 4) & ~(size_t)3) + 4 > len) {
    free(buf);
    return dbg;
  }
  memcpy(&crc, link + at, 4);
  for (i = 0; i < 2; i++) {  /* the directory as loaded, and resolved */
    const char *p = i ? (realpath(path, real) ? real : NULL) : path;
    if (!p || snprintf(odir[nodir], DBG_PATH, "%s", p) >= DBG_PATH) continue;
    if ((slash = strrchr(odir[nodir], '/'))) *slash = '\0';
    else strcpy(odir[nodir], ".");
    if (!nodir || strcmp(odir[0], odir[1])) nodir++;
  }
  for (k = 0; k < nodir && !dbg; k++) {
    if (snprintf(buf, DBG_PATH, "%s/%s", odir[k], link) < DBG_PATH)
      dbg = map_debug(buf, ob, 0, crc, dsize);
    if (!dbg && snprintf(buf, DBG_PATH, "%s/.debug/%s", odir[k], link) < DBG_PATH)
      dbg = map_debug(buf, ob, 0, crc, dsize);
    for (d = dirs; *d && !dbg; d = *e ? e + 1 : e) {
      e = strchr(d, ':');
      if (!e) e = d + strlen(d);
      if (e > d && odir[k][0] == '/' &&
          snprintf(buf, DBG_PATH, "%.*s%s/%s", (int)(e - d), d, odir[k], link) <
              DBG_PATH)
        dbg = map_debug(buf, ob, 0, crc, dsize);
    }
  }
  free(buf);
  return dbg;
}

/* Read the function symbols of ob, from its file (by the copied path), or
** from memory for the kernel's vDSO (it has no file). */
static void load_symbols(ljp_object *ob)
{
  const char *path = ob->name[0] ? ob->name : exe_path[0] ? exe_path : "/proc/self/exe";
  void *map, *dbg;
  uint64_t size, dsize;
  ob->syms_loaded = 1;
  if (!strncmp(ob->name, "linux-vdso", 10) || !strncmp(ob->name, "linux-gate", 10)) {
    const ElfW(Ehdr) *eh = (const ElfW(Ehdr) *)getauxval(AT_SYSINFO_EHDR);
    if (eh && (uintptr_t)eh >= ob->base && (uintptr_t)eh < ob->hi[ob->nseg - 1] &&
        !memcmp(eh->e_ident, ELFMAG, SELFMAG) &&
        eh->e_shoff + (uint64_t)eh->e_shnum * sizeof(ElfW(Shdr)) <= 65536)
      parse_symbols(ob, eh, eh->e_shoff + (uint64_t)eh->e_shnum * sizeof(ElfW(Shdr)), 0);
    pick_aliases(ob);
    return;
  }
  if (!(map = map_file(ob->name[0] ? ob->name : "/proc/self/exe", &size))) return;
  if (!elf_symtab(map, size, SHT_SYMTAB) &&
      (dbg = find_debug(ob, path, map, size, &dsize))) {
    parse_symbols(ob, dbg, dsize, 1);
    munmap(dbg, (size_t)dsize);
  }
  if (!ob->s) parse_symbols(ob, map, size, 0);
  add_plt_syms(ob, map, size);
  munmap(map, (size_t)size);
  add_ifunc_impls(ob);
  pick_aliases(ob);
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

/* A C++ name demangled ("_ZN4game4Phys4stepEmi" is "game::Phys::step(
** unsigned long, int)"), by the process's own C++ runtime when it has one
** (libstdc++ or libc++abi, loaded by the program, even privately: dlopen
** RTLD_NOLOAD never loads anything, and the handle holds the runtime for
** the call), else by one the program exports. Normal context only (the
** loader's lock, malloc). 1 and the name in buf, or 0: left as it is. */
typedef char *(*cxa_demangle_fn)(const char *, char *, size_t *, int *);

static int demangle(const char *name, char *buf, size_t len)
{
  static const char *const rt[] = {"libstdc++.so.6", "libc++abi.so.1", "libc++.so.1"};
  cxa_demangle_fn fn = NULL;
  void *h = NULL;
  char *d = NULL;
  int status = -1;
  size_t i;
  if (strncmp(name, "_Z", 2) != 0) return 0;
  for (i = 0; i < sizeof(rt) / sizeof(rt[0]) && !fn; i++)
    if ((h = dlopen(rt[i], RTLD_NOLOAD | RTLD_LAZY)) &&
        !(fn = (cxa_demangle_fn)(uintptr_t)dlsym(h, "__cxa_demangle"))) {
      dlclose(h);
      h = NULL;
    }
  if (!fn) fn = (cxa_demangle_fn)(uintptr_t)dlsym(RTLD_DEFAULT, "__cxa_demangle");
  if (fn) d = fn(name, NULL, NULL, &status);
  if (h) dlclose(h);
  if (!d || status != 0) {
    free(d);
    return 0;
  }
  snprintf(buf, len, "%s", d);
  free(d);
  return 1;
}

/* demangle, keeping a PLT stub's "@plt" ("twice<unsigned long>(...)@plt"). */
static int demangle_sym(const char *name, char *buf, size_t len)
{
  char plain[256];
  size_t n = strlen(name), k;
  if (n <= 4 || strcmp(name + n - 4, "@plt") != 0) return demangle(name, buf, len);
  if (n - 4 >= sizeof(plain)) return 0;
  memcpy(plain, name, n - 4);
  plain[n - 4] = '\0';
  if (!demangle(plain, buf, len)) return 0;
  k = strlen(buf);
  if (k + 5 <= len) memcpy(buf + k, "@plt", 5);
  return 1;
}

/* A symbol's version ("clock_nanosleep@@GLIBC_2.17", "memcpy@GLIBC_2.2.5"
** in a .symtab) is not part of its name, as perf shows it; a PLT stub
** keeps its "@plt". */
static void drop_version(char *s)
{
  char *at = strchr(s, '@');
  size_t n;
  if (!at || at == s) return;
  n = strlen(at);
  if (n > 4 && !strcmp(at + n - 4, "@plt")) memmove(at, at + n - 4, 5);
  else if (n != 4 || strcmp(at, "@plt") != 0) *at = '\0';
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
  if (!s || !demangle_sym(ob->names + s->name, out->sym, sizeof(out->sym)))
    snprintf(out->sym, sizeof(out->sym), "%s", s ? ob->names + s->name : "");
  drop_version(out->sym);
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
  if (!pc || process_vm_readv(ljp_self_pid(), &li, 1, &ri, 1, 0) !=
                 (ssize_t)sizeof(b))
    return 0;
  return !memcmp(b, code, sizeof(code));
#else
  (void)pc;
  return 0;
#endif
}
