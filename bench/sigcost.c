/*
** Platform baseline for the per-sample cost measurement (bench/run): the CPU
** cost of timer signals alone. A CLOCK_MONOTONIC timer (the same kind ljprof's
** "wall" clock uses, signal delivered to this thread) fires at RATE Hz into an
** empty handler while a fixed busy loop runs; with RATE 0 there is no timer.
** The harness compares CPU time with and without the timer.
**   sigcost RATE ITERATIONS    -> prints "signals N"
*/
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t nsig;

static void handler(int sig, siginfo_t *si, void *uc)
{
  (void)sig; (void)si; (void)uc;
  nsig++;
}

int main(int argc, char **argv)
{
  long rate = argc > 1 ? atol(argv[1]) : 0;
  long iters = argc > 2 ? atol(argv[2]) : 300000000L;
  volatile double x = 0;
  long i;
  if (rate > 0) {
    struct sigaction sa = {0};
    struct sigevent sev = {0};
    struct itimerspec its;
    timer_t t;
    sa.sa_sigaction = handler;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGRTMIN + 4, &sa, NULL);
    sev.sigev_notify = SIGEV_THREAD_ID;
    sev.sigev_signo = SIGRTMIN + 4;
    sev._sigev_un._tid = (pid_t)syscall(SYS_gettid);
    if (timer_create(CLOCK_MONOTONIC, &sev, &t) != 0) { perror("timer_create"); return 1; }
    its.it_interval.tv_sec = 0;
    its.it_interval.tv_nsec = 1000000000L / rate;
    its.it_value = its.it_interval;
    timer_settime(t, 0, &its, NULL);
  }
  for (i = 0; i < iters; i++) x += (double)(i % 7);
  printf("signals %ld\n", (long)nsig);
  return 0;
}
