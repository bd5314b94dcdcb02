/*
** The auto part of a context (ljp_autost), its type only: the field
** ljp_ctx.autos (ljp.h) embeds it, so ljp.h includes this header and not
** auto.h, whose functions take the whole context (auto.c sits above the
** context; its callers include auto.h). Written only by its owner,
** auto.c (tests/structure.py). Types only: no inline function here.
*/
#ifndef LJP_AUTO_PART_H
#define LJP_AUTO_PART_H

#include <signal.h>
#include <stdint.h>

typedef struct ljp_autox ljp_autox;

/* The auto part of a context (written by auto.c; signal.c reads paused).
** All zero for a run that was not auto-started. A snapshot (the export
** helper's copy of a context) has its own seq and t0. */
typedef struct ljp_autost {
  ljp_autox *x;             /* configuration and files, shared */
  uint64_t seq;             /* the interval the store holds: 1, 2... (%n) */
  uint64_t t0;              /* its start, CLOCK_REALTIME ns (%t) */
  uint64_t dropped0;        /* n_dropped at its start */
  volatile sig_atomic_t paused; /* control signal: no samples now */
} ljp_autost;

#endif
