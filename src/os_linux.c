/*
** Linux implementation of the OS interface (os.h): the fault-safe self
** read (process_vm_readv) with its cached pid, the loader's lock-free
** object lookup (_dl_find_object), the thread's name, timer slack and
** parent-death signal (prctl), and a thread's state from
** /proc/self/task/<tid>/syscall. The per-tick primitives (thread id,
** tgkill, rt_tgsigqueueinfo, the multi-range read, ucontext decoding)
** are inline in os_linux.h. No other file names these calls
** (tests/structure.py). What may call each function, and whether it is
** async-signal-safe, is in os.h. The fork handler below is an entry
** point (docs/design.md's table).
*/
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/uio.h>
#include <unistd.h>

#include "os_decl.h"   /* what this file defines: checked against it */
#include "os_linux.h"

#if defined(__x86_64__)
_Static_assert(LJP_OS_REG_RIP == REG_RIP, "ucontext's PC index");
#endif

/* -- Fault-safe reads (async-signal-safe) ---------------------------------- */

/* Written by any thread that starts a run, read by every handler: atomic
 * (relaxed: a stale 0 only costs a getpid). The fork handler clears it in
 * the child, so a forked profiler never reads another process. */
static pid_t cached_pid;  /* 0: ask the kernel */
static pthread_once_t pid_once = PTHREAD_ONCE_INIT;
static int pid_atfork;    /* set once, inside pid_once */

/* ENTRY: fork's child handler (pthread_atfork). */
static void pid_forget(void) { __atomic_store_n(&cached_pid, 0, __ATOMIC_RELAXED); }

static void pid_register(void)
{
  pid_atfork = pthread_atfork(NULL, NULL, pid_forget) == 0;
}

void ljp_self_pid_cache(void)
{
  pthread_once(&pid_once, pid_register);
  if (pid_atfork) __atomic_store_n(&cached_pid, getpid(), __ATOMIC_RELAXED);
}

pid_t ljp_self_pid(void)
{
  pid_t p = __atomic_load_n(&cached_pid, __ATOMIC_RELAXED);
  return p ? p : getpid();
}

int ljp_peek(void *dst, uintptr_t src, size_t n)
{
  struct iovec l, r;
  l.iov_base = dst;
  l.iov_len = n;
  r.iov_base = (void *)src;
  r.iov_len = n;
  if (src < 4096) return -1;
  return process_vm_readv(ljp_self_pid(), &l, 1, &r, 1, 0) == (ssize_t)n ? 0 : -1;
}

/* -- The loader ------------------------------------------------------------ */

#if LJP_OS_FIND_OBJECT
_Atomic(ljp_os_dlfo_fn) ljp_os_dlfo;
#endif

void ljp_os_find_object_init(void)
{
#if LJP_OS_FIND_OBJECT
  if (!atomic_load(&ljp_os_dlfo))
    atomic_store(&ljp_os_dlfo,
                 (ljp_os_dlfo_fn)dlsym(RTLD_DEFAULT, "_dl_find_object"));
#endif
}

/* -- Threads (prctl, /proc) ------------------------------------------------ */

void ljp_os_thread_name(char name[16])
{
  prctl(PR_GET_NAME, name, 0, 0, 0);
}

void ljp_os_timer_slack_min(void)
{
  prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
}

void ljp_os_parent_death_signal(int sig)
{
  prctl(PR_SET_PDEATHSIG, sig);
}

int ljp_os_thread_state_open(pid_t tid)
{
  char path[64];
  snprintf(path, sizeof(path), "/proc/self/task/%d/syscall", (int)tid);
  return open(path, O_RDONLY | O_CLOEXEC);
}

/* One pread of the file kept open: the system call's number, arguments,
** sp and pc when the thread is in one and not on a CPU, "running" when
** it is on a CPU, "-1 sp pc" when it waits for one in user space (a
** signal is taken there as soon as it runs, before any system call). */
int ljp_os_thread_state(int fd, char *buf, size_t n, uintptr_t *pc)
{
  ssize_t r = pread(fd, buf, n - 1, 0);
  const char *p;
  if (r <= 0) return LJP_OS_UNKNOWN;
  buf[r] = 0;
  if (buf[0] >= '0' && buf[0] <= '9') {
    /* its user PC at the system call: the last field */
    p = strrchr(buf, ' ');
    *pc = p ? (uintptr_t)strtoull(p + 1, NULL, 16) : 0;
    return LJP_OS_IN_SYSCALL;
  }
  return buf[0] == 'r' ? LJP_OS_RUNNING : LJP_OS_USER;
}

/* -- Names ------------------------------------------------------------------ */

const char *ljp_os_prog_name(void)
{
  return program_invocation_short_name;
}

int ljp_os_cwd(char *buf, size_t n)
{
  return getcwd(buf, n) ? 0 : -1;
}

int ljp_os_path_is_abs(const char *t, size_t k)
{
  return k > 0 && (t[0] == '/' || (k == 1 && t[0] == '?'));
}

/* The process's global scope: the library does not link LuaJIT. */
void *ljp_os_lua_symbol(const char *name)
{
  return dlsym(RTLD_DEFAULT, name);
}
