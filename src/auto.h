/*
** Auto-started runs (auto.c): what a run started from the environment
** (LJPROF, jit/prof/auto.lua) has beyond a -jprof run: the control signal
** (pause/resume, or a snapshot now), periodic export of the profile since
** the last export, output names from a template (%p %s %t %n) and the
** rotation of the files written.
**
** The signal handler of the control signal only counts the signal and
** wakes the export helper, a thread of ljprof's that does the work in a
** Lua state of its own; it borrows each profiled context through the gate
** (exit_signals.h: lending), takes or copies the store, gives the context
** back and renders and writes without the program's thread.
*/
#ifndef LJP_AUTO_H
#define LJP_AUTO_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#include <lua.h>

#include "auto_part.h"   /* ljp_autost, the part */

typedef struct ljp_ctx ljp_ctx;

enum { LJP_CONTROL_OFF, LJP_CONTROL_SNAPSHOT, LJP_CONTROL_TOGGLE };

/* Make ctx's run an auto-started one (before its start): every_s > 0
** exports every that many seconds; keep, maxbytes: rotation (0: none).
** Returns the state's index in the process (%s), from 1. */
int ljp_auto_attach(ljp_ctx *ctx, double every_s, uint32_t keep,
                    uint64_t maxbytes);
/* The run is up: export and control it from the helper. spec: what
** jit.prof.write_after_signal renders ("program\0opts\0output..."); L:
** the state, for its package paths. 0, or -1 and one line in err (the
** run goes on without the helper: no export, no control). */
int ljp_auto_start(ljp_ctx *ctx, lua_State *L, const char *spec,
                   size_t speclen, int control, int signo, int paused,
                   char *err, size_t errlen);
/* The run's own stop comes next: no more exports or control. */
void ljp_auto_stop(ljp_ctx *ctx);
/* The context is being freed. */
void ljp_auto_release(ljp_ctx *ctx);
/* tmpl with its placeholders filled for ctx's interval; 0 (out
** untouched) when ctx's run was not auto-started. */
size_t ljp_auto_name(const ljp_ctx *ctx, const char *tmpl, char *out,
                     size_t n);
/* An output of ctx was written to path: rotation. */
void ljp_auto_written(ljp_ctx *ctx, const char *path);
/* Print line on stderr, once per process. */
void ljp_auto_notice(const char *line);
/* Counters of ctx's exports (its helper's work). */
void ljp_auto_counts(const ljp_ctx *ctx, uint64_t *exports,
                     uint64_t *export_ns);

#endif
