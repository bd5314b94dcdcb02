/*
** Linux: the primitives of the OS interface (os.h) a signal handler calls
** per tick, inline as they were before they moved here (see os.h for what
** each does and where it may be called). Included by os.h and os_linux.c
** (the rest of the program includes os.h).
*/
#ifndef LJP_OS_LINUX_H
#define LJP_OS_LINUX_H

#include <dlfcn.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include "os_decl.h"   /* ljp_self_pid (ljp_peekv) */

/* CLOCK_MONOTONIC through the vDSO: no system call, async-signal-safe. */
static inline uint64_t ljp_now_ns(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline pid_t ljp_gettid(void) { return (pid_t)syscall(SYS_gettid); }

static inline int ljp_os_tgkill(pid_t pid, pid_t tid, int sig)
{
  return (int)syscall(SYS_tgkill, pid, tid, sig);
}

static inline int ljp_os_tgsigqueue(pid_t pid, pid_t tid, int sig,
                                    siginfo_t *si)
{
  return (int)syscall(SYS_rt_tgsigqueueinfo, pid, tid, sig, si);
}

/* The separator a path is joined with (os.h: ljp_os_cwd). */
#define LJP_OS_DIRSEP '/'

typedef pthread_mutex_t ljp_os_lock;
#define LJP_OS_LOCK_INIT PTHREAD_MUTEX_INITIALIZER
static inline void ljp_os_lock_take(ljp_os_lock *l) { pthread_mutex_lock(l); }
static inline void ljp_os_lock_drop(ljp_os_lock *l) { pthread_mutex_unlock(l); }
static inline void ljp_os_yield(void) { sched_yield(); }

/* glibc declares it for _GNU_SOURCE only: the same declaration, so that
** every file including os.h may call ljp_peekv. */
extern ssize_t process_vm_readv(pid_t, const struct iovec *, unsigned long,
                                const struct iovec *, unsigned long,
                                unsigned long);

static inline ssize_t ljp_peekv(const struct iovec *l, const struct iovec *r,
                                int n)
{
  return process_vm_readv(ljp_self_pid(), l, (unsigned long)n, r,
                          (unsigned long)n, 0);
}

#define LJP_OS_REG_RIP 16

static inline uintptr_t ljp_os_uc_pc(const void *ucv)
{
  const ucontext_t *uc = ucv;
#if defined(__x86_64__)
  /* gregs[REG_RIP]; REG_RIP is declared for _GNU_SOURCE only (its value
  ** is checked in os_linux.c) */
  return (uintptr_t)uc->uc_mcontext.gregs[LJP_OS_REG_RIP];
#elif defined(__aarch64__)
  return (uintptr_t)uc->uc_mcontext.pc;
#else
  (void)uc;
  return 0;
#endif
}

static inline size_t ljp_os_uc_alt_room(const void *ucv, const void *here)
{
  const ucontext_t *uc = ucv;
  uintptr_t lo = (uintptr_t)uc->uc_stack.ss_sp, sp = (uintptr_t)here;
  if (uc->uc_stack.ss_size && sp - lo < uc->uc_stack.ss_size) return sp - lo;
  return SIZE_MAX;
}

/* glibc's _dl_find_object (2.35 and later; looked up by
** ljp_os_find_object_init, NULL before or without it): the object the
** loader has at an address, lock-free and async-signal-safe by design
** (two copies of its table, switched by a version counter), for
** unwinders. */
#ifdef DLFO_EH_SEGMENT_TYPE
#define LJP_OS_FIND_OBJECT 1
typedef int (*ljp_os_dlfo_fn)(void *, struct dl_find_object *);
extern _Atomic(ljp_os_dlfo_fn) ljp_os_dlfo;

static inline int ljp_os_find_object_ready(void)
{
  return atomic_load_explicit(&ljp_os_dlfo, memory_order_relaxed) != NULL;
}

static inline int ljp_os_find_object(uintptr_t pc, uintptr_t *map_start,
                                     uintptr_t *eh_frame_hdr)
{
  ljp_os_dlfo_fn find = atomic_load_explicit(&ljp_os_dlfo,
                                             memory_order_relaxed);
  struct dl_find_object f;
  if (!find || find((void *)pc, &f) != 0) return -1;
  *map_start = (uintptr_t)f.dlfo_map_start;
  *eh_frame_hdr = (uintptr_t)f.dlfo_eh_frame;
  return 0;
}
#else
#define LJP_OS_FIND_OBJECT 0
static inline int ljp_os_find_object_ready(void) { return 0; }
static inline int ljp_os_find_object(uintptr_t pc, uintptr_t *map_start,
                                     uintptr_t *eh_frame_hdr)
{
  (void)pc; (void)map_start; (void)eh_frame_hdr;
  return -1;
}
#endif

#endif
