/*
** What the Lua binding (lua_ljprof.c) may ask of a Lua state beyond the
** public C API, without seeing its context: each function looks the
** context up by the state (api.c implements them). Normal context.
*/
#ifndef LJP_QUERY_H
#define LJP_QUERY_H

#include <stdint.h>

#include <lua.h>

#include "buf.h"
#include "labels.h"
#include "store.h"
#include "../include/ljprof.h"

/* A run's state; stats() shows each field through lua_ljprof.c's
** run_fields (one line per field). */
typedef struct ljp_q_run {
  const char *clock;         /* timer name, "none" before any run */
  uint32_t interval_us;
  int signo;
  int running;
  int vmstate_exact;         /* VM states from LuaJIT's own field, not the PC */
  int cfunc_names;           /* the running C function is readable */
  int jit_state;             /* the trace compiler's state was learnt */
  int expired;               /* the duration option ran out */
  int signal_lost;           /* the program took the sampling signal */
  uint64_t aborts_lost;      /* abort records beyond the table */
  uint64_t trace_events, trace_event_ns; /* jit.attach events, our time */
  const char *trace_source;  /* "memory", "events" or "none" */
  int aborts_recorded;       /* the run counted trace aborts (a handler) */
  uint64_t recorder_kept;    /* safe points inside a trace recording whose
                              ** abort was taken back */
  int exact;                 /* Lua frames are captured at the signal */
  int exact_lines;           /* ... and their PCs turned into lines */
  uint64_t lua_captures;     /* records with frames captured at the signal */
  int host_detect;           /* L->cframe learnt: a tick with no Lua call
                             ** active has no Lua frames (else it takes
                             ** the next safe point's, as before) */
  int host_main;             /* g->mainthref learnt too: a call active on
                             ** the main thread keeps a tick from being
                             ** the host's (vmprobe.c, learn_mainth) */
  uint64_t host_ticks;       /* ticks with no Lua call active */
  uint64_t missed;           /* ticks the timer thread woke too late for */
  uint64_t stack_checks, stack_mismatches; /* LJPROF_STACKS=check */
  const char *inline_frames;   /* "snapshots", or why not */
  uint64_t inline_samples, inline_undecoded, inline_estimated;
  uint64_t names_late, names_late_found;
  /* inline=recorded (irmap.h): records given the record map's frames;
  ** "record" events mapped, traces whose map was proven and refused, the
  ** budget spent (the handler detached), why the map is off (NULL: on) */
  uint64_t inline_recorded, record_events, record_traces, record_refused;
  int record_spent;
  const char *record_off;
  uint64_t snap_checks, snap_mismatches;
  const char *error;         /* why the last run failed, or NULL */
  uint64_t exports, export_ns; /* auto-started: files written by the
                              ** export helper, its time */
  uint64_t lend_waits, lend_wait_ns; /* regions of the profiled thread
                              ** that waited for a lent context */
  uint64_t start_unix_ns;    /* when the run started (CLOCK_REALTIME) */
  uint64_t duration_ns;      /* start to stop, or to now while it runs */
  uint64_t interval;         /* periodic export: the interval the store
                                holds (2, 3, ...; 0: the whole run) */
  int tid;                   /* the profiled OS thread */
  const char *thread_name;   /* its name when the run started ("" unknown) */
  int state_id;              /* the profiled state's number in the process
                                (1 for the first; reused after lua_close) */
} ljp_q_run;

/* The state's run; -1 when it was never profiled. */
int ljp_q_run_info(lua_State *L, ljp_q_run *ri);
/* The run's sample counter (ticks), for a reader on another thread (the
** command's progress line, spawn.c); NULL when the state has no context.
** Valid until the context is freed at lua_close. */
const _Atomic uint64_t *ljp_q_ticks(lua_State *L);
/* The jit.profile callback raised msg: stop sampling, keep the data. */
void ljp_q_fail(lua_State *L, const char *msg);
uint64_t ljp_q_stale_signals(void);

/* A stable name for code at address a (a C function that has no Lua
** name): its symbol, else "<object>+0x<offset>"; 0 when a lies in no
** loaded object. */
int ljp_q_code_name(uintptr_t a, char *buf, size_t len);

/* This OS thread's buffer for dumpstack strings (NULL: out of memory). */
ljp_buf *ljp_q_dump_buffer(void);

/* dumpstack for jit.profile-style callers: ljp_dumpstack, except that
** inside the callback's call for host ticks (safepoint.c) the thread it
** was given dumps as one "[host]" frame (ljp_dumpstack_marker). */
int ljp_q_dumpstack(lua_State *L, lua_State *helper, ljp_buf *sb,
                    const char *fmt, int depth);

/* Aggregated results of the current or last run (aggregated first). */
void ljp_q_functions(lua_State *L, ljp_func_visit fn, void *d);
void ljp_q_traces(lua_State *L, ljp_trace_visit fn, void *d);
/* Trace aborts of the run: fn(d, func, line, code, info, info_is_num, at,
** count) per record. */
typedef void (*ljp_abort_visit)(void *d, const char *func, int line, int code,
                                const char *info, int info_is_num,
                                const char *at, uint64_t count);
void ljp_q_aborts(lua_State *L, ljp_abort_visit fn, void *d);
/* Push the call counts list (ljprof.calls()). */
void ljp_q_calls_push(lua_State *L);

/* Exit signals: trap the names in the table at index names; after one,
** a helper thread calls require(module)[func](arg, name) in a Lua state of
** its own whose ljprof functions read this run (pushes the names
** trapped); or (names == 0) stop trapping; or (names < 0) the run writes
** its outputs itself: a signal waits for the stop of the trapping. Raises
** a Lua error when not running. */
int ljp_q_exit_signals(lua_State *L, int names, const char *module,
                       const char *func, const char *arg, size_t arglen);
/* ljprof.write_apart(module, func, arg): require(module)[func](arg) in a
** Lua state of ljprof's own (the program's package paths), whose ljprof
** module reads L's stopped run, then closed: true, or nil and a line. */
int ljp_q_write_apart(lua_State *L, const char *module, const char *func,
                      const char *arg, size_t arglen);

/* The aggregated samples as frames (aggregated first): fn(d, frames, n,
** vmstate, zone, labels, count) per (stack, VM state, zone, label set),
** frames the store's frame ids outermost first, the innermost |depth| of
** the run's depth; -1 without a context or out of memory. */
typedef void (*ljp_q_sample_fn)(void *d, const uint32_t *frames, uint32_t n,
                                int vmstate, const char *zone, int labels,
                                uint64_t count);
int ljp_q_samples(lua_State *L, ljp_q_sample_fn fn, void *d);
/* ljprof_summary_ex with keys in jit.profile's form (fast functions as
** [builtin#N], which the Lua writers map): ljprof.summary(). */
int ljp_q_summary(lua_State *L, ljprof_entry_visit fn, void *data);
/* One frame: kind 'L' (a Lua function: file, line, linedefined and its
** name when it has one), 'C' (a C function or builtin, by name, stable
** across runs) or 'N' (a native frame, by name). Texts are in sb: the
** file first (file_len bytes), then the name (name_len). */
typedef struct ljp_q_frameinfo {
  char kind;
  int has_name;
  size_t file_len, name_len;
  int line, linedefined;
} ljp_q_frameinfo;
int ljp_q_frame(lua_State *L, uint32_t id, ljp_q_frameinfo *fi, ljp_buf *sb);

/* Labels beyond the C API: a set from strings with lengths (its id, or a
** negative LJPROF_LABEL_E* code), a set's pairs, emptying the stack. */
int ljp_q_label_set(lua_State *L, const char *const *kv, const size_t *len,
                    int npairs);
int ljp_q_label_pairs(lua_State *L, int id, ljp_label_visit fn, void *d);
void ljp_q_label_flush(lua_State *L);

/* Zones beyond the C API's handle functions. */
int ljp_q_zone_intern(lua_State *L, const char *name, size_t len);
const char *ljp_q_zone_name(lua_State *L, int id);
int ljp_q_zone_current(lua_State *L);
void ljp_q_zone_flush(lua_State *L);

/* Runs started from LJPROF (auto.c, jit/prof/auto.lua). attach: before
** the start, the state's index (%s), or -1 and one line in err; start: after it, 0 or -1 and
** one line in err; stop: before the run's own stop. output_name: tmpl
** filled for the state's interval, 0 when it is no auto-started run (the
** name stays); output_written: rotation. */
int ljp_q_auto_attach(lua_State *L, double every_s, uint32_t keep,
                      uint64_t maxbytes, char *err, size_t errlen);
int ljp_q_auto_start(lua_State *L, const char *spec, size_t speclen,
                     int control, int signo, int paused,
                     char *err, size_t errlen);
void ljp_q_auto_stop(lua_State *L);
size_t ljp_q_output_name(lua_State *L, const char *tmpl, char *out, size_t n);
void ljp_q_output_written(lua_State *L, const char *path);
void ljp_q_notice(const char *line);   /* on stderr, once per process */

#endif
