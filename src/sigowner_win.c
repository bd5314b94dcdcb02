/*
** Windows: signal dispositions (sigowner.h) that the shared files ask
** about. No signal carries ticks here (timer_win.c takes them on its
** thread): the sampler's disposition is always "ours", so the run's
** signal check (run.c) never finds the ticks lost. Any context.
*/
#ifdef _WIN32  /* the rock compiles every src file: nothing elsewhere */
#include "sigowner.h"

int ljp_sig_sampler_disposition(int signo)
{
  (void)signo;
  return LJP_SIG_OURS;
}

#endif /* _WIN32 */
