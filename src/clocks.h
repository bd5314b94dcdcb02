/*
** The clocks (clocks.c): one table, indexed by ljprof_clock
** (include/ljprof.h), of what each clock is: the name users write, the
** timer that makes its ticks, the clock its run is measured on and the
** one signal it must use, if any. Every C place that names or chooses a
** clock reads it (api.c, run.c, jitmode.c, lua_ljprof.c). Constant data:
** readable anywhere, signal context included.
**
** The monotonic clock every run-time measurement reads (ljp_now_ns) is
** os.h's (inline, async-signal-safe), included here for the files that
** read it with the clocks.
**
** A new clock: its value in ljprof_clock, one line in clocks.c's table,
** its own timer file (timer_<name>.c, its ops declared in timer.h, listed
** in meson.build).
*/
#ifndef LJP_CLOCKS_H
#define LJP_CLOCKS_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "../include/ljprof.h"
#include "os.h"

struct ljp_timer_ops;

typedef struct ljp_clock_info {
  const char *name;            /* as options, front ends and stats say it */
  const struct ljp_timer_ops *timer;  /* its ticks (timer.h) */
  clockid_t run_clock;         /* ticks are due in proportion to its time
                                  (run.c's signal check) */
  int signo;                   /* the only signal it can use (process-wide,
                                  like itimer's SIGPROF); 0: the option's */
  const char *signame;         /* that signal's name, for messages */
} ljp_clock_info;

/* c's entry, NULL when c is not a clock. */
const ljp_clock_info *ljp_clock(ljprof_clock c);
/* The clock named name, -1 when none is. */
int ljp_clock_find(const char *name);
/* The clock whose timer is ops: its name, "none" when none is. */
const char *ljp_clock_name_of(const struct ljp_timer_ops *ops);
/* The number of clocks (ljprof_clock runs from 0 to it, excluded). */
int ljp_clock_count(void);
/* The names of the clocks, ", " between them ("cpu, wall, itimer,
** thread"), into buf; only those whose signal is not signo when signo is
** not 0. Returns buf. */
const char *ljp_clock_accepted(char *buf, size_t n, int signo);

#endif
