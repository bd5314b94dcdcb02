/*
** Windows: signal dispositions (sigowner.h) that the shared files ask
** about. No signal carries ticks here (timer_win.c takes them on its
** thread): the sampler's disposition is always "ours", so the run's
** signal check (run.c) never finds the ticks lost. And the C runtime's
** SIGINT and SIGBREAK actions, which the console control handler's thread
** reads when Ctrl-C or Ctrl-Break comes (exit_win.c). Any context.
*/
#ifdef _WIN32  /* the rock compiles every src file: nothing elsewhere */
#include <signal.h>

#include "sigowner.h"

/* The C runtime's action for signo (SIGINT, SIGBREAK: what it does on a
** console's Ctrl-C, Ctrl-Break), replaced by the default: SIG_DFL (0),
** SIG_IGN (1), a handler's address (there is no call that reads it
** without setting it). ljp_sig_crt_put puts one back. Normal context
** (exit_win.c: the console control handler's thread). */
uintptr_t ljp_sig_crt_take(int signo)
{
  void (*h)(int) = signal(signo, SIG_DFL);
  return h == SIG_ERR ? 0 : (uintptr_t)h;
}

void ljp_sig_crt_put(int signo, uintptr_t h)
{
  if (h) signal(signo, (void (*)(int))h);
}

int ljp_sig_sampler_disposition(int signo)
{
  (void)signo;
  return LJP_SIG_OURS;
}

#endif /* _WIN32 */
