/*
** Platform baseline for the per-sample cost measurement (bench/run): the CPU
** cost of timer signals alone. A CLOCK_MONOTONIC timer (the kind ljprof's
** "wall" clock uses, signal delivered to this thread) fires at RATE Hz into a
** handler that does nothing else than what MODE says, while a fixed busy
** loop runs; with RATE 0 there is no timer. The harness compares CPU time
** with and without the timer.
**   sigcost RATE ITERATIONS [MODE]   -> prints "signals N"
** MODE:
**   periodic  the kernel re-arms a periodic timer; the handler is empty
**             (the delivery alone: what any timer-signal profiler pays)
**   moved     periodic, and the handler moves it to its next expiry with
**             timer_settime (ljprof before 2026-11-25)
**   oneshot   one-shot, the handler reads the clock and re-arms it with
**             timer_settime (what ljprof's cpu and wall clocks do)
*/
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

enum { PERIODIC, MOVED, ONESHOT };

static volatile sig_atomic_t nsig;
static timer_t tmr;
static int mode;
static long long period, next;

static long long now_ns(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void arm(long long when, long long interval)
{
  struct itimerspec its;
  its.it_value.tv_sec = when / 1000000000LL;
  its.it_value.tv_nsec = when % 1000000000LL;
  its.it_interval.tv_sec = interval / 1000000000LL;
  its.it_interval.tv_nsec = interval % 1000000000LL;
  timer_settime(tmr, TIMER_ABSTIME, &its, NULL);
}

static void handler(int sig, siginfo_t *si, void *uc)
{
  (void)sig; (void)si; (void)uc;
  nsig++;
  if (mode == MOVED) {
    next += period;
    arm(next, period);
  } else if (mode == ONESHOT) {
    long long now = now_ns();
    next += period;
    while (next <= now) next += period;
    arm(next, 0);
  }
}

int main(int argc, char **argv)
{
  long rate = argc > 1 ? atol(argv[1]) : 0;
  long iters = argc > 2 ? atol(argv[2]) : 300000000L;
  const char *m = argc > 3 ? argv[3] : "periodic";
  volatile double x = 0;
  long i;
  if (!strcmp(m, "periodic")) mode = PERIODIC;
  else if (!strcmp(m, "moved")) mode = MOVED;
  else if (!strcmp(m, "oneshot")) mode = ONESHOT;
  else { fprintf(stderr, "sigcost: bad mode '%s' (accepted: periodic, moved, oneshot)\n", m); return 2; }
  if (rate > 0) {
    struct sigaction sa;
    struct sigevent sev;
    memset(&sa, 0, sizeof(sa));
    memset(&sev, 0, sizeof(sev));
    sa.sa_sigaction = handler;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGRTMIN + 4, &sa, NULL);
    sev.sigev_notify = SIGEV_THREAD_ID;
    sev.sigev_signo = SIGRTMIN + 4;
    sev._sigev_un._tid = (pid_t)syscall(SYS_gettid);
    if (timer_create(CLOCK_MONOTONIC, &sev, &tmr) != 0) { perror("timer_create"); return 1; }
    period = 1000000000LL / rate;
    next = now_ns() + period;
    arm(next, mode == ONESHOT ? 0 : period);
  }
  for (i = 0; i < iters; i++) x += (double)(i % 7);
  printf("signals %ld\n", (long)nsig);
  return 0;
}
