/*
** Signal dispositions, signal masks and ljprof's threads: one owner
** (sigowner.c). No other src file calls sigaction, signal,
** sigprocmask, pthread_sigmask or pthread_create (tests/structure.py).
*/
#ifndef LJP_SIGOWNER_H
#define LJP_SIGOWNER_H

#include <pthread.h>
#include <signal.h>

#include "os.h"   /* siginfo_t, sigset_t on Windows */

struct sigaction;  /* (none on Windows: only named) */
typedef void (*ljp_sig_fn)(int, siginfo_t *, void *);

/* -- Dispositions (async-signal-safe: each is sigaction calls) ----------- */

/* signo's disposition now: 0, or -1 when it cannot be read. */
int ljp_sig_get(int signo, struct sigaction *cur);
/* Is fn signo's handler now? 1 yes, 0 no, -1 cannot tell. */
int ljp_sig_handler_is(int signo, ljp_sig_fn fn);
/* fn becomes signo's handler (SA_SIGINFO | SA_RESTART; every signal
** blocked while it runs when block_all, else none): 0, -1 (errno). */
int ljp_sig_install(int signo, ljp_sig_fn fn, int block_all);
/* A disposition read or replaced before, back: 0, -1. */
int ljp_sig_put(int signo, const struct sigaction *saved);
/* saved back, only when fn is still signo's handler (the program did not
** change it since). */
void ljp_sig_put_if(int signo, ljp_sig_fn fn, const struct sigaction *saved);
/* The default action (no flags, no mask); the one replaced in *old (may
** be NULL): 0, -1. */
int ljp_sig_default(int signo, struct sigaction *old);
/* A pending instance of signo discarded: ignored for a moment, then the
** disposition it had. */
void ljp_sig_discard(int signo);
/* The default action, signo unblocked on this thread, and raised: a
** fatal one ends the process; a stop signal returns once continued. */
void ljp_sig_raise_default(int signo);

/* -- The sampling handler's disposition (normal context) ----------------- */

/* The sampling handler (signal.c, before it installs it). */
void ljp_sig_sampler_set(ljp_sig_fn fn);
/* Is the sampling handler signo's handler? 1 also when it cannot tell. */
int ljp_sig_sampler_ours(int signo);
/* signo's action now: ljprof's handler (also when it cannot tell), no
** handler at all (SIG_IGN or SIG_DFL: no tick can reach ljprof), or
** another handler (which may pass ticks on). */
enum { LJP_SIG_OURS, LJP_SIG_NONE, LJP_SIG_OTHER };
int ljp_sig_sampler_disposition(int signo);
/* Is signo's action the default? 0 also when it cannot tell. */
int ljp_sig_is_default(int signo);
#ifdef _WIN32
/* The C runtime's action for signo, replaced by the default: SIG_DFL
** (0), SIG_IGN (1) or the handler's address; put one back
** (sigowner_win.c; exit_win.c). */
uintptr_t ljp_sig_crt_take(int signo);
void ljp_sig_crt_put(int signo, uintptr_t h);
#endif

/* -- Masks (async-signal-safe) and threads ------------------------------- */

/* This thread's mask (pthread_sigmask): 0, else an error number. */
int ljp_sig_mask(int how, const sigset_t *set, sigset_t *old);
/* Every signal blocked on this thread; the mask before in *old (may be
** NULL). */
void ljp_sig_block_all(sigset_t *old);
/* A thread of ljprof's: fn(arg) with every signal blocked from its first
** instruction (no handler ever runs there). 0, else an error number. */
int ljp_thread_start(pthread_t *th, void *(*fn)(void *), void *arg);

#endif
