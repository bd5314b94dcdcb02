/*
** The LuaJIT side's types that the VM interface (vm.h) shares for their
** size: the Lua frames a tick stores in its ring record (luastack.c fills
** them), and the VM's parts of a context (ljp.h): the trace part
** (traces.c), the C-function naming memory and the Lua functions seen
** live (names.c); and the inline signal-context readers of the trace at
** a tick (vm.h: ljp_vm_trace, ljp_vm_trace_holds) with the layout they
** read, inline because every tick in compiled code calls them. Only vm.h
** includes this file; the sampler side reads these through vm.h. A
** second VM provides its own file of the same types and inline readers,
** and vm.h includes it instead.
*/
#ifndef LJP_VM_LUAJIT_H
#define LJP_VM_LUAJIT_H

#include <stddef.h>
#include <stdint.h>

/* -- Lua frames of a ring record (ring.h: ljp_record) ---------------------- */

#define LJP_LUA_MAX 20   /* Lua frames captured at signal time per record */
#define LJP_LUA_BOTTOM 1 /* the capture reached the bottom of the stack */
#define LJP_LUA_HOST 2   /* no Lua call was active on the running thread
                            (the host's own code): no Lua frames at all,
                            not even the safe point's (vmprobe.h) */

/* A Lua frame live at the signal (luastack.c): its function object, the C
** entry of a C function or a Lua function's first instruction (which names
** its prototype: read while the function was alive, it tells at a later
** safe point which prototype a returned frame ran; 0 when unknown), the
** bytecode PC it is at when its callee's link tells (0: unknown, and for
** the innermost frame), its base as a slot index in its stack, and the
** function kind (0 Lua, 1 C, > 1 fast function id); inl: a frame a trace
** had inlined, decoded from its snapshot at the safe point (tracesnap.h),
** which no interpreter frame ever held. */
typedef struct ljp_lframe {
  uintptr_t fn;
  union {
    uintptr_t cf;  /* kind != 0 */
    uintptr_t bc;  /* kind == 0 */
  };
  uintptr_t pc;
  uint32_t slot;
  uint8_t kind;
  uint8_t inl;
} ljp_lframe;

/* A frame below the captured ones (their spine): its function and slot,
** at distances 0, 1, 3, 7, 15, 31 frames below the outermost captured
** frame, then the stack's LJP_SPINE_BOTTOM outermost frames (dense: a
** program's loop sits a few levels above its bottom). At the safe point the
** nearest one still live joins the captured frames to the live stack when
** the captured ones have all returned (luaframes.c). */
#define LJP_SPINE_MAX 16
#define LJP_SPINE_BOTTOM 10
typedef struct ljp_spine {
  uintptr_t fn;
  uint32_t slot;
  uint32_t dist;         /* frames between it and the captured ones */
} ljp_spine;

/* -- The trace part of a context (traces.c, traces.h) --------------------- */

typedef struct ljp_trinfo {
  /* From the events (raw, a few stores), or read from the trace object
  ** (tracemem.h) at the first safe point that needs it. */
  uintptr_t fn;             /* start function object (events only; 0: no
                               such trace or read from memory); alive only
                               as long as proven (fnames, or found on the
                               live stack) */
  uintptr_t bc;             /* its prototype's first instruction (0:
                               unknown) */
  uintptr_t T, mcode;       /* from memory: the trace object and its
                               machine code, which must read the same for
                               the names below to still be this trace's
                               (trace numbers are reused after a flush) */
  uint32_t mcsize;          /* from memory: the machine code's size */
  int name_tried;           /* its start function's name was searched for
                               by value (names.c ljp_lname_by_value) */
  int32_t pc;               /* start bytecode index */
  int side;                 /* a side trace (starts at another's exit) */
  int line;                 /* line the trace starts at (-1: unknown) */
  /* Learnt when a sample needs them (ljp_trace_info). */
  int resolved;             /* 1: names below; < 0: tries that failed */
  char *source;             /* start function's chunk name */
  char *name;               /* its name where it was called, or NULL */
  int linedefined;          /* start function's first line */
  int have_key;             /* a sample found the start function on the */
  uint32_t stack, func;     /* stack: its keys, for samples that do not */
  uint32_t tloc;            /* its "chunk:first:line" text (0: not made):
                               a store id, cleared with have_key */
  int mc_known;             /* machine code range learnt (code map) */
} ljp_trinfo;

typedef struct ljp_abort {
  uint64_t raw;             /* hash of the event's values, as they came */
  char *func;               /* function the trace started in: chunk:line */
  int line;                 /* start line */
  int code;                 /* LuaJIT's trace error code (jit.vmdef.traceerr) */
  char *info;               /* its argument, as text */
  int info_is_num;
  char *at;                 /* where recording stopped: chunk:line */
  uint64_t count;
  uint64_t hash;            /* of all the above but count: a quick compare */
} ljp_abort;

#define LJP_MAX_ABORTS 512  /* distinct abort records kept per run */

/* The trace event handler's tables (traces.h). */
typedef struct ljp_trtabs ljp_trtabs;

/* The trace part of a context, written only by traces.c. */
typedef struct ljp_tracest {
  int aborts_on;            /* this run's aborts are counted (handler in) */
  int mem;                  /* trace infos read from memory (tracemem.h) at
                               the safe point, the recorder's activity from
                               its state: no handler on the default path */
  int handler_ref;          /* registry ref of our jit.attach handler */
  int attach_ref, tracemc_ref; /* jit.attach, jit.util.tracemc (or nil) */
  ptrdiff_t key;            /* _VMEVENTS slot of "trace" (0: unknown); a
                               lua_Integer (traces.c asserts the size) */
  int funcinfo_ref;         /* jit.util.funcinfo (or nil) */
  uint32_t gen;             /* install count: stale handlers do nothing */
  int watching;             /* ljprof.watch(): handler stays attached */
  ljp_trinfo **info;        /* by trace number: where it started (pages
                               of 32, traces.c TI) */
  uint32_t ninfo;           /* numbers the pages hold */
  ljp_trinfo pending;       /* the trace being recorded */
  int32_t recent[16];       /* traces stopped lately, ring: machine code
                               ranges to learn when a sample's PC is in
                               none known */
  uint32_t nrecent;
  ljp_abort *aborts;
  uint32_t naborts;
  ljp_trtabs *tabs;         /* the handler's tables, or NULL (above) */
  uint32_t nindex;          /* raw values in tabs->abort_index */
  uint64_t aborts_lost;     /* abort events beyond LJP_MAX_ABORTS records */
  uint64_t events, event_ns; /* trace events handled, time in our handler */
} ljp_tracest;

/* The trace event entry point (safepoint.c) counts each event handled,
** and the time of the timed ones (ns, scaled up to all). */
static inline void ljp_traces_counted(ljp_tracest *t, uint64_t ns)
{
  t->events++;
  t->event_ns += ns;
}

/* -- Naming (names.c, names.h) --------------------------------------------- */

/* Naming a C function whose name may have appeared since the last look
** (a module loaded after the start): the memory of look-ups done, kept by
** its user (per context at the safe point, per run of call counting).
** All zero: every function looked up once (the last 16 remembered), no
** limit on look-ups. */
#define LJP_CNAME_TRIED 16
typedef struct ljp_cname_memo {
  uint32_t limit;           /* at most this many look-ups (0: no limit) */
  int each;                 /* 1: look every function up, not once each */
  uint32_t n;               /* look-ups done */
  uintptr_t tried[LJP_CNAME_TRIED]; /* functions looked up (ring) */
  int walked;               /* package.loaded walked this run, when: */
  uint64_t sig;             /* ljp_cname_sig then */
} ljp_cname_memo;

/* A Lua function's names as a live frame showed them: chunk name,
** its name where it was called (NULL: none), first line. Keyed by the
** function object's address, which is valid only while the function
** lives: a weak-valued registry table (lightuserdata address ->
** function) proves it at each lookup, so an address reused by a new
** function never gets the old one's names. Normal context. */
typedef struct ljp_fname {
  uintptr_t fn;
  uintptr_t bc;             /* its first instruction (its prototype) when
                               learnt, 0 if unknown */
  char *source, *name;
  int linedefined;
  uint32_t gen;             /* its learning's number (names.c, counted
                               for the process): one per source/name
                               strings, not reused within 2^32 learnings */
} ljp_fname;

/* The name a function of a prototype was last called by, by the
** prototype's first instruction and signature (ljp_proto_sig): for a
** prototype known to be alive (a trace started in it) whose closure was
** never seen, or has been collected. */
typedef struct ljp_pname {
  uintptr_t bc;
  uint64_t sig;
  char *name;
} ljp_pname;

typedef struct ljp_fnames {
  ljp_fname *e;
  uint32_t cap, n;
  int ref;                  /* registry: address -> function, weak values */
  ljp_pname *p;             /* by prototype */
  uint32_t pcap, pn;
} ljp_fnames;

/* -- The trace at a tick: vm.h's ljp_vm_trace, ljp_vm_trace_holds ------------- */

/* LuaJIT's compiled traces read from memory (tracemem.c learns and proves
** the layout; tracemem.h has the rest of its readers). Inline: the tick
** reads them on every sample in compiled code. */
typedef struct ljp_tmlayout {
  volatile int ok;        /* every offset below proven */
  ptrdiff_t g_trace;      /* global_State + this: jit_State's trace array
                             (one GC reference per trace number) */
  ptrdiff_t g_sizetrace;  /* global_State + this: uint32 size of it */
  ptrdiff_t t_mcode;      /* GCtrace: start of its machine code */
  ptrdiff_t t_szmcode;    /* GCtrace: uint32 size of the machine code */
  ptrdiff_t t_startpt;    /* GCtrace: the prototype it started in */
  ptrdiff_t t_startpc;    /* GCtrace: the bytecode it started at */
  ptrdiff_t t_root;       /* GCtrace: uint16 root trace, 0 for a root */
  ptrdiff_t pt_size;      /* GCproto's size: its bytecode follows it */
  ptrdiff_t pt_chunkname; /* GCproto: GC reference to the chunk name */
  ptrdiff_t str_size;     /* GCstr's size: its characters follow it */
  int traces;             /* traces the proof was made with */
  char why[96];           /* why it is off */
} ljp_tmlayout;

extern ljp_tmlayout ljp_tml;

/* Signal context: trace number tr of the state whose global_State is g,
** or 0 (no such trace, or the layout unknown). A trace being recorded is
** J->cur, jit_State's first member, until it is assembled: not a trace
** yet. J->cur lies between G and jit_State's trace array field (g_trace);
** a saved trace anywhere else, right after the GG_State too (a bound of
** 8 KB after G took such a trace for J->cur at some heap layouts:
** test_vmtrace). */
static inline uintptr_t ljp_vm_trace(uintptr_t g, int32_t tr)
{
  uintptr_t arr, T;
  if (!ljp_tml.ok || !g || tr <= 0 ||
      (uint32_t)tr >= *(volatile uint32_t *)(g + (uintptr_t)ljp_tml.g_sizetrace))
    return 0;
  arr = *(volatile uintptr_t *)(g + (uintptr_t)ljp_tml.g_trace);
  T = arr ? *(volatile uintptr_t *)(arr + 8 * (uintptr_t)tr) : 0;
  return T - g <= (uintptr_t)ljp_tml.g_trace ? 0 : T;
}

/* Signal context: does trace T's machine code hold pc? */
static inline int ljp_vm_trace_holds(uintptr_t T, uintptr_t pc)
{
  uintptr_t mc = *(volatile uintptr_t *)(T + (uintptr_t)ljp_tml.t_mcode);
  uint32_t sz = *(volatile uint32_t *)(T + (uintptr_t)ljp_tml.t_szmcode);
  return pc >= mc && pc - mc < sz;
}

/* -- One safe point's naming state (vm.h: ljp_frames_*) -------------------- */

/* Kept by the record loop (complete.c) on its stack for one safe point,
** for its size only; luaframes.c reads and writes it: the live stack,
** walked once and named level by level, and the few distinct leaves the
** records resolved (a variant each). */
#define LJP_VM_LIVE_MAX 512  /* live frames walked (and compared with a
                                capture) */
#define LJP_VM_NVARIANT 4
#define LJP_VM_NATIVE_MAX 32 /* ring.h's LJP_NATIVE_MAX (luaframes.c checks) */
typedef struct livestack {
  int walked, m, bottom;
  uintptr_t stack;
  int curline;                     /* level 0's current line (-2: unread) */
  ljp_lframe f[LJP_VM_LIVE_MAX];
  uint32_t fid[LJP_VM_LIVE_MAX];   /* frame of each level, 0: not yet */
} livestack;

typedef struct variant {
  uintptr_t cfunc;
  int32_t trace;
  int selfpc;                      /* the PC lay in ljprof's own code */
  int host;                        /* no Lua call was active (LJP_LUA_HOST) */
  uint32_t stack, func, tloc;
  int nn;                          /* native frames on top, by frame */
  uint32_t nat[LJP_VM_NATIVE_MAX];
  int nlua;                        /* Lua frames captured at the signal */
  int nspine;
  ljp_spine spine[LJP_SPINE_MAX];
  uintptr_t lstack;
  ljp_lframe lua[LJP_LUA_MAX];
} variant;

typedef struct ljp_frames_pass {
  livestack ls;
  variant v[LJP_VM_NVARIANT];
  int nv;
} ljp_frames_pass;

#endif
