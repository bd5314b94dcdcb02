/*
** The one owner of signal dispositions, signal masks and ljprof's threads.
**
** Rule: no other src file calls sigaction, signal, sigprocmask,
** pthread_sigmask or pthread_create; they call the functions here
** (tests/structure.py fails the build's tests otherwise). What a
** handler does, and which signal it takes when, stays with the file
** that owns the handler (signal.c: the sampling handler; exit_signals.c:
** the exit handler and its wrapper of luajit's SIGINT handler; auto.c:
** the control handler; spawn.c: the command's child); how a disposition
** is read, set and put back, and how a thread of ljprof's starts, is here.
**
** Every handler ljprof installs has SA_SIGINFO | SA_RESTART. Every thread
** ljprof starts (the timer thread, the exit writer, the export helper,
** the command's progress thread) blocks every signal from its first
** instruction: no handler ever runs there, and a process-directed signal
** goes to a thread of the program's.
**
** Signal context: every function but ljp_thread_start is
** async-signal-safe (sigaction, pthread_sigmask, raise and an atomic load
** only; errno is not kept: the handlers keep it). The sampling handler
** (a foreign signal, luajit's SIGINT handler watched), the exit handler
** and the SIGINT wrapper call them there.
*/
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>

#include "sigowner.h"

/* -- Dispositions ---------------------------------------------------------- */

int ljp_sig_get(int signo, struct sigaction *cur)
{
  return sigaction(signo, NULL, cur);
}

int ljp_sig_handler_is(int signo, ljp_sig_fn fn)
{
  struct sigaction cur;
  if (sigaction(signo, NULL, &cur) != 0) return -1;
  return (cur.sa_flags & SA_SIGINFO) && cur.sa_sigaction == fn;
}

int ljp_sig_install(int signo, ljp_sig_fn fn, int block_all)
{
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_sigaction = fn;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  if (block_all) sigfillset(&sa.sa_mask);
  else sigemptyset(&sa.sa_mask);
  return sigaction(signo, &sa, NULL);
}

int ljp_sig_put(int signo, const struct sigaction *saved)
{
  return sigaction(signo, saved, NULL);
}

void ljp_sig_put_if(int signo, ljp_sig_fn fn, const struct sigaction *saved)
{
  if (ljp_sig_handler_is(signo, fn) == 1) sigaction(signo, saved, NULL);
}

int ljp_sig_default(int signo, struct sigaction *old)
{
  struct sigaction dfl;
  memset(&dfl, 0, sizeof(dfl));
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  return sigaction(signo, &dfl, old);
}

void ljp_sig_discard(int signo)
{
  struct sigaction ign, cur;
  if (sigaction(signo, NULL, &cur) != 0) return;
  memset(&ign, 0, sizeof(ign));
  ign.sa_handler = SIG_IGN;
  sigaction(signo, &ign, NULL);   /* discards the pending one */
  sigaction(signo, &cur, NULL);
}

void ljp_sig_raise_default(int signo)
{
  sigset_t set;
  ljp_sig_default(signo, NULL);
  sigemptyset(&set);
  sigaddset(&set, signo);
  pthread_sigmask(SIG_UNBLOCK, &set, NULL);
  raise(signo);
}

/* -- The sampling handler's disposition ------------------------------------ */

static _Atomic(ljp_sig_fn) sampler;

void ljp_sig_sampler_set(ljp_sig_fn fn)
{
  atomic_store(&sampler, fn);
}

int ljp_sig_sampler_ours(int signo)
{
  struct sigaction cur;
  ljp_sig_fn fn = atomic_load(&sampler);
  if (sigaction(signo, NULL, &cur) != 0) return 1;  /* cannot tell */
  return fn && (cur.sa_flags & SA_SIGINFO) && cur.sa_sigaction == fn;
}

int ljp_sig_sampler_disposition(int signo)
{
  struct sigaction cur;
  ljp_sig_fn fn = atomic_load(&sampler);
  if (sigaction(signo, NULL, &cur) != 0) return LJP_SIG_OURS;  /* cannot tell */
  if (cur.sa_flags & SA_SIGINFO)
    return fn && cur.sa_sigaction == fn ? LJP_SIG_OURS : LJP_SIG_OTHER;
  return cur.sa_handler == SIG_DFL || cur.sa_handler == SIG_IGN ? LJP_SIG_NONE
                                                                : LJP_SIG_OTHER;
}

int ljp_sig_is_default(int signo)
{
  struct sigaction cur;
  if (sigaction(signo, NULL, &cur) != 0) return 0;  /* cannot tell */
  return !(cur.sa_flags & SA_SIGINFO) && cur.sa_handler == SIG_DFL;
}

/* -- Masks and threads ----------------------------------------------------- */

int ljp_sig_mask(int how, const sigset_t *set, sigset_t *old)
{
  return pthread_sigmask(how, set, old);
}

void ljp_sig_block_all(sigset_t *old)
{
  sigset_t all;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, old);
}

int ljp_thread_start(pthread_t *th, void *(*fn)(void *), void *arg)
{
  sigset_t all, old;
  int rc;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);  /* the new thread inherits it */
  rc = pthread_create(th, NULL, fn, arg);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  return rc;
}
