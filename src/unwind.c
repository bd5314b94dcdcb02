/*
** Native stacks: capture in the signal handler, and the unwind-info
** registry that makes the capture safe.
**
** ljp_native_capture runs in signal context: no malloc, no locks, no
** stdio, bounded work (at most LJP_NATIVE_MAX frames). It walks the C
** frames above the Lua code with libunwind's local unwinder, from the
** signal's ucontext, and stops at the first frame of LuaJIT's interpreter
** or of compiled trace code (machine code that belongs to no loaded
** object): the Lua side of the stack is read at the safe point.
**
** The hazard of unwinding in a signal handler is libunwind's lookup of
** unwind info, which calls dl_iterate_phdr and so takes the dynamic
** loader's lock (deadlocks with dlopen/dlsym/dladdr, see
** docs/design.md). The installed libunwind (1.6) has no
** unw_set_iterate_phdr_function, so ljprof never lets that lookup run:
** in normal context it registers every loaded object's .eh_frame_hdr
** search table with libunwind as dynamic unwind info (_U_dyn_register,
** UNW_INFO_FORMAT_REMOTE_TABLE), which libunwind consults first, and the
** handler only steps from a frame whose PC lies in a registered object.
** A frame anywhere else ends the walk (counted as truncated). The
** registry is refreshed at safe points when a library was loaded or
** unloaded; the handler skips the walk (counted) while the loader is
** changing its list of objects, and whenever that list no longer matches
** the fingerprint taken with the registry. Normal-context libunwind calls
** block signals on their thread, and a per-context flag guards the
** handler's walk.
**
** Registry arrays read by handlers are immutable once published. A
** replaced array and cancelled unwind info are freed by a later refresh
** that sees no handler walking (uw_walkers), since until then a handler
** on another thread may still be reading them.
*/
#define _GNU_SOURCE
#define UNW_LOCAL_ONLY
#include <dlfcn.h>
#include <lauxlib.h>
#include <libunwind.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ljp.h"

/* -- Registry ----------------------------------------------------------- */

enum { UW_STEP = 1, UW_NOINFO, UW_INTERP, UW_KIND = 7, UW_VM = 8 };

typedef struct uw_ent {
  uintptr_t lo, hi;  /* [lo, hi) executable code */
  uint32_t kind;     /* UW_* */
} uw_ent;

typedef struct uw_map {
  uint64_t print;    /* the loader's list of objects when it was built */
  uint32_t n;
  uw_ent e[];        /* sorted by lo, non-overlapping */
} uw_map;

/* One loaded object's registration. */
typedef struct uw_obj {
  uintptr_t base, hdr;      /* load bias, .eh_frame_hdr address (0: none) */
  unsigned char print[12];  /* the header's first bytes when registered */
  char *name;
  unw_dyn_info_t *di[8];    /* one per executable segment */
  uintptr_t lo[8], hi[8];
  int nseg, seen, vm;        /* vm: LuaJIT's own object */
} uw_obj;

static pthread_mutex_t uw_mu = PTHREAD_MUTEX_INITIALIZER;
static _Atomic(uw_map *) uw_cur;
/* Handlers inside a walk, on any thread. A refresh frees what it
** replaced (maps, cancelled unwind info) once it has seen none: a walk
** that starts after the new map is published cannot reach the old one. */
static _Atomic int uw_walkers;
static void **uw_retired;
static uint32_t uw_nretired, uw_capretired;
static uw_obj *uw_objs;
static uint32_t uw_nobj, uw_capobj;
static uintptr_t uw_interp_lo, uw_interp_hi;
static unsigned long long uw_dlgen;
static int uw_status;       /* 0 not set up, 1 ready, -1 unavailable */
static char uw_why[160];

/* Normal-context code runs libunwind with every signal blocked on its
** thread, so a handler never enters libunwind while the same thread is in
** it (a tick that arrives meanwhile is delivered just after). Inside the
** handler, the context's native_inside flag is the re-entrancy guard. */
static void block_all(sigset_t *old)
{
  sigset_t all;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, old);
}

static void unblock(const sigset_t *old)
{
  pthread_sigmask(SIG_SETMASK, old, NULL);
}

/* A fingerprint of the loader's list of objects (load bias and dynamic
** section of each): it changes when an object is loaded, unloaded or
** replaced by another at the same place. Signal context too: the list is
** read only while the loader says it is consistent, and the walk is
** bounded (a node freed by another thread's dlclose meanwhile reads as
** garbage, i.e. a mismatch, never as a fault: it is heap memory). */
static uint64_t linkmap_print(void)
{
  const struct link_map *l = _r_debug.r_map;
  uint64_t h = 1469598103934665603ull;
  int n = 0;
  for (; l && n < 1024; l = l->l_next, n++) {
    h = (h ^ (uint64_t)l->l_addr) * 1099511628211ull;
    h = (h ^ (uint64_t)(uintptr_t)l->l_ld) * 1099511628211ull;
  }
  return h ^ (uint64_t)n;
}

static const uw_ent *uw_find(const uw_map *m, uintptr_t pc)
{
  return ljp_span_find(m->e, m->n, sizeof(uw_ent), pc);
}

/* .eh_frame_hdr: version 1, then the encodings of eh_frame_ptr, of the
** FDE count and of the table. libunwind's table search wants the usual
** one: a sorted table of (initial location, FDE) pairs, each a signed
** 32-bit offset from the header (DW_EH_PE_datarel | DW_EH_PE_sdata4). */
#define DW_EH_PE_udata4 0x03
#define DW_EH_PE_sdata4 0x0b
#define DW_EH_PE_pcrel 0x10
#define DW_EH_PE_datarel 0x30

static int hdr_table(uintptr_t hdr, uintptr_t *table, uint32_t *count)
{
  const unsigned char *h = (const unsigned char *)hdr;
  uint32_t n;
  if (h[0] != 1 || h[3] != (DW_EH_PE_datarel | DW_EH_PE_sdata4)) return -1;
  if ((h[1] & 0x0f) != DW_EH_PE_sdata4 && (h[1] & 0x0f) != DW_EH_PE_udata4)
    return -1;
  if (h[2] != DW_EH_PE_udata4) return -1;
  memcpy(&n, h + 8, 4);
  if (n == 0) return -1;
  *table = hdr + 12;
  *count = n;
  return 0;
}

typedef struct scan_obj {
  uintptr_t base, hdr;
  const char *name;
  int nseg, vm;
  uintptr_t lo[8], hi[8];
} scan_obj;

typedef struct scan {
  scan_obj *o;
  uint32_t n, cap;
  int oom;
} scan;

static int scan_cb(struct dl_phdr_info *info, size_t size, void *data)
{
  scan *sc = data;
  scan_obj *o;
  int i;
  (void)size;
  if (sc->n == sc->cap) {
    uint32_t c = sc->cap ? sc->cap * 2 : 32;
    scan_obj *p = realloc(sc->o, c * sizeof(*p));
    if (!p) { sc->oom = 1; return 1; }
    sc->o = p;
    sc->cap = c;
  }
  o = &sc->o[sc->n];
  memset(o, 0, sizeof(*o));
  o->base = info->dlpi_addr;
  o->name = info->dlpi_name ? info->dlpi_name : "";
  for (i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type == PT_GNU_EH_FRAME)
      o->hdr = info->dlpi_addr + ph->p_vaddr;
    else if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X) && ph->p_memsz &&
             o->nseg < 8) {
      o->lo[o->nseg] = info->dlpi_addr + ph->p_vaddr;
      o->hi[o->nseg] = info->dlpi_addr + ph->p_vaddr + ph->p_memsz;
      o->nseg++;
    }
  }
  for (i = 0; i < o->nseg; i++)
    if ((uintptr_t)(void *)lua_sethook >= o->lo[i] &&
        (uintptr_t)(void *)lua_sethook < o->hi[i])
      o->vm = 1;  /* lua_sethook is exported by the object holding the VM */
  if (o->nseg) sc->n++;
  return 0;
}

static int ent_cmp(const void *a, const void *b)
{
  const uw_ent *x = a, *y = b;
  return x->lo < y->lo ? -1 : x->lo > y->lo;
}

static void obj_register(uw_obj *ob, const scan_obj *so)
{
  uintptr_t table;
  uint32_t count;
  int i;
  memset(ob, 0, sizeof(*ob));
  ob->base = so->base;
  ob->name = strdup(so->name);
  ob->nseg = so->nseg;
  memcpy(ob->lo, so->lo, sizeof(ob->lo));
  memcpy(ob->hi, so->hi, sizeof(ob->hi));
  ob->seen = 1;
  ob->vm = so->vm;
  if (!so->hdr || hdr_table(so->hdr, &table, &count) != 0) return;
  ob->hdr = so->hdr;
  memcpy(ob->print, (const void *)so->hdr, sizeof(ob->print));
  for (i = 0; i < ob->nseg; i++) {
    unw_dyn_info_t *di = calloc(1, sizeof(*di));
    if (!di) continue;
    di->start_ip = ob->lo[i];
    di->end_ip = ob->hi[i];
    di->format = UNW_INFO_FORMAT_REMOTE_TABLE;
    di->u.rti.name_ptr = (unw_word_t)(uintptr_t)(ob->name ? ob->name : "");
    di->u.rti.segbase = ob->hdr;
    di->u.rti.table_len = (unw_word_t)count * 8 / sizeof(unw_word_t);
    di->u.rti.table_data = table;
    _U_dyn_register(di);
    ob->di[i] = di;
  }
}

/* Keep p until no walk can be using it (normal context, uw_mu). */
static void retire(void *p)
{
  if (!p) return;
  if (uw_nretired == uw_capretired) {
    uint32_t c = uw_capretired ? uw_capretired * 2 : 64;
    void **n = realloc(uw_retired, c * sizeof(void *));
    if (!n) return;  /* leak rather than free under a walker */
    uw_retired = n;
    uw_capretired = c;
  }
  uw_retired[uw_nretired++] = p;
}

static void obj_cancel(uw_obj *ob)
{
  int i;
  for (i = 0; i < ob->nseg; i++)
    if (ob->di[i]) {
      _U_dyn_cancel(ob->di[i]);
      retire(ob->di[i]);
    }
  retire(ob->name);  /* the unwind info points at it */
}

static int same_obj(const uw_obj *ob, const scan_obj *so)
{
  if (ob->base != so->base || ob->hdr != so->hdr || ob->nseg != so->nseg ||
      ob->lo[0] != so->lo[0] || strcmp(ob->name ? ob->name : "", so->name))
    return 0;
  return !ob->hdr || !memcmp(ob->print, (const void *)so->hdr,
                             sizeof(ob->print));
}

/* Rebuild the registry from the loaded objects. Normal context, uw_mu. */
static void refresh_locked(void)
{
  scan sc;
  uw_map *m;
  sigset_t old;
  uint32_t i, j, n = 0;
  /* Taken first: a change during the scan leaves a stale print, which
  ** only makes handlers skip until the next refresh. */
  uint64_t print = linkmap_print();
  memset(&sc, 0, sizeof(sc));
  uw_dlgen = ljp_dl_generation();
  dl_iterate_phdr(scan_cb, &sc);
  if (sc.oom) { free(sc.o); return; }
  block_all(&old);
  for (i = 0; i < uw_nobj; i++) uw_objs[i].seen = 0;
  for (j = 0; j < sc.n; j++) {
    for (i = 0; i < uw_nobj; i++)
      if (!uw_objs[i].seen && same_obj(&uw_objs[i], &sc.o[j])) break;
    if (i < uw_nobj) { uw_objs[i].seen = 1; continue; }
    if (uw_nobj == uw_capobj) {
      uint32_t c = uw_capobj ? uw_capobj * 2 : 32;
      uw_obj *p = realloc(uw_objs, c * sizeof(*p));
      if (!p) continue;
      uw_objs = p;
      uw_capobj = c;
    }
    obj_register(&uw_objs[uw_nobj++], &sc.o[j]);
  }
  for (i = 0; i < uw_nobj;) {  /* unloaded objects leave the registry */
    if (uw_objs[i].seen) { i++; continue; }
    obj_cancel(&uw_objs[i]);
    uw_objs[i] = uw_objs[--uw_nobj];
  }
  for (i = 0; i < uw_nobj; i++) n += (uint32_t)uw_objs[i].nseg;
  m = malloc(sizeof(*m) + (n + 2) * sizeof(uw_ent));
  if (m) {
    m->print = print;
    m->n = 0;
    for (i = 0; i < uw_nobj; i++) {
      const uw_obj *ob = &uw_objs[i];
      int s;
      for (s = 0; s < ob->nseg; s++) {
        uw_ent *e = &m->e[m->n];
        e->lo = ob->lo[s];
        e->hi = ob->hi[s];
        e->kind = (ob->di[s] ? UW_STEP : UW_NOINFO) | (ob->vm ? UW_VM : 0);
        if (uw_interp_lo >= e->lo && uw_interp_hi <= e->hi &&
            uw_interp_lo < uw_interp_hi) {
          /* The interpreter: its own entry, splitting its object's. */
          uw_ent rest = *e;
          e->hi = uw_interp_lo;
          m->e[m->n + 1] = (uw_ent){uw_interp_lo, uw_interp_hi,
                                    UW_INTERP | UW_VM};
          rest.lo = uw_interp_hi;
          m->e[m->n + 2] = rest;
          m->n += 3;
        } else {
          m->n++;
        }
      }
    }
    qsort(m->e, m->n, sizeof(uw_ent), ent_cmp);
    retire(atomic_exchange(&uw_cur, m));
  }
  if (atomic_load(&uw_walkers) == 0) {  /* nothing retired is in use */
    for (i = 0; i < uw_nretired; i++) free(uw_retired[i]);
    uw_nretired = 0;
  }
  unw_flush_cache(unw_local_addr_space, 0, 0);
  unblock(&old);
  free(sc.o);
}

/* -- Finding the interpreter ------------------------------------------- */

/* A lua_CFunction called from Lua: the frame above it is LuaJIT's
** interpreter, whose code is one unwind entry (FDE); every call of a C
** function from interpreted code returns into it. */
static int interp_probe(lua_State *L)
{
  unw_context_t uc;
  unw_cursor_t cur;
  unw_proc_info_t pi;
  unw_word_t ip = 0;
  sigset_t old;
  block_all(&old);
  if (unw_getcontext(&uc) == 0 && unw_init_local(&cur, &uc) == 0 &&
      unw_step(&cur) > 0 && unw_get_reg(&cur, UNW_REG_IP, &ip) == 0 &&
      unw_get_proc_info(&cur, &pi) == 0) {
    lua_pushnumber(L, (lua_Number)ip);
    lua_pushnumber(L, (lua_Number)pi.start_ip);
    lua_pushnumber(L, (lua_Number)pi.end_ip);
  } else {
    lua_pushnil(L);
    lua_pushnil(L);
    lua_pushnil(L);
  }
  unblock(&old);
  return 3;
}

/* Which object holds address a? */
static int same_object(uintptr_t a, uintptr_t b)
{
  Dl_info x, y;
  return dladdr((void *)a, &x) && dladdr((void *)b, &y) &&
         x.dli_fbase == y.dli_fbase;
}

static int find_interp(lua_State *L)
{
  uintptr_t ip, lo, hi;
  int top = lua_gettop(L), ok = 0;
  /* Called twice, from two call sites: both must return into the same
  ** entry, which must lie in LuaJIT's object (where lua_sethook is). */
  if (luaL_loadstring(L, "local f = ... local a, b, c = f() "
                         "local d, e, g = (function() return f() end)() "
                         "return a, b, c, d, e, g") == 0) {
    lua_pushcfunction(L, interp_probe);
    if (lua_pcall(L, 1, 6, 0) == 0 && lua_isnumber(L, -6) &&
        lua_isnumber(L, -3)) {
      ip = (uintptr_t)lua_tonumber(L, -6);
      lo = (uintptr_t)lua_tonumber(L, -5);
      hi = (uintptr_t)lua_tonumber(L, -4);
      if (lo == (uintptr_t)lua_tonumber(L, -2) &&
          hi == (uintptr_t)lua_tonumber(L, -1) && ip >= lo && ip < hi &&
          hi - lo >= 1024 && hi - lo <= (4u << 20) &&
          same_object(ip, (uintptr_t)(void *)lua_sethook)) {
        uw_interp_lo = lo;
        uw_interp_hi = hi;
        ok = 1;
      }
    }
  }
  lua_settop(L, top);
  return ok;
}

/* A throw-away unwind in normal context: libunwind initialises itself
** (address space, memory validation, per-thread cache) here rather than
** in the first signal handler. */
static void warm_up(void)
{
  unw_context_t uc;
  unw_cursor_t cur;
  sigset_t old;
  int i;
  block_all(&old);
  if (unw_getcontext(&uc) == 0 && unw_init_local(&cur, &uc) == 0)
    for (i = 0; i < 4 && unw_step(&cur) > 0; i++) {}
  unblock(&old);
}

/* Normal context, on the thread that will be profiled, before its timer
** starts. Returns 0 when native stacks can be captured; otherwise -1 and
** why in *why (said once per process by the caller). */
int ljp_native_setup(lua_State *L, const char **why)
{
  int rc;
  pthread_mutex_lock(&uw_mu);
  if (uw_status == 0) {
    /* The per-thread cache needs no lock in the handler. Set once, before
    ** any unwind (not signal-safe). */
    unw_set_caching_policy(unw_local_addr_space, UNW_CACHE_PER_THREAD);
    if (!find_interp(L)) {
      uw_status = -1;
      snprintf(uw_why, sizeof(uw_why), "LuaJIT's interpreter code was not "
               "found by unwinding from a C function");
    } else {
      refresh_locked();
      if (!atomic_load(&uw_cur)) {
        uw_status = -1;
        snprintf(uw_why, sizeof(uw_why), "out of memory");
      } else {
        uw_status = 1;
      }
    }
  }
  rc = uw_status == 1 ? 0 : -1;
  pthread_mutex_unlock(&uw_mu);
  if (rc == 0) warm_up();  /* this thread's cache and TLS, every start */
  else if (why) *why = uw_why;
  return rc;
}

/* Normal context: re-register when a library was loaded or unloaded. */
void ljp_native_refresh(void)
{
  unsigned long long gen;
  if (uw_status != 1) return;
  gen = ljp_dl_generation();
  if (gen == uw_dlgen) return;
  pthread_mutex_lock(&uw_mu);
  if (gen != uw_dlgen) refresh_locked();
  pthread_mutex_unlock(&uw_mu);
}

/* Normal context: the function containing code address pc, from its
** unwind info ([*lo, *hi)); 0 if none is known. */
int ljp_native_proc(uintptr_t pc, uintptr_t *lo, uintptr_t *hi)
{
  unw_proc_info_t pi;
  sigset_t old;
  const uw_map *m;
  const uw_ent *e;
  int rc = -1;
  atomic_fetch_add(&uw_walkers, 1);  /* the map and the list stay */
  m = atomic_load(&uw_cur);
  e = m ? uw_find(m, pc) : NULL;
  if (e && (e->kind & UW_KIND) == UW_STEP) {  /* never the loader's lookup */
    block_all(&old);
    rc = unw_get_proc_info_by_ip(unw_local_addr_space, pc, &pi, NULL);
    unblock(&old);
  }
  atomic_fetch_sub(&uw_walkers, 1);
  if (rc != 0 || pc < pi.start_ip || pc >= pi.end_ip) return 0;
  *lo = pi.start_ip;
  *hi = pi.end_ip;
  return 1;
}

/* Is pc LuaJIT's interpreter? (normal or signal context) */
int ljp_native_is_interp(uintptr_t pc)
{
  return pc >= uw_interp_lo && pc < uw_interp_hi;
}

/* -- Capture (signal context) --------------------------------------------- */

static int capture(ljp_ctx *ctx, const uw_map *m, void *ucv, uintptr_t pc,
                   int vmstate, uintptr_t *out, uint8_t *flags)
{
  const uw_ent *e;
  unw_cursor_t cur;
  unw_word_t ip;
  int n = 0;
  if (!m) return 0;
  if (!(e = uw_find(m, pc))) {
    if (ljp_codemap_classify(&ctx->map, pc, &(int32_t){0}) == 'C') {
      /* an object loaded since the last refresh (at the next safe point) */
      *flags = LJP_NATIVE_TRUNCATED;
      atomic_fetch_add_explicit(&ctx->n_native_truncated, 1,
                                memory_order_relaxed);
    }
    return 0;  /* otherwise trace code: nothing native on top */
  }
  if ((e->kind & UW_KIND) == UW_INTERP) return 0;  /* the interpreter */
  /* Elsewhere in LuaJIT's own code, the interpreter's and the compiler's
  ** helpers have only LuaJIT frames above the Lua code, which are not
  ** shown: no walk. In C (a C module calling lua_* functions) and in the
  ** GC (which such a call may start), the walk reaches the caller. */
  if ((e->kind & UW_VM) && vmstate != 'C' && vmstate != 'G') return 0;
  if (ctx->native_inside || _r_debug.r_state != RT_CONSISTENT ||
      linkmap_print() != m->print) {
    /* a walk already under way on this thread, the loader changing the
    ** list of objects, or a list that changed since the registry was
    ** built (a library unloaded, perhaps another mapped in its place): no
    ** walk until the next safe point has registered the change. */
    atomic_fetch_add_explicit(&ctx->n_native_skipped, 1,
                              memory_order_relaxed);
    *flags = LJP_NATIVE_SKIPPED;
    return 0;
  }
  ctx->native_inside = 1;
  atomic_signal_fence(memory_order_seq_cst);
  atomic_fetch_add_explicit(&ctx->n_native_unwinds, 1, memory_order_relaxed);
  out[n++] = pc;
  if (unw_init_local2(&cur, (unw_context_t *)ucv, UNW_INIT_SIGNAL_FRAME) < 0) {
    *flags = LJP_NATIVE_TRUNCATED;
  } else {
    for (;;) {
      if ((e->kind & UW_KIND) != UW_STEP || n == LJP_NATIVE_MAX ||
          unw_step(&cur) <= 0 || unw_get_reg(&cur, UNW_REG_IP, &ip) < 0) {
        *flags = LJP_NATIVE_TRUNCATED;
        break;
      }
      /* A return address: the call is the instruction before it. */
      e = uw_find(m, (uintptr_t)ip - 1);
      if (!e) {
        /* Code of no loaded object: a trace's machine code (or other
        ** generated code) called this C code. */
        if (ljp_codemap_classify(&ctx->map, (uintptr_t)ip, &(int32_t){0}) ==
            'C')
          *flags = LJP_NATIVE_TRUNCATED;  /* an object we have not seen */
        break;
      }
      if ((e->kind & UW_KIND) == UW_INTERP) {  /* called from the interpreter */
        *flags = LJP_NATIVE_FROM_INTERP;
        break;
      }
      out[n++] = (uintptr_t)ip;
    }
  }
  if (*flags & LJP_NATIVE_TRUNCATED)
    atomic_fetch_add_explicit(&ctx->n_native_truncated, 1,
                              memory_order_relaxed);
  atomic_fetch_add_explicit(&ctx->n_native_frames, (uint64_t)n,
                            memory_order_relaxed);
  atomic_signal_fence(memory_order_seq_cst);
  ctx->native_inside = 0;
  return n;
}

int ljp_native_capture(ljp_ctx *ctx, void *ucv, uintptr_t pc, int vmstate,
                       uintptr_t *out, uint8_t *flags)
{
  int n;
  *flags = 0;
  atomic_fetch_add(&uw_walkers, 1);
  n = capture(ctx, atomic_load(&uw_cur), ucv, pc, vmstate, out, flags);
  atomic_fetch_sub(&uw_walkers, 1);
  return n;
}
