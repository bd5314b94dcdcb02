/*
** The clocks: one table of what each ljprof_clock is (clocks.h). Adding a
** clock adds one line here and its timer file; nothing else in src/ lists
** the clocks. Constant data and pure lookups: any context.
*/
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "clocks.h"
#include "timer.h"

static const ljp_clock_info clocks[] = {
  [LJPROF_CLOCK_CPU] = {"cpu", &ljp_timer_cpu, CLOCK_THREAD_CPUTIME_ID, 0,
                        NULL},
  [LJPROF_CLOCK_WALL] = {"wall", &ljp_timer_wall, CLOCK_MONOTONIC, 0, NULL},
  [LJPROF_CLOCK_ITIMER] = {"itimer", &ljp_timer_itimer,
                           CLOCK_PROCESS_CPUTIME_ID, SIGPROF, "SIGPROF"},
  [LJPROF_CLOCK_THREAD] = {"thread", &ljp_timer_thread, CLOCK_MONOTONIC, 0,
                           NULL},
};
#define NCLOCKS ((int)(sizeof(clocks) / sizeof(clocks[0])))

const ljp_clock_info *ljp_clock(ljprof_clock c)
{
  return (int)c >= 0 && (int)c < NCLOCKS && clocks[c].name ? &clocks[c]
                                                           : NULL;
}

int ljp_clock_find(const char *name)
{
  int i;
  for (i = 0; name && i < NCLOCKS; i++)
    if (clocks[i].name && !strcmp(name, clocks[i].name)) return i;
  return -1;
}

const char *ljp_clock_name_of(const ljp_timer_ops *ops)
{
  int i;
  for (i = 0; ops && i < NCLOCKS; i++)
    if (clocks[i].timer == ops) return clocks[i].name;
  return "none";
}

int ljp_clock_count(void)
{
  return NCLOCKS;
}

const char *ljp_clock_accepted(char *buf, size_t n, int signo)
{
  size_t len = 0;
  int i;
  if (n) buf[0] = '\0';
  for (i = 0; i < NCLOCKS && len < n; i++) {
    if (!clocks[i].name || (signo && clocks[i].signo == signo)) continue;
    snprintf(buf + len, n - len, "%s%s", len ? ", " : "", clocks[i].name);
    len += strlen(buf + len);
  }
  return buf;
}
