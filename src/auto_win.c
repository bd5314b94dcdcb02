/*
** Windows: no auto-started runs' helper (auto.h): the export helper is
** woken by a control signal and borrows the context through a signal
** (exit_signals.h, lending), neither of which exists here. A run asked
** for with LJPROF's export options is attached (index 1) and its
** helper's start fails, with one line;
** everything else is a run that was not auto-started. Normal context.
*/
#ifdef _WIN32  /* the rock compiles every src file: nothing elsewhere */
#include <stdio.h>

#include "ljp.h"
#include "auto.h"

int ljp_auto_attach(ljp_ctx *ctx, double every_s, uint32_t keep,
                    uint64_t maxbytes)
{
  (void)ctx; (void)every_s; (void)keep; (void)maxbytes;
  return 1;  /* the state's index (%s): one Lua state */
}

int ljp_auto_start(ljp_ctx *ctx, lua_State *L, const char *spec,
                   size_t speclen, int control, int signo, int paused,
                   char *err, size_t errlen)
{
  (void)ctx; (void)L; (void)spec; (void)speclen; (void)control;
  (void)signo; (void)paused;
  snprintf(err, errlen, "ljprof: periodic export and the control signal "
           "are not available on Windows");
  return -1;
}

void ljp_auto_stop(ljp_ctx *ctx) { (void)ctx; }
void ljp_auto_release(ljp_ctx *ctx) { (void)ctx; }

size_t ljp_auto_name(const ljp_ctx *ctx, const char *tmpl, char *out,
                     size_t n)
{
  (void)ctx; (void)tmpl; (void)out; (void)n;
  return 0;
}

void ljp_auto_written(ljp_ctx *ctx, const char *path)
{
  (void)ctx; (void)path;
}

void ljp_auto_notice(const char *line)
{
  static int once;
  if (!once++) fprintf(stderr, "%s\n", line);
}

void ljp_auto_counts(const ljp_ctx *ctx, uint64_t *exports,
                     uint64_t *export_ns)
{
  (void)ctx;
  *exports = *export_ns = 0;
}

#endif /* _WIN32 */
