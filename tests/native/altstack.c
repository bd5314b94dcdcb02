/*
** Test library (tests/lua/test_altstack.lua): a program's own SIGALRM
** handler on a small alternate signal stack, doing work, so that
** ljprof's samples land on that stack. Below the stack lies a
** PROT_NONE page: an overflow faults at once instead of corrupting
** memory. The stack is filled with a pattern first, so that ljpa_used()
** tells how deep it was ever used (the kernel's signal frames, the
** program's handler and, when one lands there, ljprof's).
*/
#define _GNU_SOURCE
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline))
#define PATTERN 0xA5

static unsigned char *region, *alt;
static size_t alt_size, region_size;
static long work_ns;
static volatile long calls;
static volatile double sink;

static long now_ns(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000000000L + ts.tv_nsec;
}

static NOINLINE double ljpa_burn(long until)
{
  double x = 0.0;
  long i = 0;
  while (now_ns() < until)
    for (int k = 0; k < 200; k++) x += (double)(i++ % 7) * 0.5;
  return x;
}

static NOINLINE void ljpa_on_alarm(int sig)
{
  (void)sig;
  sink = ljpa_burn(now_ns() + work_ns);
  calls++;
}

/* Start: an alternate stack of size bytes, SIGALRM on it every period_us
** microseconds, each handler call busy for work_us (size 0: the handler
** runs on the thread's own stack). 0 on success. */
int ljpa_start(long size, long period_us, long work_us)
{
  long page = sysconf(_SC_PAGESIZE);
  stack_t ss;
  struct sigaction sa;
  struct itimerval it;
  work_ns = work_us * 1000;
  if (size <= 0) goto install;
  alt_size = (size_t)size;
  region_size = (size_t)page + ((alt_size + (size_t)page - 1) & ~((size_t)page - 1));
  region = mmap(NULL, region_size, PROT_READ | PROT_WRITE,
                MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (region == MAP_FAILED) return -1;
  if (mprotect(region, (size_t)page, PROT_NONE) != 0) return -2;
  /* The stack ends at the region's end; the guard page is right below
  ** its lowest byte when size is a multiple of the page. */
  alt = region + region_size - alt_size;
  memset(alt, PATTERN, alt_size);
  memset(&ss, 0, sizeof(ss));
  ss.ss_sp = alt;
  ss.ss_size = alt_size;
  if (sigaltstack(&ss, NULL) != 0) return -3;
install:
  memset(&sa, 0, sizeof(sa));
  sa.sa_handler = ljpa_on_alarm;
  sa.sa_flags = (size > 0 ? SA_ONSTACK : 0) | SA_RESTART;
  sigemptyset(&sa.sa_mask);
  if (sigaction(SIGALRM, &sa, NULL) != 0) return -4;
  memset(&it, 0, sizeof(it));
  it.it_interval.tv_usec = period_us;
  it.it_value.tv_usec = period_us;
  if (setitimer(ITIMER_REAL, &it, NULL) != 0) return -5;
  return 0;
}

/* Stop the timer (the handler stays, harmless). Returns the calls. */
long ljpa_stop(void)
{
  struct itimerval it;
  memset(&it, 0, sizeof(it));
  setitimer(ITIMER_REAL, &it, NULL);
  return calls;
}

/* The deepest use of the alternate stack so far, in bytes. */
long ljpa_used(void)
{
  size_t i = 0;
  while (i < alt_size && alt[i] == PATTERN) i++;
  return (long)(alt_size - i);
}
