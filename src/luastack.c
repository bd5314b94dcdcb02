/*
** Lua frames live at the signal (luastack.h).
**
** The frame chain (LuaJIT 2.1, 64-bit GC references, two slots per frame
** header): the slot at base-2 holds the frame's function (a tagged
** function reference), base-1 its link. A link whose low two bits are 0
** is a Lua frame's return PC into its caller's bytecode; the caller's
** frame lies 2 + A slots below, A being the call instruction's register
** (the 32-bit word before the return PC, bits 8..15). Any other link
** holds a type in its low three bits and the byte distance to the
** previous frame (C, continuation, vararg, pcall). A vararg frame's
** original header below it is the same call, and a frame whose function
** is the thread itself is a dummy frame: neither counts, as in
** lua_getstack. The walk ends at the stack's first frame slot.
**
** Which base is live at a signal (read from LuaJIT's own fields):
**   a trace runs (vmstate >= 0)         g->jit_base (0: not in a trace)
**   the GC runs under a trace           g->jit_base
**   a lua_CFunction runs                L->base, stored before the call
**   LuaJIT's own code for a Lua         L->base (the state is C after a
**   function, outside the interpreter   VM event or an error returned to
**   (LJP_CAPTURE_HELPER)                C; block check as for the compiler)
**   the compiler; the interpreter       L->base, a Lua function's (block
**   while a trace records, in state I   check; LJP_CAPTURE_RECORDING)
**   or C (LJP_CAPTURE_RECORDING)
**   the interpreter otherwise,          nothing reliable in memory, and
**   a trace exit                        the safe point comes at once
**
** Why the handler's reads cannot fault: a trace never resizes the Lua
** stack while it runs, nor does the GC resize a stack under a running
** trace; a C function resizes it only through LuaJIT's own code, and a C
** capture is taken only when the native walk showed no frame of LuaJIT's
** code above the function (c_stable). So every slot read lies in the
** thread's live stack, bounded by L->stack and by the base, and every
** return PC points into the bytecode of a function on that stack. Each
** link is also checked (the previous frame strictly below, within the
** stack; a function tag in every header) and at most LJP_LUA_MAX frames
** are recorded, at most 4096 headers visited. The layout itself is learnt
** with fault-safe reads (ljp_peek) and proven against lua_getstack.
**
** Below the LJP_LUA_MAX frames recorded, the walk goes on with the same
** checks (no reads of the functions) and keeps a spine (ring.h): a few
** (function, slot) pairs near them and the stack's outermost frames, by
** which the safe point finds the captured frames' callers when those
** frames have all returned.
**
** Signal context: ljp_luastack_capture (no calls but memory reads).
** Normal context: the probe, ljp_luastack_live.
*/
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <unistd.h>

#include <lauxlib.h>

#include "luastack.h"
#include "vmprobe.h"

ljp_lslayout ljp_lsl;

#define TAG_FUNC 0x1fff7u    /* top 17 bits of a function reference */
#define TAG_THREAD 0x1fff9u  /* ... of a thread (a dummy frame) */
#define MAX_HEADERS 4096

typedef int (*readfn)(void *dst, uintptr_t src, size_t n);

/* Fixed-size loads once walk() is inlined with this reader (a call to
** memcpy per word was a fifth of a depth-20 safe point). */
static inline int read_direct(void *dst, uintptr_t src, size_t n)
{
  switch (n) {
  case 1: memcpy(dst, (const void *)src, 1); break;
  case 4: memcpy(dst, (const void *)src, 4); break;
  case 8: memcpy(dst, (const void *)src, 8); break;
  default: memcpy(dst, (const void *)src, n); break;
  }
  return 0;
}

/* Walk from base down to stack: the frames innermost first, up to max.
** Returns the count, or -1 when a check fails. Inlined, so that each
** caller's reader is a constant and read_direct's loads are plain. */
/* A failed check: no frames, but below the captured ones (the spine) the
** frames are kept and the spine ends there. */
#define FAIL (n == max && sp ? n : -1)
static inline __attribute__((always_inline))
int walk(readfn rd, uintptr_t stack, uintptr_t base, ljp_lframe *out,
         int max, int *bottom, ljp_spine *sp, uint8_t *nsp)
{
  ljp_spine last[LJP_SPINE_BOTTOM];   /* the outermost frames seen */
  uint32_t dist = 0, next = 0;
  const ljp_vmlayout *v = &ljp_vml;
  uintptr_t frame = base - 8, bot = stack + 8;
  uint64_t calleelink = 1;      /* the link of the header above: a Lua
                                   link is this frame's return PC */
  int n = 0, headers = 0, skipnext = 0;
  *bottom = 0;
  if (nsp) *nsp = 0;
  if (!stack || base < stack + 16 || (base & 7) || (stack & 7)) return -1;
  while (frame > bot) {
    uint64_t tv, link;
    uintptr_t prev;
    if (++headers > MAX_HEADERS) return n;
    if (rd(&tv, frame - 8, 8) || rd(&link, frame, 8)) return FAIL;
    if ((uint32_t)(tv >> 47) == TAG_FUNC) {
      if (!skipnext) {
        uintptr_t fn = (uintptr_t)(tv & (((uint64_t)1 << 47) - 1));
        unsigned char kind;
        if (n == max) {
          /* Below the captured frames: the spine (ring.h), without
          ** reading the functions. */
          if (!sp) return n;
          if (dist == next && *nsp < LJP_SPINE_MAX - LJP_SPINE_BOTTOM) {
            sp[*nsp].fn = fn;
            sp[*nsp].slot = (uint32_t)((frame + 8 - stack) / 8);
            sp[*nsp].dist = dist;
            ++*nsp;
            next = next * 2 + 1;
          }
          last[dist % LJP_SPINE_BOTTOM].fn = fn;
          last[dist % LJP_SPINE_BOTTOM].slot =
              (uint32_t)((frame + 8 - stack) / 8);
          last[dist % LJP_SPINE_BOTTOM].dist = dist;
          dist++;
          goto link;
        }
        if (rd(&kind, fn + (uintptr_t)v->fn_ffid, 1)) return FAIL;
        out[n].fn = fn;
        out[n].kind = kind;
        out[n].inl = 0;
        out[n].cf = 0;
        out[n].slot = (uint32_t)((frame + 8 - stack) / 8);
        out[n].pc = (calleelink & 3) == 0 ? (uintptr_t)calleelink : 0;
        if (kind != 0 ? rd(&out[n].cf, fn + (uintptr_t)v->fn_f, 8)
                      : ljp_lsl.lines_ok &&
                            rd(&out[n].bc, fn + (uintptr_t)ljp_lsl.fn_pc, 8))
          return FAIL;
        n++;
      }
    link:
      skipnext = (link & 3) != 0 && (link & 7) == 3;  /* vararg header */
    } else if ((uint32_t)(tv >> 47) != TAG_THREAD) {
      return FAIL;              /* not a frame header */
    }
    if ((link & 3) == 0) {      /* Lua frame: return PC into the caller */
      uint32_t ins;
      /* A user-space code address, never a value that only looks like
      ** a link (a number's bits). */
      if (link < 4096 || link >= ((uint64_t)1 << 47) ||
          rd(&ins, (uintptr_t)link - 4, 4))
        return FAIL;
      prev = frame - 8 * (2 + ((ins >> 8) & 0xff));
    } else {
      uintptr_t d = (uintptr_t)(link & ~(uint64_t)7);
      if (!d || d > frame - stack) return FAIL;
      prev = frame - d;
    }
    if (prev >= frame || prev < stack) return FAIL;
    calleelink = link;
    frame = prev;
  }
  if (n == max && sp && dist) {
    /* the bottom frames, outermost last, after those recorded */
    uint32_t d = dist > LJP_SPINE_BOTTOM ? dist - LJP_SPINE_BOTTOM : 0;
    while (*nsp && sp[*nsp - 1].dist >= d) --*nsp;  /* among the last */
    for (; d < dist; d++) sp[(*nsp)++] = last[d % LJP_SPINE_BOTTOM];
    return n;                 /* the captured frames do not reach it */
  }
  *bottom = 1;
  return n;
}
#undef FAIL

/* A capture's frames (n from walk) kept in rec: the count, 0 for none. */
static inline int keep_frames(ljp_record *rec, uintptr_t L, uintptr_t stack,
                              int n, int bottom)
{
  if (n <= 0) return 0;
  rec->lstack = stack;
  rec->lthread = L;
  rec->lflags = bottom ? LJP_LUA_BOTTOM : 0;
  rec->nlua = (uint8_t)n;
  return n;
}

static inline uintptr_t read_curl(uintptr_t g)
{
  const ljp_vmlayout *v = &ljp_vml;
  return v->curl_size == 8 ? *(volatile uintptr_t *)(g + v->g_curl)
                           : *(volatile uint32_t *)(g + v->g_curl);
}

/* -- Signal context -------------------------------------------------------- */

/* Are both ends of [lo, hi] readable now? One process_vm_readv. */
static int mapped(uintptr_t lo, uintptr_t hi)
{
  struct iovec l[2], r[2];
  uint64_t a, b;
  l[0].iov_base = &a; l[0].iov_len = 8;
  l[1].iov_base = &b; l[1].iov_len = 8;
  r[0].iov_base = (void *)lo; r[0].iov_len = 8;
  r[1].iov_base = (void *)hi; r[1].iov_len = 8;
  return ljp_peekv(l, r, 2) == 16;
}

int ljp_luastack_capture(uintptr_t g, int c_mode, ljp_record *rec)
{
  const ljp_vmlayout *v = &ljp_vml;
  uintptr_t L, base, stack;
  int32_t st;
  int n, bottom;
  rec->nlua = 0;
  rec->nspine = 0;
  if (!ljp_lsl.ok || !g || !v->vmstate_ok || !(L = read_curl(g))) return 0;
  st = *(volatile int32_t *)(g + v->g_vmstate);
  if (st >= 0 || st == -3) {        /* a trace, or the GC under one */
    base = ljp_lsl.jit_ok ? *(volatile uintptr_t *)(g + ljp_lsl.g_jit_base)
                          : 0;
    if (!base && st == -3 && c_mode) {
      /* The GC outside a trace: a step started by a C function's lua_*
      ** call has the C function's frame at L->base (checked below like a
      ** C capture that is not proven stable: the GC may shrink the
      ** stack). From the interpreter the safe point follows at once. */
      base = *(volatile uintptr_t *)(L + v->l_base);
      st = -2;
      c_mode = 2;
    }
  } else if (st == -2 && c_mode) {
    base = *(volatile uintptr_t *)(L + v->l_base);
  } else if ((st == -1 || st == -2) && c_mode == LJP_CAPTURE_RECORDING) {
    /* The interpreter while the recorder records: every instruction is
    ** dispatched through the recorder, which stores L->base first, so it
    ** holds the running frame (or, for the few instructions of a call or
    ** a return, the frame just left). Such a tick cannot arm the hook (it
    ** would abort the trace); its safe point comes later, so the frames
    ** are captured here, checked as for the compiler below. State C
    ** there (sample.c): a "record" handler returned to C before the
    ** recorder, and the interpreter runs on in state C; the top frame
    ** must be a Lua function's (not a C handler returning). */
    base = *(volatile uintptr_t *)(L + v->l_base);
    st = -5;
    c_mode = 2;
  } else if (st <= -5 && st >= -7) {
    /* The trace compiler (recorder, optimiser, assembler), called by the
    ** interpreter with L->base at the frame being recorded. Its ticks
    ** cannot arm the hook: their first safe point may come only after the
    ** new trace has run on into other functions, so the frames are
    ** captured here. The stack may be resized meanwhile (block check
    ** below), and its top frame must be a Lua function's. */
    base = *(volatile uintptr_t *)(L + v->l_base);
    c_mode = 2;
  } else {
    return 0;
  }
  if (!base) return 0;
  stack = *(volatile uintptr_t *)(L + ljp_lsl.l_stack);
  if (base <= stack || base - stack > (uintptr_t)8 << 20) return 0;
  if ((st == -2 || st <= -5) && c_mode != 1) {
    /* The stack may be in the middle of a resize: only a base inside the
    ** block L->stack..L->maxstack as they are now, and a block mapped now
    ** (its old copy may already be freed: LuaJIT frees it before it
    ** updates these fields, and a freed block's first slots are the
    ** allocator's, which the walk's checks reject). */
    uintptr_t maxstack;
    if (ljp_lsl.l_maxstack < 0) return 0;
    maxstack = *(volatile uintptr_t *)(L + ljp_lsl.l_maxstack);
    if (base > maxstack || !mapped(stack, maxstack)) return 0;
  }
  if (st <= -5) {
    uint64_t tv = *(volatile uint64_t *)(base - 16);
    if ((uint32_t)(tv >> 47) != TAG_FUNC ||
        *(volatile unsigned char *)((uintptr_t)(tv & (((uint64_t)1 << 47) - 1)) +
                                    (uintptr_t)v->fn_ffid) != 0)
      return 0;
  }
  if (st == -2) {
    /* The base must be the C function's own frame: LuaJIT sets the state
    ** to C a little before a Lua function returning to C is gone, and
    ** during that window the base is the Lua function's. But in LuaJIT's
    ** own code called by the interpreter for a Lua function (the trace
    ** recorder after a "record" or "trace" event, a trace abort after
    ** the recorder's error, the GC after a finalizer: each returned to C
    ** through the VM, which left the state C), the base is that Lua
    ** function's and it is the top frame, as in the compiler. */
    uint64_t tv;
    unsigned char kind;
    tv = *(volatile uint64_t *)(base - 16);
    if ((uint32_t)(tv >> 47) != TAG_FUNC) return 0;
    kind = *(volatile unsigned char *)((uintptr_t)(tv & (((uint64_t)1 << 47) - 1)) +
                                      (uintptr_t)v->fn_ffid);
    if (kind == 0 && c_mode != LJP_CAPTURE_HELPER) return 0;
  }
  n = walk(read_direct, stack, base, rec->lua, LJP_LUA_MAX, &bottom,
           rec->spine, &rec->nspine);
  return keep_frames(rec, L, stack, n, bottom);
}

/* -- Another thread's frames (normal context, the timer thread) ----------- */

/* Every read fault-safe: the thread is blocked in a system call, but it
** may wake at any moment and free or move what is read (the caller checks
** afterwards that it did not run, and drops the frames if it did). */
static int read_peek(void *dst, uintptr_t src, size_t n)
{
  return ljp_peek(dst, src, n);
}

int ljp_luastack_capture_blocked(uintptr_t g, ljp_record *rec)
{
  const ljp_vmlayout *v = &ljp_vml;
  uintptr_t L = 0, base = 0, stack = 0, maxstack = 0;
  uint64_t tv;
  unsigned char kind;
  int32_t st;
  int n, bottom;
  rec->nlua = 0;
  rec->nspine = 0;
  if (!ljp_lsl.ok || !g || !v->vmstate_ok || ljp_lsl.l_maxstack < 0) return 0;
  /* g's own fields stay readable while the state lives (it is, while
  ** its run is: a stop joins the timer thread first). */
  if (!(L = read_curl(g))) return 0;
  st = *(volatile int32_t *)(g + v->g_vmstate);
  if (st >= 0) {                     /* an FFI call from a trace */
    if (!ljp_lsl.jit_ok) return 0;
    base = *(volatile uintptr_t *)(g + ljp_lsl.g_jit_base);
  } else if (st == -2) {             /* a C function, the FFI's call too */
    if (read_peek(&base, L + v->l_base, 8)) return 0;
  } else {
    return 0;
  }
  if (!base || read_peek(&stack, L + ljp_lsl.l_stack, 8) ||
      read_peek(&maxstack, L + ljp_lsl.l_maxstack, 8))
    return 0;
  if (base <= stack || base > maxstack || base - stack > (uintptr_t)8 << 20)
    return 0;
  if (st == -2) {                    /* the base is the C function's frame */
    if (read_peek(&tv, base - 16, 8) || (uint32_t)(tv >> 47) != TAG_FUNC ||
        read_peek(&kind, (uintptr_t)(tv & (((uint64_t)1 << 47) - 1)) +
                         (uintptr_t)v->fn_ffid, 1) || kind == 0)
      return 0;
  }
  n = walk(read_peek, stack, base, rec->lua, LJP_LUA_MAX, &bottom,
           rec->spine, &rec->nspine);
  return keep_frames(rec, L, stack, n, bottom);
}

/* -- Normal context -------------------------------------------------------- */

int ljp_luastack_live(lua_State *L, ljp_lframe *out, int max, int *bottom,
                      uintptr_t *stack)
{
  const ljp_vmlayout *v = &ljp_vml;
  uintptr_t base;
  *bottom = 0;
  *stack = 0;
  if (!ljp_lsl.ok) return -1;
  base = *(uintptr_t *)((uintptr_t)L + v->l_base);
  *stack = *(uintptr_t *)((uintptr_t)L + ljp_lsl.l_stack);
  return walk(read_direct, *stack, base, out, max, bottom, NULL, NULL);
}

/* LJPROF_STACKS=check, read once; safe points of several threads may
** ask first at the same time (an atomic: they all compute the same). */
static _Atomic int checking = -1;

int ljp_luastack_checking(void)
{
  return ljp_env_is(&checking, "LJPROF_STACKS", "check");
}

static int getstack_fns(lua_State *L, uintptr_t *fns, int max);

/* A mismatch, said on stderr (the first few of a process): what the
** checks found is kept where a rare one shows (test_selfcheck). */
void ljp_check_say(const char *what)
{
  static int said;
  if (said++ < 5) fprintf(stderr, "ljprof: check mismatch: %s\n", what);
}

int ljp_luastack_check(lua_State *L)
{
  ljp_lframe fr[256];
  uintptr_t fns[256], stack;
  char why[160];
  int n, m, bottom, k;
  if (!ljp_lsl.ok) return -1;
  n = ljp_luastack_live(L, fr, 256, &bottom, &stack);
  if (n < 0 || !bottom) {
    if (n < 0) ljp_check_say("frames: the read from memory failed");
    return n < 0 ? 0 : -1;
  }
  m = getstack_fns(L, fns, 256);
  if (m != n) {
    snprintf(why, sizeof(why), "frames: %d read from memory, %d from "
             "lua_getstack", n, m);
    ljp_check_say(why);
    return 0;
  }
  for (k = 0; k < n; k++)
    if (fr[k].fn != fns[k]) {
      snprintf(why, sizeof(why), "frames: frame %d of %d differs", k, n);
      ljp_check_say(why);
      return 0;
    }
  return 1;
}

/* -- Learning the layout ---------------------------------------------------- */

#define LSNAP 160
#define GSNAP 2048

static pthread_mutex_t probe_mu = PTHREAD_MUTEX_INITIALIZER;
static int probe_done, jit_tries;

static struct {
  int calls;                    /* probe calls so far */
  int cand[LSNAP / 8];          /* still-possible offsets of L->stack */
  int mcand[LSNAP / 8];         /* ... of L->maxstack */
  /* (function, PC, line) seen at probe calls, for the line layout. */
  struct { uintptr_t fn, pc; int line, first, numline; } obs[96];
  int nobs;
  /* The trace base. */
  uintptr_t g, loopfn, L;
  int jcand[GSNAP / 8];
  int jcalls, jseen;            /* calls examined, calls seen in the trace */
} pb;

/* The frames lua_getstack sees, as function pointers, innermost first. */
static int getstack_fns(lua_State *L, uintptr_t *fns, int max)
{
  lua_Debug ar;
  int n = 0;
  while (n < max && lua_getstack(L, n, &ar)) {
    lua_getinfo(L, "f", &ar);
    fns[n++] = (uintptr_t)lua_topointer(L, -1);
    lua_pop(L, 1);
  }
  return n;
}

/* Fault-safe reads for the probe's walks, through a small cache of
** 256-byte lines (one process_vm_readv per line instead of one per word:
** a walk reads each header, function object and call instruction; ~980
** system calls per first start became ~100). Valid for one probe call,
** while the stack being walked cannot change. */
#define PC_LINES 64
#define PC_LINE 256
static struct {
  uintptr_t tag[PC_LINES];   /* line address + 1 (0: empty) */
  unsigned char data[PC_LINES][PC_LINE];
} pcache;

static void pcache_reset(void) { memset(pcache.tag, 0, sizeof(pcache.tag)); }

static int peek_cached(void *dst, uintptr_t src, size_t n)
{
  unsigned char *d = dst;
  while (n) {
    uintptr_t line = src & ~(uintptr_t)(PC_LINE - 1);
    size_t off = src - line, k = PC_LINE - off < n ? PC_LINE - off : n;
    uint32_t i = (uint32_t)((line / PC_LINE) * 2654435761u) % PC_LINES;
    if (pcache.tag[i] != line + 1) {
      if (ljp_peek(pcache.data[i], line, PC_LINE) != 0) {
        pcache.tag[i] = 0;
        return ljp_peek(d, src, n);  /* a line not mapped whole */
      }
      pcache.tag[i] = line + 1;
    }
    memcpy(d, pcache.data[i] + off, k);
    d += k;
    src += k;
    n -= k;
  }
  return 0;
}

/* Called from Lua at known depths (plain calls, pcall, a vararg function,
** an __index metamethod, a coroutine): which word of L bounds a walk that
** reproduces lua_getstack exactly? */
static int probe_frames(lua_State *L)
{
  const ljp_vmlayout *v = &ljp_vml;
  uintptr_t words[LSNAP / 8], fns[64], base;
  ljp_lframe fr[64];
  int want, o, k;
  pb.calls++;
  pcache_reset();
  if (ljp_peek(words, (uintptr_t)L, sizeof(words)) != 0) return 0;
  base = words[v->l_base / 8];
  want = getstack_fns(L, fns, 64);
  /* L->maxstack: above the top at every call, within megabytes of the
  ** base; and at the first call, the word that follows the stack when
  ** it grows: after lua_checkstack(2000) it moves with it, and the
  ** distance from L->stack grows by at least those 2000 slots. */
  for (o = 0; o < LSNAP / 8; o++) {
    uintptr_t top = base + 8 * (uintptr_t)lua_gettop(L);
    if (pb.mcand[o] && (words[o] <= top || words[o] - base > ((uintptr_t)8 << 20) ||
                        (words[o] & 7)))
      pb.mcand[o] = 0;
  }
  for (o = 0; o < LSNAP / 8; o++) {
    int n, bottom, same = 1;
    if (!pb.cand[o]) continue;
    n = walk(peek_cached, words[o], base, fr, 64, &bottom, NULL, NULL);
    if (n != want || !bottom) same = 0;
    for (k = 0; same && k < n; k++) same = fr[k].fn == fns[k];
    if (!same) {
      pb.cand[o] = 0;
      continue;
    }
    /* The frames below the top know their PC: with lua_getinfo's line,
    ** an observation for learning how a PC becomes a line. */
    for (k = 1; k < n && pb.nobs < 96; k++) {
      lua_Debug ar;
      if (fr[k].kind != 0 || !fr[k].pc || !lua_getstack(L, k, &ar) ||
          !lua_getinfo(L, "Sl", &ar) || ar.currentline <= 0 ||
          ar.linedefined <= 0)
        continue;
      pb.obs[pb.nobs].fn = fr[k].fn;
      pb.obs[pb.nobs].pc = fr[k].pc;
      pb.obs[pb.nobs].line = ar.currentline;
      pb.obs[pb.nobs].first = ar.linedefined;
      pb.obs[pb.nobs].numline = ar.lastlinedefined - ar.linedefined;
      pb.nobs++;
    }
    break;  /* one passing candidate's frames are enough */
  }
  for (o++; o < LSNAP / 8; o++) {  /* the other candidates, checked only */
    int n, bottom, same = 1;
    if (!pb.cand[o]) continue;
    n = walk(peek_cached, words[o], base, fr, 64, &bottom, NULL, NULL);
    if (n != want || !bottom) same = 0;
    for (k = 0; same && k < n; k++) same = fr[k].fn == fns[k];
    if (!same) pb.cand[o] = 0;
  }
  if (pb.calls == 1) {
    uintptr_t grown[LSNAP / 8];
    int s;
    if (!lua_checkstack(L, 2000) ||
        ljp_peek(grown, (uintptr_t)L, sizeof(grown)) != 0) {
      memset(pb.mcand, 0, sizeof(pb.mcand));
    } else {
      for (o = 0; o < LSNAP / 8; o++) {
        int moved = 0;
        if (!pb.mcand[o]) continue;
        for (s = 0; s < LSNAP / 8; s++) {  /* against each stack candidate */
          uintptr_t d0 = words[o] - words[s], d1 = grown[o] - grown[s];
          if (s != o && pb.cand[s] && grown[o] != words[o] &&
              words[o] > words[s] && grown[o] > grown[s] &&
              d1 >= d0 + 8 * 2000 - 64 && d1 < ((uintptr_t)8 << 20))
            moved = 1;
        }
        if (!moved) pb.mcand[o] = 0;
      }
    }
  }
  return 0;
}

/* Calls spread over several lines, so that a PC's line differs from its
** function's first line (the line layout is learnt from these too). */
static const char frames_chunk[] =
  "local probe = ...\n"
  "local function a()\n"
  "  local x = 1\n"
  "  probe()\n"
  "  return x\n"
  "end\n"
  "local function b(...)\n"
  "  local y = 2\n"
  "  probe()\n"
  "\n"
  "  local r = a()\n"
  "  return r + y\n"
  "end\n"
  "local t = setmetatable({}, {__index = function(t, k)\n"
  "  probe()\n"
  "  local v = b(1, 2, 3)\n"
  "  return v\n"
  "end})\n"
  "local function c()\n"
  "  local x = t.k\n"
  "\n"
  "  probe()\n"
  "  return x\n"
  "end\n"
  "c()\n"
  "pcall(c)\n"
  "local wrap = coroutine._wrap or coroutine.wrap  -- OpenResty: LuaJIT's\n"
  "wrap(function()\n"
  "  pcall(c)\n"
  "end)()\n";

/* Called through the FFI from a compiled loop (vmstate is a trace
** number): which word of G points at the loop function's frame base? */
/* The calls from the trace that are examined (each costs a few
** process_vm_readv): the first JIT_SETTLE ones are skipped, the next
** JIT_CALLS decide; later calls return at once. */
#define JIT_SETTLE 20
#define JIT_CALLS 12

static int probe_jit(int i)
{
  const ljp_vmlayout *v = &ljp_vml;
  uintptr_t gw[GSNAP / 8], stack;
  int32_t st;
  int o;
  if (pb.jcalls >= JIT_CALLS) return 0;
  if (!pb.g) {
    pb.jcalls = JIT_CALLS + 1;   /* no G: give up (counted failed) */
    return 0;
  }
  /* G's VM state, read directly as the signal handler reads it (pb.g is
  ** the state's proven G, ljp_vm_global): one system call less per call */
  st = *(volatile int32_t *)(pb.g + (uintptr_t)v->g_vmstate);
  /* The trace compiler's state: interpreted and recording calls, then a
  ** few from the trace. */
  if (st < 0 || pb.jseen < 10) ljp_vm_jstate_probe(pb.g, i == 1, st >= 0);
  if (st < 0 || ++pb.jseen <= JIT_SETTLE) return 0;
  if (ljp_peek_g(gw, pb.g, sizeof(gw)) != 0 ||
      ljp_peek(&stack, pb.L + (uintptr_t)ljp_lsl.l_stack, 8) != 0)
    return 0;
  pb.jcalls++;
  pcache_reset();
  for (o = 0; o < GSNAP / 8; o++) {
    uint64_t tv;
    uintptr_t w = gw[o];
    if (!pb.jcand[o]) continue;
    if (w < stack + 16 || w - stack > ((uintptr_t)8 << 20) || (w & 7) ||
        peek_cached(&tv, w - 16, 8) != 0 ||
        (uint32_t)(tv >> 47) != TAG_FUNC ||
        (uintptr_t)(tv & (((uint64_t)1 << 47) - 1)) != pb.loopfn)
      pb.jcand[o] = 0;
  }
  return 0;
}

static const char jit_chunk[] =
  "local p = ...\n"
  "if not (jit and jit.status and jit.status()) then return nil end\n"
  "local ok, ffi = pcall(require, 'ffi')\n"
  "if not ok then return nil end\n"
  "local f = ffi.cast('int (*)(int)', p)\n"
  "local function loop(n) local s = 0 for i = 1, n do s = s + f(i) end "
  "return s end\n"
  "return loop\n";

static void learn_jit(lua_State *L)
{
  lua_State *th = lua_newthread(L);
  int o, n = 0;
  if (luaL_loadbuffer(th, jit_chunk, sizeof(jit_chunk) - 1,
                      "=ljprof-probe") != 0)
    return;
  lua_pushlightuserdata(th, (void *)probe_jit);
  if (lua_pcall(th, 1, 1, 0) != 0 || !lua_isfunction(th, -1)) {
    snprintf(ljp_lsl.why, sizeof(ljp_lsl.why), "no JIT or no FFI");
    return;
  }
  pb.loopfn = (uintptr_t)lua_topointer(th, -1);
  pb.L = (uintptr_t)th;
  pb.g = ljp_vm_global(th);
  pb.jcalls = pb.jseen = 0;
  for (o = 0; o < GSNAP / 8; o++) pb.jcand[o] = 1;
  lua_pushinteger(th, 1000);
  if (lua_pcall(th, 1, 0, 0) != 0 || pb.jcalls != JIT_CALLS) {
    ljp_vm_jstate_probe_done();
    snprintf(ljp_lsl.why, sizeof(ljp_lsl.why), "the probe loop was not "
             "compiled (%d calls in a trace)", pb.jcalls);
    return;
  }
  ljp_vm_jstate_probe_done();
  for (o = 0; o < GSNAP / 8; o++) {
    if (pb.jcand[o]) {
      n++;
      ljp_lsl.g_jit_base = (ptrdiff_t)(o * 8);
    }
  }
  if (n == 1) ljp_lsl.jit_ok = 1;
  else snprintf(ljp_lsl.why, sizeof(ljp_lsl.why), "%d candidates for the "
                "trace base", n);
}

/* The line of fn at pc with layout (o_pc, d1, d2), as lj_debug_line
** computes it: position = instructions after the first, minus one; 0 is
** the first line, else first + the line table's entry before it (8, 16
** or 32 bits by the number of lines). -1 if unreadable. */
static int line_of_bc(readfn rd, uintptr_t bc, uintptr_t pc, ptrdiff_t d1,
                      ptrdiff_t d2)
{
  uintptr_t li;
  int32_t fl[2];
  uintptr_t pos;
  if (bc < 4096 || pc <= bc || pc - bc > (4u << 24) || ((pc - bc) & 3))
    return -1;
  if (rd(fl, bc - (uintptr_t)d1, 8) || fl[1] < 0 ||
      rd(&li, bc - (uintptr_t)d2, 8) || li < 4096)
    return -1;
  pos = (pc - bc) / 4 - 1;
  if (pos == 0) return fl[0];
  pos--;
  if (fl[1] < 256) {
    uint8_t v;
    if (rd(&v, li + pos, 1)) return -1;
    return fl[0] + v;
  } else if (fl[1] < 65536) {
    uint16_t v;
    if (rd(&v, li + 2 * pos, 2)) return -1;
    return fl[0] + v;
  } else {
    uint32_t v;
    if (rd(&v, li + 4 * pos, 4)) return -1;
    return fl[0] + (int)v;
  }
}

static int line_with(readfn rd, uintptr_t fn, uintptr_t pc, ptrdiff_t o_pc,
                     ptrdiff_t d1, ptrdiff_t d2)
{
  uintptr_t bc;
  if (rd(&bc, fn + (uintptr_t)o_pc, 8)) return -1;
  return line_of_bc(rd, bc, pc, d1, d2);
}

int ljp_luastack_line_bc(uintptr_t bc, int32_t pc)
{
  if (!ljp_lsl.lines_ok || !bc || pc < 0) return -1;
  /* A frame's PC points past its instruction: index pc is bc + 4 (pc+1). */
  return line_of_bc(read_direct, bc, bc + 4u * ((uintptr_t)pc + 1),
                    ljp_lsl.bc_first, ljp_lsl.bc_lineinfo);
}

int ljp_luastack_line_bc_safe(uintptr_t bc, int32_t pc)
{
  if (!ljp_lsl.lines_ok || !bc || pc < 0) return -1;
  return line_of_bc(ljp_peek, bc, bc + 4u * ((uintptr_t)pc + 1),
                    ljp_lsl.bc_first, ljp_lsl.bc_lineinfo);
}

int ljp_luastack_line_pc(uintptr_t bc, uintptr_t pc)
{
  if (!ljp_lsl.lines_ok || !bc || !pc) return -1;
  return line_of_bc(read_direct, bc, pc, ljp_lsl.bc_first,
                    ljp_lsl.bc_lineinfo);
}

int ljp_luastack_line(uintptr_t fn, uintptr_t pc)
{
  if (!ljp_lsl.lines_ok || !fn || !pc) return -1;
  return line_with(read_direct, fn, pc, ljp_lsl.fn_pc, ljp_lsl.bc_first,
                   ljp_lsl.bc_lineinfo);
}

int ljp_luastack_line_at(uintptr_t fn, int32_t pc)
{
  uintptr_t bc;
  if (!ljp_lsl.lines_ok || !fn || pc < 0 ||
      read_direct(&bc, fn + (uintptr_t)ljp_lsl.fn_pc, 8) || bc < 4096)
    return -1;
  /* A frame's PC points past its instruction: index pc is bc + 4 (pc+1). */
  return line_with(read_direct, fn, bc + 4u * ((uintptr_t)pc + 1), ljp_lsl.fn_pc,
                   ljp_lsl.bc_first, ljp_lsl.bc_lineinfo);
}

/* Find the layout that turns every observed (function, PC) into the line
** lua_getinfo gave, and the function's first line and line count: exactly
** one must fit. */
/* The candidates are tried on copies: each observed function object's
** first 64 bytes, and for each candidate o_pc the 256 bytes before its
** bytecode, are read once (fault-safe); only a line table entry is read
** per candidate. (Reading every candidate word with its own
** process_vm_readv took ~3,900 system calls, ~10 ms, per start.) */
#define LN_FN 64
#define LN_HDR 256
static struct {
  uintptr_t fn[96][LN_FN / 8];
  unsigned char fn_ok[96];
  unsigned char hdr[96][LN_HDR];  /* [bc - LN_HDR, bc) for the o_pc tried */
  uintptr_t bc[96];
} ln;

/* 8 bytes at bc - d of observation i (d in 8..LN_HDR). */
static int ln_read(int i, ptrdiff_t d, void *dst)
{
  memcpy(dst, ln.hdr[i] + LN_HDR - d, 8);
  return 0;
}

static void learn_lines(void)
{
  ptrdiff_t o_pc, d1, d2;
  int found = 0, i, k;
  if (pb.nobs < 6) return;
  pcache_reset();
  for (i = 0; i < pb.nobs; i++)
    ln.fn_ok[i] = peek_cached(ln.fn[i], pb.obs[i].fn, LN_FN) == 0;
  for (o_pc = 8; o_pc < 64; o_pc += 8) {
    int ok = 1;
    for (i = 0; ok && i < pb.nobs; i++) {
      ln.bc[i] = ln.fn[i][o_pc / 8];
      ok = ln.fn_ok[i] && ln.bc[i] > 4096 + LN_HDR &&
           peek_cached(ln.hdr[i], ln.bc[i] - LN_HDR, LN_HDR) == 0;
    }
    if (!ok) continue;
    for (d1 = 8; d1 <= 256; d1 += 4) {
      for (ok = 1, i = 0; ok && i < pb.nobs; i++) {
        int32_t fl[2];
        ln_read(i, d1, fl);
        ok = fl[0] == pb.obs[i].first && fl[1] == pb.obs[i].numline;
      }
      if (!ok) continue;
      for (d2 = 8; d2 <= 256; d2 += 8) {
        for (k = 0, i = 0; i < pb.nobs; i++) {
          uintptr_t li, pos, bc = ln.bc[i], pc = pb.obs[i].pc;
          int32_t fl[2];
          int line = -1;
          ln_read(i, d1, fl);
          ln_read(i, d2, &li);
          if (pc > bc && pc - bc <= (4u << 24) && !((pc - bc) & 3) &&
              fl[1] >= 0 && li >= 4096) {
            /* as line_with: the entry before pc's position */
            pos = (pc - bc) / 4 - 1;
            if (pos == 0) {
              line = fl[0];
            } else if (fl[1] < 256) {
              uint8_t v;
              if (!peek_cached(&v, li + pos - 1, 1)) line = fl[0] + v;
            } else if (fl[1] < 65536) {
              uint16_t v;
              if (!peek_cached(&v, li + 2 * (pos - 1), 2)) line = fl[0] + v;
            } else {
              uint32_t v;
              if (!peek_cached(&v, li + 4 * (pos - 1), 4)) line = fl[0] + (int)v;
            }
          }
          k += line == pb.obs[i].line;
          if (k != i + 1) break;   /* one miss rules the candidate out */
        }
        if (k == pb.nobs) {
          found++;
          ljp_lsl.fn_pc = o_pc;
          ljp_lsl.bc_first = d1;
          ljp_lsl.bc_lineinfo = d2;
        }
      }
    }
  }
  ljp_lsl.lines_ok = found == 1;
}

static void learn_frames(lua_State *L)
{
  lua_State *th = lua_newthread(L);
  int o, n = 0;
  memset(&pb, 0, sizeof(pb));
  for (o = 0; o < LSNAP / 8; o++) pb.cand[o] = pb.mcand[o] = 1;
  if (luaL_loadbuffer(th, frames_chunk, sizeof(frames_chunk) - 1,
                      "=ljprof-probe") != 0)
    return;
  lua_pushcfunction(th, probe_frames);
  if (lua_pcall(th, 1, 0, 0) != 0 || pb.calls != 12) {
    snprintf(ljp_lsl.why, sizeof(ljp_lsl.why), "the frame probe did not "
             "run (%d calls)", pb.calls);
    return;
  }
  for (o = 0; o < LSNAP / 8; o++) {
    if (pb.cand[o]) {
      n++;
      ljp_lsl.l_stack = (ptrdiff_t)(o * 8);
    }
  }
  if (n == 1) ljp_lsl.ok = 1;
  else snprintf(ljp_lsl.why, sizeof(ljp_lsl.why), "%d candidates for the "
                "stack bound", n);
  /* L->maxstack must also bound the stack from above: one candidate. */
  ljp_lsl.l_maxstack = -1;
  for (n = 0, o = 0; o < LSNAP / 8; o++) {
    if (pb.mcand[o] && (ptrdiff_t)(o * 8) != ljp_lsl.l_stack) {
      n++;
      ljp_lsl.l_maxstack = (ptrdiff_t)(o * 8);
    }
  }
  if (n != 1) ljp_lsl.l_maxstack = -1;
  if (ljp_lsl.ok) learn_lines();
}

int ljp_luastack_probe(lua_State *L)
{
  const char *env = getenv("LJPROF_STACKS");
  int top = lua_gettop(L);
  pthread_mutex_lock(&probe_mu);
  if (!probe_done) {
    probe_done = 1;
    if (env && !strcmp(env, "safepoint"))
      snprintf(ljp_lsl.why, sizeof(ljp_lsl.why), "LJPROF_STACKS=safepoint");
    else if (!ljp_vml.frame_ok || !ljp_vml.gc64 || ljp_vml.func_slot != 2)
      snprintf(ljp_lsl.why, sizeof(ljp_lsl.why), "frame layout unknown or "
               "not 64-bit GC references");
    else
      learn_frames(L);
  }
  if (ljp_lsl.ok && !ljp_lsl.jit_ok && jit_tries < 3) {
    jit_tries++;
    learn_jit(L);
  }
  pthread_mutex_unlock(&probe_mu);
  lua_settop(L, top);
  return ljp_lsl.ok;
}
