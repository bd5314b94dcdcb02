/*
** ljprof: low-overhead statistical sampling profiler for LuaJIT 2.1.
** Public C API.
**
** Three functions have exactly the shape of LuaJIT's luaJIT_profile_*
** (luajit.h), so code written for the built-in profiler ports by renaming.
** The extended start takes an options struct; an aggregated summary can be
** read back without any callback.
**
** One profiler runs per Lua state (global_State); several states in several
** threads may be profiled at the same time, each with its own timer, ring
** and table. Call every function from the thread that runs the state.
*/
#ifndef LJPROF_H
#define LJPROF_H

#include <stddef.h>
#include <stdint.h>
#include <signal.h>

#include <lua.h>

#ifdef __cplusplus
extern "C" {
#endif

#define LJPROF_VERSION "0.1.0"

#if defined(_WIN32) && defined(LJPROF_BUILDING)
#define LJPROF_API __declspec(dllexport)  /* ljprof.dll's exports */
#elif defined(__GNUC__) && !defined(_WIN32)
#define LJPROF_API __attribute__((visibility("default")))
#else
#define LJPROF_API
#endif

/* -- jit.profile-compatible API ------------------------------------------ */

/* Called at a safe point on the profiled thread. L is the interrupted
** coroutine: read its stack (ljprof_dumpstack), never modify it or call
** functions on it. samples = timer ticks since the previous callback,
** vmstate = 'N' (compiled), 'I' (interpreter), 'C' (C code), 'G', 'J'.
** Ticks that found no Lua call active (the host's own code) come in a call
** of their own, before the Lua ticks' call, with vmstate 'C'; during it
** ljprof_dumpstack(L, ...) is the one frame "[host]" (docs/usage.md). */
typedef void (*ljprof_callback)(void *data, lua_State *L, int samples,
                                int vmstate);

/* Start profiling L's state. mode as for jit.profile: "i<ms>" interval
** (default 10 ms), 'f'/'l' accepted (they never flush traces here).
** Errors (already running, no timer, signal taken) are reported on stderr
** as one line; use ljprof_start_ex to get them back instead. */
LJPROF_API void ljprof_start(lua_State *L, const char *mode, ljprof_callback cb,
                  void *data);

/* Stop profiling L's state (no-op if not running). Pending samples are
** completed with the current stack, the output file (if any) is written. */
LJPROF_API void ljprof_stop(lua_State *L);

/* Dump L's stack like luaJIT_profile_dumpstack: byte-identical strings for
** the same fmt ('p' 'f' 'F' 'l' 'Z', others verbatim) and depth (negative =
** outermost first). Returns a per-thread buffer, valid until the next call
** from the same OS thread; *len receives the length (not NUL-terminated
** for the caller's purposes, although a NUL follows). Safe at any time.
** Inside the callback's call for host ticks, L dumps as "[host]". */
LJPROF_API const char *ljprof_dumpstack(lua_State *L, const char *fmt, int depth,
                             size_t *len);

/* -- Extended API -------------------------------------------------------- */

typedef enum ljprof_clock {
  LJPROF_CLOCK_CPU = 0, /* per-thread CPU time, timer_create (default) */
  LJPROF_CLOCK_WALL,    /* wall clock, CLOCK_MONOTONIC timer, same delivery */
  LJPROF_CLOCK_ITIMER,  /* process CPU, SIGPROF, like jit.p's ITIMER_PROF */
  LJPROF_CLOCK_THREAD   /* wall clock: a timer thread signals the Lua thread */
} ljprof_clock;

typedef struct ljprof_options {
  ljprof_clock clock;
  uint32_t interval_us;   /* sampling interval; default 10000 (10 ms) */
  int signo;              /* 0: LJPROF_DEFAULT_SIGNAL (itimer: SIGPROF) */
  uint32_t ring_size;     /* ring records, power of 2; default 1024 */
  const char *stack_fmt;  /* dumpstack fmt of the aggregation key; "fZ;" */
  int stack_depth;        /* its depth; default -100 (root first) */
  const char *output;     /* folded stacks written here at stop (NULL:
                             none): the file `luajit -jprof=<letters>/
                             format=folded,<output>` writes for the run,
                             by the same Lua writer (jit/prof/folded.lua,
                             in a Lua state of ljprof's own), letters
                             being stack_fmt's f F l p; jit/prof/output.lua
                             must be on the state's package.path at
                             start */
  ljprof_callback cb;     /* NULL: aggregate only */
  void *cb_data;
  uint64_t duration_us;   /* stop sampling after this much wall time from
                             the start (0: until stop); the run stays open
                             and its data is read or written at stop */
  int native;             /* 1 (default): aggregated samples also record
                             the native (C) frames running at the signal,
                             spliced above the Lua frame that called them;
                             0: Lua stacks only. Callback runs never
                             capture them (the jit.profile contract). */
  int calls;              /* 1: also count every call of every function
                             exactly, with a call hook, until stop (the
                             JIT is turned off and its traces flushed
                             meanwhile, then put back); 0 (default): no */
  int aborts;             /* 1: also record why traces were aborted
                             (ljprof.aborts(), the text report's "hot but
                             interpreted" reasons), through a jit.attach
                             handler called on every trace event; 0
                             (default): nothing is paid per trace event */
  int inline_frames;      /* frames LuaJIT inlined into a trace:
                             LJPROF_INLINE_RECORDED (ljprof_options_init's
                             default): the frames each IR instruction was
                             recorded in (a jit.attach "record" handler for
                             a bounded number of recorded bytecodes),
                             compiled code unchanged, the snapshots' rule
                             where unknown; LJPROF_INLINE_SNAPSHOTS (0)
                             from the trace's snapshots only, no handler,
                             compiled code unchanged;
                             LJPROF_INLINE_EXACT: LuaJIT's profiling mode
                             (as jit.p's), a snapshot at every function
                             change, exact per function, compiled code
                             changed; LJPROF_INLINE_OFF: the frame the
                             trace runs in */
} ljprof_options;

#define LJPROF_INLINE_SNAPSHOTS 0
#define LJPROF_INLINE_EXACT 1
#define LJPROF_INLINE_OFF 2
#define LJPROF_INLINE_RECORDED 3

/* Default signal: SIGURG. Not SIGPROF, so that LuaJIT's own jit.profile
** can run in the same process; and a signal whose default action is to
** ignore it, so that a program that resets the signal to SIG_DFL (some
** daemons reset every signal) is not ended by the next tick, as it was by
** a real-time signal's default action: the run then says so in one line
** and keeps its samples. Per-thread timers deliver it to the profiled
** thread; a tick merged into a pending one is counted as its overrun. */
#define LJPROF_DEFAULT_SIGNAL SIGURG

LJPROF_API void ljprof_options_init(ljprof_options *opt);

/* Returns 0 on success; on failure -1 and one line in err (if given). */
LJPROF_API int ljprof_start_ex(lua_State *L, const ljprof_options *opt, char *err,
                    size_t errlen);

/* Is L's state being profiled right now? */
LJPROF_API int ljprof_running(lua_State *L);

typedef struct ljprof_stats {
  uint64_t signals;    /* timer signals taken by the handler */
  uint64_t ticks;      /* timer ticks, incl. overruns (= sample weight) */
  uint64_t completed;  /* ticks completed with a stack at a safe point */
  uint64_t dropped;    /* ticks lost: ring full with nothing to merge into */
  uint64_t merged;     /* signals folded into a pending record (ring full) */
  uint64_t pending;    /* ticks still waiting for a safe point */
  uint64_t safepoints; /* safe-point hook runs */
  uint64_t batches;    /* ring -> table aggregation batches */
  uint64_t stacks;     /* unique stack strings */
  uint64_t entries;    /* table entries (stack, vmstate, zone) */
  uint64_t hook_ns;    /* time spent in the safe-point hook */
  uint64_t bytes;      /* memory held by ring and table */
  uint64_t vm[5];      /* ticks per state N I C G J */
  /* Cost by stage (the hook's time above includes the two first). */
  uint64_t handler_ns;   /* in the signal handler (sampling code) */
  uint64_t complete_ns;  /* stack dumps completing records (safe point) */
  uint64_t aggregate_ns; /* ring -> hash table */
  uint64_t aggregated;   /* records moved into the table */
  /* Native (C) stacks, see ljprof_options.native. */
  uint64_t native_unwinds;   /* handler unwinds done */
  uint64_t native_frames;    /* native frames recorded */
  uint64_t native_truncated; /* unwinds stopped early (no unwind info
                                known for a frame, or the depth limit) */
  uint64_t native_skipped;   /* samples taken without a native stack
                                because unwinding was not safe then */
} ljprof_stats;

/* Statistics of the current or last run of L's state; 0 on success. */
LJPROF_API int ljprof_get_stats(lua_State *L, ljprof_stats *st);

/* Visit every aggregated entry of the current or last run (the ring is
** aggregated first). count is in ticks. zone is "" without a zone. The
** stack is in the run's dumpstack format, except that a fast function is
** named as Lua names it ("pcall", "string.byte") rather than
** "[builtin#N]" (an id without a learnt name stays so). */
typedef void (*ljprof_visit)(void *data, const char *stack, size_t len,
                             int vmstate, const char *zone, uint64_t count);
LJPROF_API int ljprof_summary(lua_State *L, ljprof_visit fn, void *data);

/* The same, with each entry's label set (see ljprof_label_push): entries
** are per (stack, VM state, zone, label set). */
typedef struct ljprof_entry {
  const char *stack;        /* in the run's dumpstack format */
  size_t len;
  int vmstate;              /* 'N' 'I' 'C' 'G' 'J' */
  const char *zone;         /* "" without a zone */
  int nlabels;              /* label pairs, sorted by key: */
  const char *const *labels; /* labels[2i] a key, labels[2i+1] its value */
  uint64_t count;           /* ticks */
} ljprof_entry;
typedef void (*ljprof_entry_visit)(void *data, const ljprof_entry *e);
LJPROF_API int ljprof_summary_ex(lua_State *L, ljprof_entry_visit fn,
                                 void *data);

/* Lua module entry point (require "ljprof"). */
/* Where ljprof reads LuaJIT's trace objects (the usual case: stats()
** trace_source "memory"), a run knows every trace, also those compiled
** before it started, and this does nothing. Otherwise: watch trace
** compilation from now until the state closes (not only while
** profiling), so that samples in traces compiled before a run starts are
** charged to the function the trace started in, at a few microseconds
** per compiled trace. 0 on success, -1 without a JIT. */
LJPROF_API int ljprof_watch_traces(lua_State *L);

/* Zones: a per-state stack of named subsystems; each sample records the
** zone active when its tick happened. push returns 0, or -1 when the
** stack (64 levels) is full; pop returns the name popped, or NULL when
** the stack is empty. */
LJPROF_API int ljprof_zone_push(lua_State *L, const char *name);
LJPROF_API const char *ljprof_zone_pop(lua_State *L);
/* Fast path (used through the FFI by ljprof.zone): a handle for L's
** state, names interned to ids once, then pushes and pops by id. */
LJPROF_API void *ljprof_zone_handle(lua_State *L);
LJPROF_API int ljprof_zone_intern(void *handle, const char *name);
LJPROF_API int ljprof_zone_push_h(void *handle, int id);
LJPROF_API int ljprof_zone_pop_h(void *handle); /* id popped, 0: empty */
LJPROF_API int ljprof_zone_active_h(void *handle); /* a run is active */

/* Labels: key/value pairs (endpoint=/api) that every sample taken while
** they are pushed carries (summary entries, pprof sample labels), so that
** a profile can be sliced by request type. A per-state stack, like zones:
** a push merges its pairs onto the current set (a key pushed again takes
** the new value), a pop restores the set before. Pairs are kv[2i] (key)
** and kv[2i+1] (value), C strings; keep the values few (an endpoint, not
** a request id): each distinct set is kept for the state's life. Every
** call returns 0 (or an id >= 0) on success, or one of: */
#define LJPROF_LABEL_EKEY     (-1) /* a key empty, over 256 bytes, or one
                                      ljprof sets itself: vmstate, zone,
                                      thread, thread_id, state */
#define LJPROF_LABEL_EVALUE   (-2) /* a value NULL or over 256 bytes */
#define LJPROF_LABEL_ETOOMANY (-3) /* over 64 pairs in a set */
#define LJPROF_LABEL_EFULL    (-4) /* 65535 distinct sets, or out of memory */
#define LJPROF_LABEL_EDEEP    (-5) /* 64 pushes nested */
#define LJPROF_LABEL_ESET     (-6) /* not a set id of this state */
#define LJPROF_LABEL_EEMPTY   (-7) /* pop with nothing pushed */
LJPROF_API int ljprof_label_push(lua_State *L, const char *const *kv,
                                 int npairs);
LJPROF_API int ljprof_label_pop(lua_State *L);
/* Fast path (used through the FFI by ljprof.label), on the handle of
** ljprof_zone_handle: a set interned once to an id (0: the empty set),
** then pushes and pops by id; pop returns the id of the set that was
** current (the merged one). */
LJPROF_API int ljprof_label_intern(void *handle, const char *const *kv,
                                   int npairs);
LJPROF_API int ljprof_label_push_h(void *handle, int id);
LJPROF_API int ljprof_label_pop_h(void *handle);
LJPROF_API int ljprof_label_current_h(void *handle); /* 0: none */

LJPROF_API int luaopen_ljprof(lua_State *L);

#ifdef __cplusplus
}
#endif

#endif
