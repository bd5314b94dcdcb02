/*
** Native stacks: the capture in the signal handler, and its set-up. The
** loaded objects, their unwind tables and the interpreter's extent are the
** object registry's (objects.c); the DWARF call-frame interpreter that
** steps from one frame to its caller is cfi.c.
**
** ljp_native_capture runs in signal context: no malloc, no locks, no
** stdio, no libc call but the loader's lookup below, bounded work (at
** most LJP_NATIVE_MAX frames, each step bounded by cfi.c), and every
** skipped walk is counted. It walks the
** C frames above the Lua code from the signal's ucontext and stops at the
** first frame of LuaJIT's interpreter or of compiled trace code (machine
** code that belongs to no loaded object): the Lua side of the stack is
** read at the safe point.
**
** What it reads: the unwind tables (.eh_frame_hdr, .eh_frame) of objects
** in the registry's snapshot, bounded by their mapped segments, and the
** profiled thread's stack, bounded by the thread's stack as learnt at
** start (pthread_getattr_np) and by the signal-time stack pointer. It
** steps only from a frame whose PC lies in a span of the snapshot; a
** frame anywhere else ends the walk (counted as truncated). The handler
** skips the walk (counted) while the loader is changing its list of
** objects, and whenever an object whose unwind table it is about to read
** is no longer the one the snapshot copied (glibc's _dl_find_object,
** through os.h, lock-free and async-signal-safe by design, the one call
** into libc; or,
** where it cannot tell, the loader's list read back through
** process_vm_readv). The whole walk is one epoch section: the snapshot is
** not freed under it. A per-context flag guards against a nested walk.
** x86-64 only: elsewhere native capture is off with one notice.
*/
#define _GNU_SOURCE
#include <lauxlib.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "ljp.h"
#include "cfi.h"
#include "codemap.h"
#include "objects.h"
#include "unwind.h"

static pthread_mutex_t uw_mu = PTHREAD_MUTEX_INITIALIZER;
static int uw_status;       /* 0 not set up, 1 ready, -1 unavailable */
static char uw_why[160];

/* -- Finding the interpreter ------------------------------------------- */

/* A lua_CFunction called from Lua: the code it returns to is LuaJIT's
** interpreter, whose code is one unwind entry (FDE); every call of a C
** function from interpreted code returns into it. */
static __attribute__((noinline)) int interp_probe(lua_State *L)
{
  uintptr_t ra = (uintptr_t)__builtin_extract_return_addr(
      __builtin_return_address(0));
  uintptr_t lo, hi;
  if (ra && ljp_objects_proc(ra - 1, &lo, &hi)) {
    lua_pushnumber(L, (lua_Number)ra);
    lua_pushnumber(L, (lua_Number)lo);
    lua_pushnumber(L, (lua_Number)hi);
  } else {
    lua_pushnil(L);
    lua_pushnil(L);
    lua_pushnil(L);
  }
  return 3;
}

static int find_interp(lua_State *L)
{
  uintptr_t ip, lo, hi;
  int top = lua_gettop(L), ok = 0;
  ljp_objects_refresh();  /* a snapshot to look the entry up in */
  /* Called twice, from two call sites: both must return into the same
  ** entry, which must lie in LuaJIT's object (the registry checks). */
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
          hi == (uintptr_t)lua_tonumber(L, -1) && ip > lo && ip <= hi &&
          hi - lo >= 1024 && hi - lo <= (4u << 20) &&
          ljp_objects_set_interp(lo, hi) == 0)
        ok = 1;
    }
  }
  lua_settop(L, top);
  return ok;
}

/* The calling thread's stack [lo, hi); 0, or -1 unknown. */
static int stack_bounds(uintptr_t *lo, uintptr_t *hi)
{
  pthread_attr_t a;
  void *addr = NULL;
  size_t size = 0;
  int rc;
  if (pthread_getattr_np(pthread_self(), &a) != 0) return -1;
  rc = pthread_attr_getstack(&a, &addr, &size);
  pthread_attr_destroy(&a);
  if (rc != 0 || !addr || !size) return -1;
  *lo = (uintptr_t)addr;
  *hi = (uintptr_t)addr + size;
  return 0;
}

/* Normal context, on the thread that will be profiled, before its timer
** starts. Returns 0 when native stacks can be captured; otherwise -1 and
** why in *why (said once per process by the caller). */
int ljp_native_setup(ljp_ctx *ctx, lua_State *L, const char **why)
{
  int rc;
  uintptr_t lo = 0, hi = 0;
  pthread_mutex_lock(&uw_mu);
  if (uw_status == 0) {
#if defined(__x86_64__)
    if (!find_interp(L)) {
      uw_status = -1;
      snprintf(uw_why, sizeof(uw_why), "LuaJIT's interpreter code was not "
               "found from the unwind entry of a C function's caller");
    } else {
      uw_status = 1;
    }
#else
    (void)L;
    uw_status = -1;
    snprintf(uw_why, sizeof(uw_why), "native stacks are not supported on "
             "this architecture (x86-64 only)");
#endif
  }
  rc = uw_status == 1 ? 0 : -1;
  if (rc == 0 && stack_bounds(&lo, &hi) != 0) {
    rc = -1;
    snprintf(uw_why, sizeof(uw_why), "this thread's stack bounds are "
             "unknown (pthread_getattr_np failed)");
  }
  if (rc == 0) {
    ctx->native_stk_lo = lo;
    ctx->native_stk_hi = hi;
  } else if (why) {
    *why = uw_why;
  }
  pthread_mutex_unlock(&uw_mu);
  return rc;
}

/* Normal context: pick up libraries loaded or unloaded. */
void ljp_native_refresh(void)
{
  if (uw_status == 1) ljp_objects_refresh();
}

/* -- Capture (signal context) --------------------------------------------- */

static int is_vm(const ljp_span *e)
{
  return e->kind == LJP_SPAN_VM || e->kind == LJP_SPAN_INTERP;
}

/* The x86-64 red zone: a leaf may keep data up to 128 bytes below rsp
** (the kernel put the signal frame below it, so it is mapped). */
#define RED_ZONE 128

/* Before a walk reads the unwind table of e's object (lookup in it): is
** that object still the one the snapshot copied? One lock-free lookup per
** object (ljp_objects_current), the walk's first four objects remembered
** in cur; where that cannot tell, the loader's whole
** list read back once per walk (ljp_objects_unchanged). */
typedef struct walk_objs {
  uint32_t ok[4];     /* objects found current in this walk */
  int nok;
  int list;           /* the whole list: 0 not read, 1 same, -1 changed */
} walk_objs;

static int still_there(const ljp_objsnap *m, const ljp_span *e,
                       uintptr_t lookup, walk_objs *cur)
{
  int i, c;
  for (i = 0; i < cur->nok; i++)
    if (cur->ok[i] == e->obj) return 1;
  c = ljp_objects_current(m, e, lookup);
  if (c < 0) {
    if (!cur->list) cur->list = ljp_objects_unchanged(m) ? 1 : -1;
    c = cur->list > 0;
  }
  if (c && cur->nok < 4) cur->ok[cur->nok++] = e->obj;
  return c;
}

/* One more function into a stack's hash (order matters). */
static inline uint64_t fhash(uint64_t h, uintptr_t fn)
{
  h ^= (uint64_t)fn + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  return h * 0xff51afd7ed558ccdull;
}

#define QUIET_STEPS 8   /* frames a walk for *tret alone may pass */

static int capture(ljp_ctx *ctx, const ljp_objsnap *m, const ljp_regs *at,
                   uintptr_t pc,
                   int vmstate, uintptr_t *out, uint8_t *flags,
                   uintptr_t *tret, uint64_t *funcs, uintptr_t *leaf)
{
  const ljp_span *e, *seen = NULL;
  const ljp_ehtab *eh = NULL;
  ljp_regs regs;
  ljp_stack st;
  walk_objs cur = {{0}, 0, 0};
  uintptr_t lookup = pc, sp;
  uint64_t fsum = 0x9e3779b97f4a7c15ull;
  int n = 0, vm, sig = 0, quiet = 0;
  if (!m) return 0;
  if (!(e = ljp_objects_find(m, pc))) {
    if (ljp_codemap_classify(&ctx->map, pc, &(int32_t){0}) == 'C') {
      /* an object loaded since the last refresh (at the next safe point) */
      *flags = LJP_NATIVE_TRUNCATED;
      atomic_fetch_add_explicit(&ctx->n_native_truncated, 1,
                                memory_order_relaxed);
    }
    return 0;  /* otherwise trace code: nothing native on top */
  }
  if (e->kind == LJP_SPAN_INTERP) return 0;  /* the interpreter */
  /* Elsewhere in LuaJIT's own code, the interpreter's and the compiler's
  ** helpers have only LuaJIT frames above the Lua code, which are not
  ** shown: no walk. In C (a C module calling lua_* functions) and in the
  ** GC (which such a call may start), the walk reaches the caller. */
  if (is_vm(e) && vmstate != 'C' && vmstate != 'G') {
    if (vmstate != 'N') return 0;
    quiet = 1;  /* walked only to the trace that called it: *tret */
  }
  if (ctx->native_inside || _r_debug.r_state != RT_CONSISTENT ||
      !still_there(m, e, pc, &cur)) {
    /* a walk already under way on this thread, the loader changing the
    ** list of objects, or the leaf's object no longer the snapshot's (a
    ** library unloaded, perhaps another mapped in its place): no walk
    ** until the next safe point has registered the change. */
    atomic_fetch_add_explicit(&ctx->n_native_skipped, 1,
                              memory_order_relaxed);
    *flags = LJP_NATIVE_SKIPPED;
    return 0;
  }
  ctx->native_inside = 1;
  atomic_signal_fence(memory_order_seq_cst);
  atomic_fetch_add_explicit(&ctx->n_native_unwinds, 1, memory_order_relaxed);
  vm = is_vm(e);
  out[n++] = pc;
  regs = *at;
  /* The stack a walk may read: from the interrupted stack pointer (less
  ** the red zone) to the end of the thread's stack. An interrupted
  ** stack pointer elsewhere (an alternate signal stack, a coroutine
  ** library's stack) leaves nothing readable: the walk is truncated. */
  sp = regs.r[LJP_CFI_RSP];
  st.lo = st.hi = 0;
  if (sp >= ctx->native_stk_lo + RED_ZONE && sp < ctx->native_stk_hi) {
    st.lo = sp - RED_ZONE;
    st.hi = ctx->native_stk_hi;
  }
  for (;;) {
    uintptr_t ip, fn = 0;
    /* (a frame in the span of the one before: its object is current and
    ** its unwind table known) */
    if (n > 1 && e != seen && !still_there(m, e, lookup, &cur)) {
      /* a caller's object gone since the snapshot: nothing of this walk */
      atomic_fetch_add_explicit(&ctx->n_native_skipped, 1,
                                memory_order_relaxed);
      *flags = LJP_NATIVE_SKIPPED;
      n = vm = 0;
      break;
    }
    if (quiet && n > QUIET_STEPS) break;
    if (n == LJP_NATIVE_MAX) {  /* (LJP_NATIVE_MAX > 1: the leaf is set) */
      *flags = LJP_NATIVE_TRUNCATED;
      fsum = fhash(fsum, out[n - 1]);
      leaf[1] = out[n - 1];
      break;
    }
    /* (the step finds the function frame n - 1 lies in: what a full ring
    ** merges ticks by, ring.h) */
    if (e != seen) {
      eh = ljp_objects_ehtab(m, e);
      seen = e;
    }
    if (ljp_cfi_step(eh, &regs, lookup, &st, m->dlgen, &sig,
                     &fn) != LJP_CFI_OK) {
      *flags = LJP_NATIVE_TRUNCATED;
      fsum = fhash(fsum, fn ? fn : out[n - 1]);
      if (n == 1) leaf[0] = fn ? fn : pc;
      leaf[1] = fn ? fn : out[n - 1];
      break;
    }
    fsum = fhash(fsum, fn ? fn : out[n - 1]);
    if (n == 1) leaf[0] = fn ? fn : pc;
    leaf[1] = fn ? fn : out[n - 1];
    ip = regs.r[LJP_CFI_RA];
    /* A return address: the call is the instruction before it (but a
    ** signal frame's caller was interrupted at ip itself). */
    lookup = sig ? ip : ip - 1;
    if (lookup < e->lo || lookup >= e->hi)  /* (spans are disjoint) */
      e = ljp_objects_find(m, lookup);
    if (!e) {
      /* Code of no loaded object: a trace's machine code (or other
      ** generated code) called this C code. */
      if (ljp_codemap_classify(&ctx->map, ip, &(int32_t){0}) == 'C')
        *flags = LJP_NATIVE_TRUNCATED;  /* an object we have not seen */
      else
        *tret = ip;
      break;
    }
    if (e->kind == LJP_SPAN_INTERP) {  /* called from the interpreter */
      *flags = LJP_NATIVE_FROM_INTERP;
      break;
    }
    vm |= is_vm(e);
    out[n++] = ip;
  }
  if (quiet) {                     /* no native frame shown, as before */
    n = vm = 0;
    *flags = 0;
    leaf[0] = leaf[1] = 0;
  }
  if (vm) *flags |= LJP_NATIVE_VM;
  *funcs = n ? fsum : 0;
  if (*flags & LJP_NATIVE_TRUNCATED)
    atomic_fetch_add_explicit(&ctx->n_native_truncated, 1,
                              memory_order_relaxed);
  atomic_fetch_add_explicit(&ctx->n_native_frames, (uint64_t)n,
                            memory_order_relaxed);
  atomic_signal_fence(memory_order_seq_cst);
  ctx->native_inside = 0;
  return n;
}

int ljp_native_capture(ljp_ctx *ctx, const ljp_regs *regs, uintptr_t pc,
                       int vmstate,
                       uintptr_t *out, uint8_t *flags, uintptr_t *tret,
                       uint64_t *funcs, uintptr_t *leaf)
{
  int n, t;
  *flags = 0;
  *tret = 0;
  *funcs = 0;
  leaf[0] = leaf[1] = 0;
  /* One epoch section for the whole walk: the snapshot and the objects
  ** it points to stay allocated until it ends. */
  if ((t = ljp_epoch_enter()) < 0) {
    atomic_fetch_add_explicit(&ctx->n_native_skipped, 1,
                              memory_order_relaxed);
    *flags = LJP_NATIVE_SKIPPED;
    return 0;
  }
  n = capture(ctx, ljp_objects_snap(), regs, pc, vmstate, out, flags, tret,
              funcs, leaf);
  ljp_epoch_leave(t);
  return n;
}
