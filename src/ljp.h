/*
** The per-state context: a composition of parts, each declared in its
** owner's header and written only by its owner (hook.h, timer.h,
** zones.h, labels.h, exit_part.h, store.h, codemap.h, auto_part.h, ring.h;
** the VM's parts, traces and names: vm.h), plus identity, run control and
** the handler's counters. See docs/design.md, "Pipeline" and "The
** context" (who writes what):
**
**   timer_*.c -> signal.c -> ring -> safepoint.c -> complete.c -> store.c
**   (ticks)      (handler)   (SPSC)  (the hook)     (stack keys)  (counts)
**
** Each part's field names its owner ("owner: file.c"): only the owner's
** files (those named, and the header declaring the part's type, whose
** inline functions are the owner's) write its fields; others call a
** function of the owner. tests/structure.py reads these marks and checks.
**
** Rules of this header: it holds the context and small leaf definitions
** (types, declarations); it calls nothing (no inline function), and it
** includes the headers of the parts and of the types it names, and a few
** headers of files that never take a context (dumpstack.h, slots.h,
** table.h, vmprobe.h), so no file below the context depends on a file
** above it (tests/structure.py: no cycle in the includes, inline calls
** and linked symbols of src/). The files that take a context include
** the headers of what else they call (calls.h, unwind.h, symbols.h,
** auto.h, exit_signals.h) themselves. A part whose owner takes a
** context has its type in a header of its own (auto_part.h,
** exit_part.h), which is what this header includes.
**
** Entry points (signal.c, safepoint.c, api.c, lua_ljprof.c) look a
** context up; the modules below them are handed one.
*/
#ifndef LJP_H
#define LJP_H

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <unistd.h>
#include <time.h>

#include <lua.h>

#include "../include/ljprof.h"
#include "auto_part.h"
#include "buf.h"
#include "clocks.h"
#include "codemap.h"
#include "dumpstack.h"
#include "ring.h"
#include "store.h"
#include "timer.h"
#include "zones.h"
#include "labels.h"
#include "exit_part.h"
#include "slots.h"
#include "table.h"
#include "hook.h"
#include "os.h"
#include "vm.h"

/* Safe point entry points (safepoint.c): the functions LuaJIT calls. Run
** control binds them to a context at start (the modules below them never
** name an entry point, so no file depends on one above it). */
typedef struct ljp_entries {
  lua_Hook hook;                 /* the count/call hook */
  lua_CFunction trace_event;     /* jit.attach "trace" handler */
  lua_CFunction sethook_wrap, gethook_wrap; /* debug.* while counting */
  lua_CFunction exit_event;      /* jit.attach "texit" (LJPROF_STACKS=check) */
  lua_CFunction record_event;    /* jit.attach "record" (inline=recorded) */
} ljp_entries;

/* -- The per-state context ----------------------------------------------- */

typedef enum { LJP_IDLE, LJP_RUNNING, LJP_FAILED } ljp_run_state;


struct ljp_ctx {
  /* Identity. */
  int slot;                 /* index in the process-wide slot table */
  lua_State *L;             /* private anchored thread of the state; hooks
                               are per state, so any thread of it will do */
  int anchor_ref;           /* registry ref keeping L alive */
  pid_t pid, tid;           /* profiled OS thread */
  pthread_t thread;

  /* Run control (run.c). */
  int steps_up;             /* start steps done, taken down in reverse */
  int started;              /* every step came up: results are written */
  ljprof_options pending_opt; /* the options of the run being started */
  /* start() after stop() in the callback: started when the stop is done
  ** (its strings are owned copies). */
  int restart_pending;
  ljprof_options restart_opt;
  const ljp_entries *restart_entries;

  /* Configuration of the current run. */
  ljprof_options opt;       /* strings below are owned copies */
  char *stack_fmt, *output;
  char *out_path, *out_cpath; /* the package paths output is written with
                               (writer.c): the program's at start */
  ljp_timerst tmr;          /* the timer (owner: timer_*.c, signal.c) */

  /* Sampling path: written by the handler. */
  _Atomic uint32_t token;   /* signal token of the run (0: none) */
  ljp_ring ring;            /* (owner: ring.c) */
  _Atomic uint64_t seq, n_signals, n_ticks, n_dropped, n_merged;
  _Atomic uint64_t n_missed;  /* wall, thread: ticks the timer thread woke
                                 too late for (not in n_ticks) */
  _Atomic int ring_owner;   /* who writes to the ring now: 0 none, 1 the
                               handler, 2 the timer thread (blocked ticks) */
  _Atomic uint64_t n_idle;  /* ticks of a blocked thread, not signalled
                               (timer_thread.c, ljp_blocked_push) */
  _Atomic uint64_t n_native_unwinds, n_native_frames, n_native_truncated,
      n_native_skipped;
  int native_on;            /* this run captures native stacks */
  const char *native_why;   /* why native_on is 0, said after the start */
  volatile sig_atomic_t native_inside; /* the handler is walking */
  uintptr_t native_stk_lo, native_stk_hi; /* the profiled thread's stack
                            ** (unwind.c, learnt at start): walks read
                            ** only inside it */
  uint32_t jit_busy_run;    /* signals in a row that found the JIT busy */
  volatile sig_atomic_t state;     /* ljp_run_state */

  /* The Lua hook, shared with the program (hook.c), and the entry points
  ** it and the trace events call (bound at start). */
  ljp_hookst hook;          /* (owner: hook.c) */
  const ljp_entries *entries;

  /* VM state classification. */
  uintptr_t vm_g;           /* global_State for ljp_vm_read, or 0: PC */
  ljp_codemap map;          /* (owner: codemap.c) */
  ljp_tracest tr;           /* trace events, starts, aborts (owner:
                               traces.c) */

  /* Safe point and aggregation (normal context). */
  int in_safepoint, stop_requested;
  int sp_callee;            /* this safe point is a call event entering a
                               C function: live level 0 has not run yet
                               (safepoint.c sets it, luaframes.c reads) */
  uint64_t sig_checked_ns;  /* last check that the signal is still ours */
  uint64_t sig_ticks, sig_clock_ns; /* ticks and run clock then */
  uint64_t sig_sent;         /* and the timer thread's ticks sent */
  uint64_t sig_run_clock_ns; /* the run's clock when its ticks started */
  int sig_lost;             /* the program took the signal: run stopped */
  ljp_store store;          /* frames, stacks, counts (owner: store.c) */
  struct ljp_namecache *namecache; /* bytecode -> names (luaframes.c) */
  uint32_t own_frame;       /* the frame "[ljprof]" of this store (0: not
                               interned yet) */
  ljp_buf scratch;
  struct ljp_natcache *natcache; /* native address -> name (symbols.c) */
  ljp_cname_memo cnames;    /* unnamed C functions already looked up
                               (owner: names.c) */
  ljp_fnames fnames;        /* Lua functions seen live (owner: names.c) */
  int exact_on;             /* the handler captures Lua frames (luastack.c) */
  _Atomic uint64_t n_lua_captures; /* records with Lua frames (handler) */
  _Atomic uint64_t n_host;   /* ticks in the host's own code: no Lua call
                                was active on the running thread */
  uint64_t stack_checks, stack_mismatches; /* LJPROF_STACKS=check */
  int jitmode_on;            /* LuaJIT's profiling mode set (jitmode.c) */
  int jitmode_run;           /* ... for this run (kept after stop) */
  struct ljp_irmap *irmap;   /* inline=recorded: the record map (irmap.c) */
  uint64_t inline_samples;   /* records given frames a trace inlined */
  uint64_t inline_undecoded; /* records whose snapshot was not decoded */
  uint64_t inline_estimated; /* records between two snapshots that differ */
  uint64_t inline_recorded;  /* records given frames by the record map */
  uint64_t names_late;       /* trace start functions left to the run's
                                end to be named (luaframes.c) */
  uint64_t names_late_found; /* ... of them named there */
  uint64_t snap_checks, snap_mismatches; /* trace exits checked */
  /* LJPROF_STACKS=check: the trace exit whose restored frames the next
  ** safe point compares with the snapshot's decoded ones (luaframes.c). */
  struct {
    int pending;
    int32_t tr, ex;
    uintptr_t T;
    int handler_ref;        /* our "texit" handler, LUA_NOREF: none */
  } snapchk;
  uint64_t completed, safepoints, hook_ns, vm[5];
  uint64_t recorder_kept;   /* safe points inside a recording whose trace
                               abort was taken back (safepoint.c) */
  uint64_t complete_ns;
  _Atomic uint64_t handler_ns;  /* signal context, relaxed adds */
  uint64_t cb_ticks;        /* ticks not yet delivered to the callback */
  int cb_vmstate;
  uint64_t cb_host;         /* host ticks (LJP_LUA_HOST) not yet delivered:
                               a callback call of their own (safepoint.c) */
  lua_State *cb_host_L;     /* the thread of that call while it runs: its
                               dumpstack is the host marker (api.c) */

  char *error;              /* why the run failed (callback error) */

  ljp_zones zones;          /* zone stack; the handler reads cur (owner:
                               zones.c) */
  ljp_labels labels;        /* label sets; the handler reads cur (owner:
                               labels.c) */
  /* The run's clock: its start (Unix time and CLOCK_MONOTONIC) and stop
  ** (0 while it runs), for the profile's time and duration. */
  uint64_t start_unix_ns, start_ns, stop_ns;
  char thread_name[17];     /* the profiled thread's name at the start */
  ljp_exitst exit;          /* exit signal waiting, one file per OS
                               (owners: exit_signals.c, exit_win.c) */
  ljp_autost autos;         /* started from LJPROF: exports (owner: auto.c) */



  /* Exact call counts (calls.c). While counting, our hook stays installed
  ** with the program's mask plus LUA_MASKCALL between samples; the handler
  ** reads counting to arm with LUA_MASKCALL kept. */
  volatile sig_atomic_t calls_skip; /* next call event is our own: ignore */
  struct ljp_calls *calls;  /* counts of the current or last run, or NULL */
};

/* Signal installation (signal.c). The handler stays installed once set
** (inert when no run is live), so a late signal can never kill the
** process; the library pins itself in memory for the same reason. */
int ljp_signal_install(int signo, char *err, size_t errlen);
/* A run installed the handler and pinned the library (never unloaded). */
int ljp_signal_pinned(void);
/* Its disposition, queried and changed: sigowner.h. */
/* sample.c. One tick of weight w at pc into the ring, the caller holding
** it (ring_owner); regs: the thread's registers for the native walk (NULL:
** none); lite: no native walk nor Lua capture. Sampling context: the
** signal handler, or a timer thread with the profiled thread stopped. */
struct ljp_regs;
void ljp_sample(ljp_ctx *ctx, uintptr_t pc, const struct ljp_regs *regs,
                uint32_t w, int lite);
/* Normal context, on the timer thread, the profiled thread blocked in a
** system call: capture what a tick would record, then push it with
** weight w (0: a handler holds the ring now). */
int ljp_blocked_capture(ljp_ctx *ctx, uintptr_t pc, ljp_record *rec);
int ljp_blocked_push(ljp_ctx *ctx, const ljp_record *proto, uint32_t w);
extern _Atomic uint64_t ljp_stale_signals;
extern _Atomic int ljp_live_runs;   /* run.c: live runs, for exec.c, */
extern _Atomic int ljp_live_pid;    /* and the process they run in */

extern const ljp_entries ljp_safepoint_entries;
void ljp_hook(lua_State *L, lua_Debug *ar);

/* Completing samples at the safe point (complete.c). */
void ljp_complete(ljp_ctx *ctx, lua_State *L); /* complete pending records */
/* After an exit signal, by the helper: without the Lua stack. */
void ljp_complete_offline(ljp_ctx *ctx, lua_State *E);
/* While the context is lent to the export helper (auto.c), the thread
** running on: the pending records older than before_ns, completed as
** offline into out[0..max) (their ids the store's), their weight taken
** (take: the thread's safe point counts only what is added later) or
** only read (a copy). Returns the count; *left: the ticks of the pending
** records not taken. */
uint32_t ljp_complete_pending(ljp_ctx *ctx, uint64_t before_ns, int take,
                              ljp_offrec *out, uint32_t max, uint64_t *left);

/* Aggregation: the completed ring records into the store, inside the
** exit signals' gate (run.c). */
void ljp_aggregate(ljp_ctx *ctx);

/* Stack dumps: dumpstack.h; names of C and fast functions: names.h.
** Native stacks: capture (unwind.h), names (symbols.h); the loaded
** objects are the object registry's (objects.h). Exact call counts:
** calls.h. */

/* Run control (run.c): start brings the modules up in order, stop takes
** them down in reverse. The caller (api.c) has validated the options,
** checked the output and installed the signal handler. */
int ljp_run_start(ljp_ctx *ctx, lua_State *L, const ljprof_options *opt,
                  const ljp_entries *entries, char *err, size_t errlen);
void ljp_run_stop(ljp_ctx *ctx, lua_State *L);
/* The profile's clock (start_unix_ns, start_ns) starts now. */
void ljp_run_clock_start(ljp_ctx *ctx);
/* Is a run of ctx up? (A failed run is finished first.) 0, or -1 with the
** error in err. */
int ljp_run_busy(ljp_ctx *ctx, lua_State *L, char *err, size_t errlen);
/* stop() was called from the callback and no start() came after it: the
** run ends when the callback returns, and a start() may follow. */
int ljp_run_stopping(const ljp_ctx *ctx);
/* At a safe point (about every 100 ms) and at stop: is the sampling
** signal still ours? If the program changed its disposition, sampling
** ends (the data stays) and one line says so. */
void ljp_run_check_signal(ljp_ctx *ctx, lua_State *L, int now);
void ljp_run_fail(ljp_ctx *ctx, const char *msg); /* stop sampling, keep data */
/* Keep the trace handler attached until the state closes (ljprof.watch). */
int ljp_run_watch(ljp_ctx *ctx, lua_State *L, const ljp_entries *entries);

/* The C API's context lookup (api.c): only entry points call it. */
ljp_ctx *ljp_ctx_get(lua_State *L, int create);
void ljp_parse_mode(const char *mode, ljprof_options *opt); /* jit.profile */

/* ljp_now_ns, the monotonic clock: os.h. */

#endif
