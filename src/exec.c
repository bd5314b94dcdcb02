/*
** exec in a profiled process: what would outlive the program.
**
** ENTRY (called by the program): the exec functions (execve, execv,
** execvp, execvpe, execl, execlp, execle, fexecve), interposed where this
** library comes before the C library in the process's global scope:
** under LD_PRELOAD=libljprof.so, or linked by a host (-lljprof) ahead of
** libc. Loaded by require or -jprof (dlopen) it interposes nothing, and
** exec goes straight to the C library (docs/usage.md, "exec").
**
** A new program keeps the old one's pending signals and gets the default
** action for every handled signal: a pending SIGPROF (clock itimer) would
** kill it ("Profiling timer expired", status 155). ljprof's POSIX timers
** (clocks cpu, itimer and wall) and the timer thread (clocks wall and
** thread) end at exec. Before the real exec, when runs of
** this process are live: the run that traps exit signals (jit.prof's, so
** -jprof's and ljprof.auto's) is written by the same writer, in a state
** of its own on this thread (exit_signals.c, ljp_exit_write_now); a run
** that cannot be written (another thread's, the C API's) gets one line
** saying so; clock itimer's process timer is paused (no new tick can be
** pending at exec), and the pending signals ljprof handles are discarded
** (set ignored for a moment, then its handler again). If exec fails the
** timer is set again and the run goes on (its file is written again at
** its end).
**
** Normal context only; the exec call itself is the C library's (dlsym
** RTLD_NEXT). A forked child inherits the live-run count but not the
** timers: only the process that started the runs acts.
*/
#define _GNU_SOURCE
#include <alloca.h>
#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ljp.h"
#include "exit_signals.h"
#include "sigowner.h"
#include "../include/ljprof.h"

extern char **environ;

typedef int (*execve_fn)(const char *, char *const[], char *const[]);
typedef int (*execvpe_fn)(const char *, char *const[], char *const[]);
typedef int (*fexecve_fn)(int, char *const[], char *const[]);

/* Before exec: 1 when something was paused (itimer saved in *it). */
static int before_exec(const char *what, struct itimerspec *it)
{
  int sig, itimer = 0;
  sigset_t pend;
  if (atomic_load(&ljp_live_runs) <= 0 ||
      atomic_load(&ljp_live_pid) != (int)getpid())
    return 0;
  itimer = ljp_itimer_pause(it);
  if (sigpending(&pend) == 0) {
    for (sig = 1; sig < _NSIG; sig++)
      if (sig != SIGKILL && sig != SIGSTOP && sigismember(&pend, sig) == 1 &&
          ljp_sig_sampler_ours(sig))
        ljp_sig_discard(sig);       /* the pending tick */
  }
  /* The outputs of the run that traps exit signals (jit.prof's: -jprof,
  ** ljprof.auto), written by its writer; others cannot be. */
  if (ljp_exit_write_now() != 1)
    fprintf(stderr, "ljprof: exec %s: the profile of this program (pid %d) "
            "is not written: stop the profiler before exec to keep it\n",
            what ? what : "?", (int)getpid());
  return itimer;
}

/* exec failed: the run goes on. */
static void after_exec(int itimer, const struct itimerspec *it)
{
  int e = errno;
  if (itimer) ljp_itimer_resume(it);
  errno = e;
}

static void *next(const char *name)
{
  return dlsym(RTLD_NEXT, name);
}

LJPROF_API int execve(const char *path, char *const argv[], char *const envp[])
{
  execve_fn f = (execve_fn)next("execve");
  struct itimerspec it;
  int itimer, rc;
  if (!f) { errno = ENOSYS; return -1; }
  itimer = before_exec(path, &it);
  rc = f(path, argv, envp);
  after_exec(itimer, &it);
  return rc;
}

LJPROF_API int execv(const char *path, char *const argv[])
{
  return execve(path, argv, environ);
}

LJPROF_API int execvpe(const char *file, char *const argv[], char *const envp[])
{
  execvpe_fn f = (execvpe_fn)next("execvpe");
  struct itimerspec it;
  int itimer, rc;
  if (!f) { errno = ENOSYS; return -1; }
  itimer = before_exec(file, &it);
  rc = f(file, argv, envp);
  after_exec(itimer, &it);
  return rc;
}

LJPROF_API int execvp(const char *file, char *const argv[])
{
  return execvpe(file, argv, environ);
}

LJPROF_API int fexecve(int fd, char *const argv[], char *const envp[])
{
  fexecve_fn f = (fexecve_fn)next("fexecve");
  struct itimerspec it;
  int itimer, rc;
  char what[32];
  if (!f) { errno = ENOSYS; return -1; }
  snprintf(what, sizeof(what), "(descriptor %d)", fd);
  itimer = before_exec(what, &it);
  rc = f(fd, argv, envp);
  after_exec(itimer, &it);
  return rc;
}

/* The execl family: the arguments as an array (on the stack: exec
** replaces the process or fails, and the array is then freed by return). */
#define ARGV_FROM_VA(arg0, ap, argv)                                        \
  do {                                                                      \
    size_t n_ = 1;                                                          \
    va_list c_;                                                             \
    va_copy(c_, ap);                                                        \
    while (va_arg(c_, const char *)) n_++;                                  \
    va_end(c_);                                                             \
    argv = alloca((n_ + 1) * sizeof(char *));                               \
    argv[0] = (char *)(arg0);                                               \
    for (size_t i_ = 1; i_ <= n_; i_++) argv[i_] = va_arg(ap, char *);      \
  } while (0)

LJPROF_API int execl(const char *path, const char *arg, ...)
{
  char **argv;
  va_list ap;
  va_start(ap, arg);
  ARGV_FROM_VA(arg, ap, argv);
  va_end(ap);
  return execve(path, argv, environ);
}

LJPROF_API int execlp(const char *file, const char *arg, ...)
{
  char **argv;
  va_list ap;
  va_start(ap, arg);
  ARGV_FROM_VA(arg, ap, argv);
  va_end(ap);
  return execvpe(file, argv, environ);
}

LJPROF_API int execle(const char *path, const char *arg, ...)
{
  char **argv, **envp = NULL;
  va_list ap;
  va_start(ap, arg);
  ARGV_FROM_VA(arg, ap, argv);
  envp = va_arg(ap, char **);   /* after the NULL */
  va_end(ap);
  return execve(path, argv, envp);
}
