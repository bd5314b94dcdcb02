/*
** VM probe: where does this LuaJIT keep the few private fields that tell
** exactly what the VM is doing? Learnt at run time, validated, or not used.
**
** The signal handler (ljp_vm_read, signal context) reads:
**   g->vmstate   the built-in profiler's source of truth: a trace number
**                (>= 0) while compiled code runs, else ~state for the
**                interpreter, C functions, GC, trace exits and the JIT
**   g->cur_L     the running lua_State, then its L->base and the frame's
**                function slot, then GCfuncC.f: the C function running
** and safepoint.c writes g->hookcount to hold back an armed count hook
** while the trace recorder runs (a hook call would abort the trace).
**
** Nothing is taken from LuaJIT's headers. Each offset is found by
** observing the VM in known states and must be the only candidate:
**   G        the lua_State word pointing at memory that holds the
**            allocator function and data lua_getallocf returns
**   vmstate  the int32 of G that reads -2 (~C) inside a lua_CFunction
**            called from Lua, on the main thread and in a coroutine, and
**            -1 (~INTERP) inside a count hook
**   cur_L    the word of G that equals the running thread in both calls
**   base     the lua_State word pointing just above a slot that holds the
**            probe function itself (1 or 2 slots below: the frame layout),
**            followed by the word lua_gettop slots above it (L->top)
**   f        the word of that function object equal to the probe's entry
**   ffid     the byte of a function object that is 0 for two Lua
**            functions, 1 for two plain C functions and > 1, differing,
**            for print and type: the handler names only C functions
**   hookcount the int32 pair (countdown, start) lua_sethook sets, seen
**            with two different counts
** and the whole chain is replayed in a coroutine, where it must lead back
** to the probe function again. Last, L->cframe (learn_cframe): NULL while
** no call into the VM is active on a thread, which tells a tick in the
** host's own code, after its Lua call returned or its coroutine yielded
** (ljp_vm_no_call), from one under a Lua call; unproven, such ticks keep
** the old behaviour (stats: host_detect false). And g->mainthref
** (learn_mainth, in a fresh luaL_newstate): a tick is the host's only when
** the main thread has no call active either (a coroutine an error is
** unwinding out of has L->cframe NULL while cur_L still names it);
** unproven, cur_L alone decides.
**
** One more field is learnt later, from real trace events (traces.c): the
** trace compiler's state (jit_State.state, which lies after G), the int32
** that holds one busy value (with the "active" bit 0x10) in every "start"
** event, another in every "stop" event, and 0 at safe points while
** nothing records. With it the
** handler never arms while a trace is being started: a hook change would
** abort it. Anything unproven stays off and the VM
** state falls back to the program counter (codemap.c), coarser but never
** wrong; one notice line says so. LJPROF_VMSTATE=pc forces the fallback.
**
** Memory of uncertain validity is read with ljp_peek (os.h; on Linux
** process_vm_readv on ourselves, os_linux.c): a bad address fails instead
** of faulting. Probing runs once
** per process, in normal context, under a mutex.
*/
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <lauxlib.h>

#include "vmprobe.h"

ljp_vmlayout ljp_vml;

static pthread_mutex_t probe_mu = PTHREAD_MUTEX_INITIALIZER;
static int probe_done;

/* -- Fault-safe reads (async-signal-safe) ---------------------------------- */

/* ljp_peek and ljp_self_pid: the OS file (os.h, os_linux.c). */

static int peek_word(uintptr_t src, uintptr_t *v)
{
  return ljp_peek(v, src, sizeof(*v));
}

/* -- Decoding a stack slot ------------------------------------------------- */

/* The GC object of a function TValue, or 0. Two encodings exist: 64-bit
** GC references (type in the top 17 bits, LJ_TFUNC = ~8) and 32-bit ones
** (low word the reference, high word the type tag ~8). */
static inline uintptr_t tv_func(uint64_t tv, int gc64)
{
  if (gc64)
    return (tv >> 47) == 0x1fff7 ? (uintptr_t)(tv & (((uint64_t)1 << 47) - 1))
                                 : 0;
  return (uint32_t)(tv >> 32) == 0xfffffff7u ? (uintptr_t)(uint32_t)tv : 0;
}

/* -- Signal context -------------------------------------------------------- */

/* The C function running in state C: cur_L -> base -> frame function ->
** its f field; 0 if it cannot be read. Signal context. */
uintptr_t ljp_vm_cfunc(uintptr_t g)
{
  const ljp_vmlayout *v = &ljp_vml;
  uintptr_t L, base, fn, f;
  uint64_t tv;
  unsigned char obj[LJP_FNOBJ];
  if (!v->cfunc_ok || !g) return 0;
  L = v->curl_size == 8 ? *(volatile uintptr_t *)(g + v->g_curl)
                        : *(volatile uint32_t *)(g + v->g_curl);
  if (!L) return 0;  /* cur_L is a live thread or NULL */
  base = *(volatile uintptr_t *)(L + v->l_base);
  /* The slot may lie in a stack being reallocated: peek. The function
  ** must be a C function: a Lua function returning to C sets the state
  ** before its frame is gone. */
  if (ljp_peek(&tv, base - 8 * (uintptr_t)v->func_slot, 8) == 0 &&
      (fn = tv_func(tv, v->gc64)) != 0 &&
      ljp_peek(obj, fn, (size_t)v->fn_f + sizeof(f)) == 0 &&
      obj[v->fn_ffid] != 0) {
    memcpy(&f, obj + v->fn_f, sizeof(f));
    return f;
  }
  return 0;
}

/* A thread's L->cframe: 1 NULL, 0 not, -1 unreadable. */
static inline int cframe_null(uintptr_t L, int peek)
{
  uintptr_t cf;
  if (!peek) return *(volatile uintptr_t *)(L + ljp_vml.l_cframe) == 0;
  return peek_word(L + (uintptr_t)ljp_vml.l_cframe, &cf) == 0 ? cf == 0 : -1;
}

/* No call on cur_L, and (when the main thread is known) none on the main
** thread either: LuaJIT clears a coroutine's L->cframe while an error
** unwinds out of it, with cur_L still naming it (lj_err.c err_unwind, the
** resume frame), until its resumer takes over; a Lua program runs under a
** call on the main thread (luajit's lua_cpcall), so that tick is not the
** host's. Hosts that run Lua only in threads of their own (nginx) keep
** the main thread idle. The main thread lives as long as G: no peek. */
int ljp_vm_no_call(uintptr_t g, int peek)
{
  const ljp_vmlayout *v = &ljp_vml;
  uintptr_t L, M;
  int r;
  if (!v->cframe_ok || !v->curl_size || !g) return -1;
  L = v->curl_size == 8 ? *(volatile uintptr_t *)(g + v->g_curl)
                        : *(volatile uint32_t *)(g + v->g_curl);
  if (!L) return 1;  /* cur_L is a live thread or NULL (freed: none runs) */
  if ((r = cframe_null(L, peek)) != 1 || !v->mainth_ok) return r;
  M = v->curl_size == 8 ? *(volatile uintptr_t *)(g + v->g_mainth)
                        : *(volatile uint32_t *)(g + v->g_mainth);
  if (!M || M == L) return 1;
  return cframe_null(M, peek);
}

int ljp_vm_read(uintptr_t g, int32_t *trace, uintptr_t *cfunc, int want_cf)
{
  const ljp_vmlayout *v = &ljp_vml;
  int32_t st;
  *trace = 0;
  *cfunc = 0;
  if (!v->vmstate_ok || !g) return 0;
  st = *(volatile int32_t *)(g + v->g_vmstate);
  if (st >= 0) {
    if (st > 65535) return 0;         /* not a trace number: distrust */
    *trace = st;
    return 'N';
  }
  switch (st) {
  case -1: return 'I';
  case -3: return 'G';
  case -4: case -5: case -6: case -7: return 'J'; /* exit, record, opt, asm */
  case -2: break;
  default: return 0;
  }
  if (want_cf) *cfunc = ljp_vm_cfunc(g);
  return 'C';
}

/* -- Probing (normal context) ---------------------------------------------- */

#define GSNAP 2048   /* bytes of global_State examined */
#define LSNAP 160    /* bytes of lua_State examined */

typedef struct probe_run {
  uintptr_t g;
  unsigned char snap_c[GSNAP], snap_co[GSNAP], snap_h[GSNAP];
  uintptr_t L_c, L_co;
  int have_c, have_co, have_h;
  int co_chain_ok;       /* chain replayed inside the coroutine */
  int calls;
  uintptr_t cf_in[LSNAP / 8]; /* a thread's words inside cframe_cf */
  uintptr_t cf_sp;       /* an address in cframe_cf's own frame */
  int cf_have, cf_nocall;
  unsigned char snap_m[GSNAP]; /* a fresh state's G, a coroutine running */
  uintptr_t g2;          /* that state's G */
  int mt_have, mt_in;    /* snap_m taken; ljp_vm_no_call under a call */
  char why[96];
} probe_run;

static probe_run *pr;  /* the running probe (under probe_mu) */

static int snap_g(unsigned char *dst)
{
  return ljp_peek(dst, pr->g, GSNAP);
}

static uintptr_t read_g_word(const unsigned char *snap, size_t off, int size)
{
  if (size == 8) {
    uint64_t v;
    memcpy(&v, snap + off, 8);
    return (uintptr_t)v;
  } else {
    uint32_t v;
    memcpy(&v, snap + off, 4);
    return v;
  }
}

static int probe_cfunc(lua_State *L);

/* A second plain C function for the function-kind check; never called. */
static int probe_other(lua_State *L)
{
  (void)L;
  return 0;
}

/* Find L->base, the function slot, GCfuncC.f and the ffid byte from
** inside probe_cfunc; its arguments: the probe closure itself, two
** numbers, a Lua function, rawequal, a Lua function, type, a number and a
** second plain C function. */
static void learn_frame(lua_State *L)
{
  ljp_vmlayout *v = &ljp_vml;
  uintptr_t want = (uintptr_t)lua_topointer(L, 1), words[LSNAP / 8];
  size_t o;
  int found = 0, gc64, slot;
  if (ljp_peek(words, (uintptr_t)L, sizeof(words)) != 0) return;
  for (o = 0; o + 1 < LSNAP / 8; o++) {
    /* L->top follows L->base, lua_gettop slots above it: this keeps
    ** pointers near the frame held by other objects (an open upvalue
    ** next to the lua_State) from counting. */
    if (words[o + 1] - words[o] != 8 * (uintptr_t)lua_gettop(L)) continue;
    for (gc64 = 1; gc64 >= 0; gc64--) {
      for (slot = 1; slot <= 2; slot++) {
        uint64_t tv;
        if (ljp_peek(&tv, words[o] - 8 * (uintptr_t)slot, 8) != 0) continue;
        if (tv_func(tv, gc64) == want) {
          found++;
          v->l_base = (ptrdiff_t)(o * 8);
          v->gc64 = gc64;
          v->func_slot = slot;
        }
      }
    }
  }
  if (found != 1) {
    snprintf(pr->why, sizeof(pr->why), "%d candidates for the frame base",
             found);
    return;
  }
  found = 0;
  for (o = 0; o + sizeof(uintptr_t) <= LJP_FNOBJ; o += sizeof(uintptr_t)) {
    uintptr_t w;
    if (peek_word(want + o, &w) == 0 && w == (uintptr_t)probe_cfunc) {
      found++;
      v->fn_f = (ptrdiff_t)o;
    }
  }
  if (found != 1) {
    snprintf(pr->why, sizeof(pr->why), "%d candidates for the C entry",
             found);
    return;
  }
  {
    /* Two objects of each kind: the probe and another plain C function
    ** (ffid 1), two Lua functions (0), rawequal and type (two different
    ** ffids > 1). One pair per kind keeps a byte that only happens to
    ** match (a GC mark) from counting. */
    static const int idx[6] = {1, 9, 4, 6, 5, 7};
    unsigned char b[6][16];
    int k, ok = 1;
    found = 0;
    for (k = 0; k < 6 && ok; k++)
      ok = ljp_peek(b[k], (uintptr_t)lua_topointer(L, idx[k]), 16) == 0;
    for (o = 0; ok && o < 16 && (ptrdiff_t)o < v->fn_f; o++) {
      if (b[0][o] == 1 && b[1][o] == 1 && b[2][o] == 0 && b[3][o] == 0 &&
          b[4][o] > 1 && b[5][o] > 1 && b[4][o] != b[5][o]) {
        found++;
        v->fn_ffid = (ptrdiff_t)o;
      }
    }
    if (found != 1)
      snprintf(pr->why, sizeof(pr->why), "%d candidates for the function "
               "kind", found);
    else
      v->frame_ok = 1;
  }
}

static int probe_cfunc(lua_State *L)
{
  if (!pr) return 0;
  pr->calls++;
  if (pr->calls == 1) {          /* on the probing thread */
    pr->have_c = snap_g(pr->snap_c) == 0;
    pr->L_c = (uintptr_t)L;
    learn_frame(L);
  } else if (pr->calls == 2) {   /* in a coroutine */
    pr->have_co = snap_g(pr->snap_co) == 0;
    pr->L_co = (uintptr_t)L;
  } else if (pr->calls == 3) {   /* coroutine again: replay the chain */
    int32_t tr;
    uintptr_t cf = 0;
    int st = ljp_vm_read(pr->g, &tr, &cf, 1);
    pr->co_chain_ok = st == 'C' && cf == (uintptr_t)probe_cfunc;
  }
  return 0;
}

static void probe_hook(lua_State *L, lua_Debug *ar)
{
  (void)ar;
  if (pr && !pr->have_h) pr->have_h = snap_g(pr->snap_h) == 0;
  lua_sethook(L, NULL, 0, 0);
}

/* Find the G pointer's offset in lua_State. */
static int learn_g(lua_State *L)
{
  void *ud;
  lua_Alloc af = lua_getallocf(L, &ud);
  uintptr_t words[LSNAP / 8];
  size_t o, k;
  int found = 0;
  if (ljp_peek(words, (uintptr_t)L, sizeof(words)) != 0) return -1;
  for (o = 0; o < LSNAP / 8; o++) {
    uintptr_t g[8];
    if (ljp_peek(g, words[o], sizeof(g)) != 0) continue;
    for (k = 0; k + 1 < 8; k++) {
      if (g[k] == (uintptr_t)af && g[k + 1] == (uintptr_t)ud) {
        found++;
        ljp_vml.l_glref = (ptrdiff_t)(o * 8);
        break;
      }
    }
  }
  if (found != 1) {
    snprintf(pr->why, sizeof(pr->why), "%d candidates for the global state",
             found);
    return -1;
  }
  pr->g = words[ljp_vml.l_glref / 8];
  return 0;
}

/* Find hookcount: set two different counts, look for (count, count). */
static void learn_hookcount(lua_State *L)
{
  static const int32_t counts[2] = {0x35a5a5, 0x1c3c3c};
  unsigned char *snap = malloc(GSNAP);
  int cand[GSNAP / 4], i, n = 0;
  size_t o;
  if (!snap) return;
  for (o = 0; o + 8 <= GSNAP; o += 4) cand[o / 4] = 1;
  for (i = 0; i < 2; i++) {
    lua_sethook(L, probe_hook, LUA_MASKCOUNT, counts[i]);
    if (snap_g(snap) != 0) { n = -1; break; }
    for (o = 0; o + 8 <= GSNAP; o += 4) {
      int32_t a, b;
      memcpy(&a, snap + o, 4);
      memcpy(&b, snap + o + 4, 4);
      if (a != counts[i] || b != counts[i]) cand[o / 4] = 0;
    }
  }
  lua_sethook(L, NULL, 0, 0);
  free(snap);
  if (n < 0) return;
  for (o = 0; o + 8 <= GSNAP; o += 4) {
    if (cand[o / 4]) {
      n++;
      ljp_vml.g_hookcount = (ptrdiff_t)o;
    }
  }
  ljp_vml.hookcount_ok = n == 1;
}

static void learn_g_fields(void)
{
  ljp_vmlayout *v = &ljp_vml;
  size_t o;
  int n = 0, size;
  for (o = 0; o + 4 <= GSNAP; o += 4) {
    int32_t c, co, h;
    memcpy(&c, pr->snap_c + o, 4);
    memcpy(&co, pr->snap_co + o, 4);
    memcpy(&h, pr->snap_h + o, 4);
    if (c == -2 && co == -2 && h == -1) {
      n++;
      v->g_vmstate = (ptrdiff_t)o;
    }
  }
  if (n != 1) {
    snprintf(pr->why, sizeof(pr->why), "%d candidates for the VM state", n);
    return;
  }
  v->vmstate_ok = 1;
  for (size = 8; size >= 4; size -= 4) {
    n = 0;
    for (o = 0; o + (size_t)size <= GSNAP; o += (size_t)size) {
      if (read_g_word(pr->snap_c, o, size) == pr->L_c &&
          read_g_word(pr->snap_co, o, size) == pr->L_co) {
        n++;
        v->g_curl = (ptrdiff_t)o;
      }
    }
    if (n == 1) { v->curl_size = size; break; }
  }
  if (n != 1)
    snprintf(pr->why, sizeof(pr->why), "%d candidates for the running "
             "thread", n);
}

/* -- L->cframe: is a Lua call active on a thread? -------------------------- */

/* Called through lua_pcall and lua_resume: the thread's words, where its
** own frame lies, and what ljp_vm_no_call says (once learnt); with a true
** argument it yields (a C function may: LuaJIT's lua_yield). */
static int cframe_cf(lua_State *L)
{
  volatile char here = 0;
  if (!pr) return 0;
  pr->cf_have = ljp_peek(pr->cf_in, (uintptr_t)L, sizeof(pr->cf_in)) == 0;
  pr->cf_sp = (uintptr_t)&here;
  pr->cf_nocall = ljp_vml.cframe_ok ? ljp_vm_no_call(pr->g, 0) : -2;
  if (lua_toboolean(L, 1)) return lua_yield(L, 0);
  return 0;
}

/* Find L->cframe, the end of the chain of C frames that entered the VM
** on a thread (lua_call, lua_pcall, lua_resume; NULL when none is
** active): the one pointer-sized word of lua_State that
**   - reads 0 in a new thread, after its C function yielded to
**     lua_resume, and after it returned (the coroutine is dead);
**   - inside a C function run by lua_pcall (on the probing thread) or by
**     lua_resume (a new thread) points into the C stack between that
**     function's frame and ours (the VM entry's frame; resume adds flag
**     bits below 8), and after lua_pcall reads what it read before.
** Then ljp_vm_no_call is replayed: 0 inside both calls, 1 after the
** coroutine's (cur_L is the dead coroutine) and after the thread's call
** returned here (cur_L is that thread, idle). Normal context. */
static void learn_cframe(lua_State *th)
{
  enum { N = LSNAP / 8 };
  volatile char here = 0;
  uintptr_t outer = (uintptr_t)&here, pre[N], post[N], fresh[N], yl[N],
            dead[N], in1[N], in2[N], sp1, sp2;
  int o, n = 0, nc1, nc2, after_pcall, after_co;
  lua_State *co;
  const char *why = NULL;
  lua_settop(th, 0);
  pr->cf_have = 0;
  if (ljp_peek(pre, (uintptr_t)th, sizeof(pre)) != 0) return;
  lua_pushcfunction(th, cframe_cf);
  if (lua_pcall(th, 0, 0, 0) != 0 || !pr->cf_have) {
    why = "lua_pcall probe failed";
    goto out;
  }
  memcpy(in1, pr->cf_in, sizeof(in1));
  sp1 = pr->cf_sp;
  if (ljp_peek(post, (uintptr_t)th, sizeof(post)) != 0) goto out;
  co = lua_newthread(th);
  if (ljp_peek(fresh, (uintptr_t)co, sizeof(fresh)) != 0) goto out;
  lua_pushcfunction(co, cframe_cf);
  lua_pushboolean(co, 1);
  pr->cf_have = 0;
  if (lua_resume(co, 1) != LUA_YIELD || !pr->cf_have) {
    why = "lua_resume probe did not yield";
    goto out;
  }
  memcpy(in2, pr->cf_in, sizeof(in2));
  sp2 = pr->cf_sp;
  if (ljp_peek(yl, (uintptr_t)co, sizeof(yl)) != 0) goto out;
  if (lua_resume(co, 0) != 0 || lua_status(co) != 0) {
    why = "lua_resume probe did not end";
    goto out;
  }
  if (ljp_peek(dead, (uintptr_t)co, sizeof(dead)) != 0) goto out;
  for (o = 0; o < N; o++) {
    if ((ptrdiff_t)o * 8 == ljp_vml.l_base ||
        (ptrdiff_t)o * 8 == ljp_vml.l_glref)
      continue;
    if (fresh[o] || yl[o] || dead[o] || post[o] != pre[o] ||
        in1[o] == pre[o] || !(in1[o] > sp1 && in1[o] < outer) ||
        !((in2[o] & ~(uintptr_t)7) > sp2 && (in2[o] & ~(uintptr_t)7) < outer))
      continue;
    n++;
    ljp_vml.l_cframe = (ptrdiff_t)o * 8;
  }
  if (n != 1) {
    snprintf(pr->why, sizeof(pr->why), "%d candidates for the C frame "
             "chain", n);
    return;
  }
  /* Replay the handler's reads. */
  ljp_vml.cframe_ok = 1;
  after_co = ljp_vm_no_call(pr->g, 0);        /* cur_L: the dead coroutine */
  lua_settop(th, 0);
  lua_pushcfunction(th, cframe_cf);
  pr->cf_have = 0;
  pr->cf_nocall = -2;
  if (lua_pcall(th, 0, 0, 0) != 0 || !pr->cf_have) {
    why = "lua_pcall probe failed";
    goto out;
  }
  nc1 = pr->cf_nocall;
  after_pcall = ljp_vm_no_call(pr->g, 0);     /* cur_L: th, idle */
  co = lua_newthread(th);
  lua_pushcfunction(co, cframe_cf);
  pr->cf_have = 0;
  pr->cf_nocall = -2;
  if (lua_resume(co, 0) != 0 || !pr->cf_have) {
    why = "lua_resume probe failed";
    goto out;
  }
  nc2 = pr->cf_nocall;
  if (nc1 != 0 || nc2 != 0 || after_pcall != 1 || after_co != 1)
    why = "the C frame chain could not be read back";
out:
  if (why) {
    ljp_vml.cframe_ok = 0;
    snprintf(pr->why, sizeof(pr->why), "%s", why);
  }
  lua_settop(th, 0);
}

/* -- g->mainthref: is a Lua call active on the main thread? --------------- */

/* Run by lua_resume in a coroutine of a fresh state: its G's words. */
static int mainth_snap(lua_State *L)
{
  (void)L;
  if (pr) pr->mt_have = ljp_peek(pr->snap_m, pr->g2, GSNAP) == 0;
  return 0;
}

static int mainth_nop(lua_State *L)
{
  (void)L;
  return 0;
}

/* Run by lua_pcall on the fresh state's main thread: a coroutine runs a
** C function and returns; cur_L is then that idle, dead coroutine, while
** this call is still active on the main thread. */
static int mainth_outer(lua_State *L)
{
  lua_State *co = lua_newthread(L);
  lua_pushcfunction(co, mainth_nop);
  pr->mt_in = lua_resume(co, 0) == 0 ? ljp_vm_no_call(pr->g2, 0) : -2;
  return 0;
}

/* Find g->mainthref, the state's main thread, in a fresh state (no trace
** recorded there: no stale thread pointer elsewhere in G): the one word of
** its G that names its main thread while a coroutine runs (cur_L names
** the coroutine: checked). Then ljp_vm_no_call is replayed there: 1 after
** the coroutine returned to the idle main thread, 0 after it returned to
** a C function still running under lua_pcall on the main thread; and in
** the probing state the word must name a thread of the same G (the
** probing thread itself when it is the main one). Normal context. */
static void learn_mainth(lua_State *L)
{
  ljp_vmlayout *v = &ljp_vml;
  lua_State *S = luaL_newstate(), *co;
  const char *why = NULL;
  uintptr_t w, gl;
  unsigned char buf[8];
  size_t o;
  int n = 0, idle, ismain;
  if (!S) return;
  if (peek_word((uintptr_t)S + (uintptr_t)v->l_glref, &pr->g2) != 0) {
    why = "fresh state unreadable";
    goto out;
  }
  co = lua_newthread(S);
  lua_pushcfunction(co, mainth_snap);
  pr->mt_have = 0;
  if (lua_resume(co, 0) != 0 || !pr->mt_have ||
      read_g_word(pr->snap_m, (size_t)v->g_curl, v->curl_size) !=
          (uintptr_t)co) {
    why = "fresh state's coroutine probe failed";
    goto out;
  }
  for (o = 0; o + (size_t)v->curl_size <= GSNAP; o += (size_t)v->curl_size) {
    if ((ptrdiff_t)o != v->g_curl &&
        read_g_word(pr->snap_m, o, v->curl_size) == (uintptr_t)S) {
      n++;
      v->g_mainth = (ptrdiff_t)o;
    }
  }
  if (n != 1) {
    snprintf(pr->why, sizeof(pr->why), "%d candidates for the main thread",
             n);
    goto out;
  }
  v->mainth_ok = 1;
  idle = ljp_vm_no_call(pr->g2, 0);  /* cur_L: co, dead; main: idle */
  lua_settop(S, 0);
  lua_pushcfunction(S, mainth_outer);
  pr->mt_in = -2;
  if (lua_pcall(S, 0, 0, 0) != 0 || idle != 1 || pr->mt_in != 0) {
    why = "the main thread's C frame chain could not be read back";
    goto out;
  }
  /* The probing state. */
  ismain = lua_pushthread(L);
  lua_pop(L, 1);
  if (ljp_peek(buf, pr->g + (uintptr_t)v->g_mainth, sizeof(buf)) != 0 ||
      !(w = read_g_word(buf, 0, v->curl_size)) ||
      peek_word(w + (uintptr_t)v->l_glref, &gl) != 0 || gl != pr->g ||
      (ismain && w != (uintptr_t)L))
    why = "the main thread does not match";
out:
  if (why) {
    v->mainth_ok = 0;
    snprintf(pr->why, sizeof(pr->why), "%s", why);
  }
  lua_close(S);
}

/* Call 1 on the probing thread, call 2 in a coroutine. With LuaJIT's own
** coroutine functions: OpenResty's lua-nginx-module keeps them as
** coroutine._create/_resume/_wrap and replaces the public ones with
** versions that yield to nginx (refused in init_worker_by_lua). */
static const char probe_chunk[] =
  "local probe, other = ...\n"
  "probe(probe, 1, 2, function() end, rawequal, function() end, type, 3, "
  "other)\n"
  "local co = coroutine\n"
  "local create, resume = co._create or co.create, co._resume or co.resume\n"
  "resume(create(function() probe(probe, 1, 2) end))\n";
/* Call 3, in a coroutine: the handler's read chain, replayed. */
static const char replay_chunk[] =
  "local probe = ...\n"
  "local wrap = coroutine._wrap or coroutine.wrap\n"
  "wrap(function() probe(probe, 1, 2) end)()\n";

static void run_probe(lua_State *L)
{
  lua_Hook uh = lua_gethook(L);
  int umask = lua_gethookmask(L), ucount = lua_gethookcount(L);
  int top = lua_gettop(L);
  lua_State *th;
  if (learn_g(L) != 0) return;
  learn_hookcount(L);
  th = lua_newthread(L);
  if (luaL_loadbuffer(th, probe_chunk, sizeof(probe_chunk) - 1,
                      "=ljprof-probe") != 0) {
    snprintf(pr->why, sizeof(pr->why), "probe chunk did not load");
    goto out;
  }
  lua_pushcfunction(th, probe_cfunc);
  lua_pushcfunction(th, probe_other);
  /* The count hook fires at the chunk's first instruction: snap_h. */
  lua_sethook(th, probe_hook, LUA_MASKCOUNT, 1);
  if (lua_pcall(th, 2, 0, 0) != 0) {
    snprintf(pr->why, sizeof(pr->why), "probe chunk failed: %s",
             lua_tostring(th, -1) ? lua_tostring(th, -1) : "?");
    goto out;
  }
  if (!pr->have_h) {
    snprintf(pr->why, sizeof(pr->why), "started inside a hook; probed again "
             "at the next start");
    goto out;
  }
  if (!pr->have_c || !pr->have_co || pr->calls != 2) {
    snprintf(pr->why, sizeof(pr->why), "probe did not run (%d calls)",
             pr->calls);
    goto out;
  }
  /* L_c must be the probing thread itself. */
  if (pr->L_c != (uintptr_t)th) {
    snprintf(pr->why, sizeof(pr->why), "probe ran on an unexpected thread");
    goto out;
  }
  learn_g_fields();
  if (ljp_vml.vmstate_ok && ljp_vml.curl_size && ljp_vml.frame_ok) {
    /* Replay the handler's chain in the coroutine (third call). */
    ljp_vml.cfunc_ok = 1;
    pr->calls = 2;
    lua_settop(th, 0);
    if (luaL_loadbuffer(th, replay_chunk, sizeof(replay_chunk) - 1,
                        "=ljprof-probe") == 0) {
      lua_pushcfunction(th, probe_cfunc);
      lua_pcall(th, 1, 0, 0);
    }
    if (!pr->co_chain_ok) {
      ljp_vml.cfunc_ok = 0;
      snprintf(pr->why, sizeof(pr->why), "the running C function could not "
               "be read back");
    }
  }
  if (ljp_vml.vmstate_ok && ljp_vml.curl_size && ljp_vml.frame_ok)
    learn_cframe(th);
  if (ljp_vml.cframe_ok)
    learn_mainth(L);
out:
  lua_sethook(L, uh, umask, ucount);
  lua_settop(L, top);
}

int ljp_vmprobe(lua_State *L)
{
  static int noticed;
  const char *env = getenv("LJPROF_VMSTATE");
  int retry = 0;
  pthread_mutex_lock(&probe_mu);
  if (!probe_done) {
    probe_done = 1;
    if (env && !strcmp(env, "pc")) {
      snprintf(ljp_vml.why, sizeof(ljp_vml.why), "LJPROF_VMSTATE=pc");
    } else if ((pr = calloc(1, sizeof(*pr))) != NULL) {
      run_probe(L);
      snprintf(ljp_vml.why, sizeof(ljp_vml.why), "%s", pr->why);
      /* Started from inside a hook, hooks do not run: try again at the
      ** next start (this run uses the PC). */
      retry = !pr->have_h;
      free(pr);
      pr = NULL;
    }
    if (!ljp_vml.vmstate_ok) {
      memset(&ljp_vml, 0, offsetof(ljp_vmlayout, why));
      probe_done = !retry;
      if (!noticed++)
        fprintf(stderr, "ljprof: notice: LuaJIT's VM state is not readable "
                "here (%s); VM states come from the program counter: GC "
                "and JIT compiler time show as I, C functions are not "
                "named\n", ljp_vml.why[0] ? ljp_vml.why : "unknown layout");
    } else if (!ljp_vml.cfunc_ok) {
      fprintf(stderr, "ljprof: notice: cannot read which C function is "
              "running (%s); C samples are charged to the calling Lua "
              "function\n", ljp_vml.why);
    }
  }
  pthread_mutex_unlock(&probe_mu);
  return ljp_vml.vmstate_ok;
}

uintptr_t ljp_vm_global(lua_State *L)
{
  uintptr_t g;
  void *ud;
  lua_Alloc af;
  if (!ljp_vml.vmstate_ok) return 0;
  /* Re-check per state: its G must hold its own allocator. */
  af = lua_getallocf(L, &ud);
  if (peek_word((uintptr_t)L + (uintptr_t)ljp_vml.l_glref, &g) != 0) return 0;
  {
    uintptr_t w[8];
    int k;
    if (ljp_peek(w, g, sizeof(w)) != 0) return 0;
    for (k = 0; k + 1 < 8; k++)
      if (w[k] == (uintptr_t)af && w[k + 1] == (uintptr_t)ud) return g;
  }
  return 0;
}

/* -- The trace compiler's state, from trace events ------------------------- */

#define JSCAN 4096          /* bytes after G examined */
#define JS_ACTIVE 0x10      /* bit set in every busy state */

/* Per candidate int32: the value seen at "start" and at "stop" events
** (0: not seen yet). The state numbers differ between LuaJIT versions, so
** they are learnt too: each must repeat, both must have the "active" bit,
** and they must differ. */
static struct {
  unsigned char dead[JSCAN / 4];
  int32_t at[2][JSCAN / 4];
  int seen[3], failed, restarts;
} js;

/* Candidates still alive once few remain: each event then reads only
** those words (read before without fault: directly) instead of a 4 KB
** fault-safe snapshot, since learning may go on for a whole run (it needs
** two safe points, and a run may take no sample for a long time) while
** a program compiles tens of thousands of traces. */
#define JS_FEW 64
static int js_alive[JS_FEW], js_nalive = -1;

static void js_check(int i, int32_t v, int event)
{
  if (event == LJP_JS_IDLE) {
    if (v != 0) js.dead[i] = 1;
  } else if (!(v & JS_ACTIVE) || (js.at[event][i] && js.at[event][i] != v)) {
    js.dead[i] = 1;
  } else {
    js.at[event][i] = v;
    if (js.at[0][i] && js.at[0][i] == js.at[1][i]) js.dead[i] = 1;
  }
}

void ljp_vm_learn_jstate(uintptr_t g, int event)
{
  int32_t snap[JSCAN / 4];
  int i, k, n = 0, last = 0;
  if (ljp_vml.jstate_ok || js.failed || !g || event < 0 || event > 2) return;
  if (event == LJP_JS_IDLE && !js.seen[LJP_JS_START]) return;
  if (js_nalive >= 0) {
    for (k = 0; k < js_nalive; k++) {
      i = js_alive[k];
      if (js.dead[i]) continue;
      js_check(i, *(volatile int32_t *)(g + (uintptr_t)i * 4), event);
      if (!js.dead[i]) { n++; last = i; }
    }
  } else {
    if (ljp_peek(snap, g, sizeof(snap)) != 0) { js.failed = 1; return; }
    for (i = 0; i < JSCAN / 4; i++) {
      if (js.dead[i]) continue;
      js_check(i, snap[i], event);
      if (!js.dead[i]) { n++; last = i; }
    }
    if (n <= JS_FEW) {
      js_nalive = 0;
      for (i = 0; i < JSCAN / 4; i++)
        if (!js.dead[i]) js_alive[js_nalive++] = i;
    }
  }
  js.seen[event]++;
  if (n == 0) {
    /* One observation contradicted every candidate, the field's too: an
    ** event can come while the recorder is between states (seen: the
    ** first "start" of a run reading 1). Learn again from scratch, a few
    ** times at most. */
    int restarts = js.restarts + 1;
    memset(&js, 0, sizeof(js));
    js_nalive = -1;
    js.restarts = restarts;
    if (restarts > 8) js.failed = 1;
  } else if (n == 1 && js.seen[0] >= 2 && js.seen[1] >= 2 && js.seen[2] >= 2) {
    ljp_vml.g_jstate = (ptrdiff_t)last * 4;
    atomic_signal_fence(memory_order_seq_cst);
    ljp_vml.jstate_ok = 1;
  }
}

/* -- The trace compiler's state, from a probe loop --------------------------
** luastack.c's FFI probe loop (learn_jit) calls a C function on each
** iteration: interpreted first, then while the recorder records the loop
** (the recorder runs each instruction it records, so the call happens in
** its "recording" state), then from the compiled trace. The state is the
** one int32 that reads 0 at the first call and from the trace, and a busy
** state (the active bit: 0x10 to 0x17) at some call in between. Learnt
** before the first tick, this closes the window the events leave open:
** the recorder starts (trace_start) with the interpreter's VM state, so
** until the state is known a tick there could arm the hook and abort the
** program's first trace. (A field that never reads idle afterwards is
** dropped by the signal handler, see signal.c jit_idle.) */
/* The probe loop calls this about 70 times (interpreted until the loop is
** hot, recording, compiled); most of the 1,024 words read 0 at every call.
** A candidate's mask is all ones, a dead word's 0: words are examined one
** by one only in a group of 16 where a candidate reads non-zero (a scan of
** every word at every call was 0.63 M instructions per start). */
#define JP_GROUP 16
static struct {
  uint32_t live[JSCAN / 4];  /* ~0: still a candidate; 0: dead */
  unsigned char busy[JSCAN / 4];
  int on;
} jp;

void ljp_vm_jstate_probe(uintptr_t g, int first, int compiled)
{
  uint32_t buf[JSCAN / 4];
  const uint32_t *snap = buf;
  int i, k;
  if (ljp_vml.jstate_ok || !g) return;
  if (first) {
    memset(&jp, 0, sizeof(jp));
    memset(jp.live, 0xff, sizeof(jp.live));
    jp.on = 1;
  }
  if (!jp.on) return;
  /* the first call's fault-safe read proves the window readable: the
  ** others read it in place (a 4 KB copy each: 0.03 M a start) */
  if (!first) snap = (const uint32_t *)g;
  else if (ljp_peek_g(buf, g, sizeof(buf)) != 0) { jp.on = 0; return; }
  for (i = 0; i < JSCAN / 4; i += JP_GROUP) {
    uint32_t any = 0;
    for (k = i; k < i + JP_GROUP; k++) any |= snap[k] & jp.live[k];
    if (!any) continue;
    for (k = i; k < i + JP_GROUP; k++) {
      int32_t v = (int32_t)(snap[k] & jp.live[k]);
      if (v == 0) continue;
      if (first || compiled || (v & ~7) != JS_ACTIVE) jp.live[k] = 0;
      else jp.busy[k] = 1;
    }
  }
}

void ljp_vm_jstate_probe_done(void)
{
  int i, n = 0, last = 0;
  if (!jp.on || ljp_vml.jstate_ok) return;
  jp.on = 0;
  for (i = 0; i < JSCAN / 4; i++)
    if (jp.live[i] && jp.busy[i]) { n++; last = i; }
  if (n != 1) return;
  ljp_vml.g_jstate = (ptrdiff_t)last * 4;
  atomic_signal_fence(memory_order_seq_cst);
  ljp_vml.jstate_ok = 1;
}

int ljp_vm_jit_idle(uintptr_t g)
{
  return !ljp_vml.jstate_ok || !g ||
         *(volatile int32_t *)(g + ljp_vml.g_jstate) == 0;
}

int ljp_vm_hookcount_known(void)
{
  return ljp_vml.hookcount_ok;
}

void ljp_vm_jstate_forget(void)
{
  ljp_vml.jstate_ok = 0;
}

int ljp_vm_jstate_known(void)
{
  return ljp_vml.jstate_ok;
}

int ljp_env_is(_Atomic int *cache, const char *var, const char *value)
{
  int c = atomic_load_explicit(cache, memory_order_relaxed);
  if (c < 0) {
    const char *e = getenv(var);
    c = e && !strcmp(e, value);
    atomic_store_explicit(cache, c, memory_order_relaxed);
  }
  return c;
}

int ljp_peek_g(void *dst, uintptr_t g, size_t n)
{
  static uintptr_t read_g;
  static size_t read_n;
  if (g && g == read_g && n <= read_n) {
    memcpy(dst, (const void *)g, n);
    return 0;
  }
  if (ljp_peek(dst, g, n) != 0) return -1;
  read_g = g;
  read_n = n;
  return 0;
}

int32_t ljp_vm_jstate(uintptr_t g)
{
  if (!ljp_vml.jstate_ok || !g) return 0;
  return *(volatile int32_t *)(g + ljp_vml.g_jstate);
}

void ljp_vm_jstate_set(uintptr_t g, int32_t v)
{
  if (ljp_vml.jstate_ok && g)
    *(volatile int32_t *)(g + ljp_vml.g_jstate) = v;
}

/* The count hook's countdown, or -1 when unknown. */
int32_t ljp_vm_hookcount_get(uintptr_t g)
{
  if (!ljp_vml.hookcount_ok || !g) return -1;
  return *(volatile int32_t *)(g + ljp_vml.g_hookcount);
}

/* Hold back (hold != 0) or release an armed count hook. */
int32_t ljp_vm_state_save(uintptr_t g)
{
  if (!ljp_vml.vmstate_ok || !g) return 0;
  return *(volatile int32_t *)(g + ljp_vml.g_vmstate);
}

void ljp_vm_state_restore(uintptr_t g, int32_t st)
{
  if (ljp_vml.vmstate_ok && g && st)
    *(volatile int32_t *)(g + ljp_vml.g_vmstate) = st;
}

void ljp_vm_hookcount(uintptr_t g, int32_t count)
{
  if (ljp_vml.hookcount_ok && g)
    *(volatile int32_t *)(g + ljp_vml.g_hookcount) = count;
}
