/*
** The OS interface: every call ljprof makes that is particular to one
** operating system (its kernel's system calls, its loader's lookups, the
** layout of a signal's saved registers) is named here, with what may call
** it, and implemented by one file per OS: os_linux.c, with the few that a
** signal handler calls per tick inline in os_linux.h (they were inline
** before they moved: no extra call on the signal path). A second OS adds
** os_<name>.c/.h and one line below, not #ifdefs across the tree. The
** declarations of the out-of-line functions are in os_decl.h, which an OS
** file includes with its inline half (not this header, which includes
** both): the compiler checks the definitions against them.
** tests/structure.py checks that the Linux calls (process_vm_readv, prctl,
** the raw system-call numbers, _dl_find_object, /proc/self/task) appear
** in os_linux.c/.h only. Signal dispositions, masks and threads are not
** here: they have their own owner (sigowner.c).
**
** The interface, per function (AS-safe: async-signal-safe):
**
**   uint64_t ljp_now_ns(void)                            inline, AS-safe
**     A monotonic clock in nanoseconds (Linux: CLOCK_MONOTONIC through
**     the vDSO; Windows: QueryPerformanceCounter). Any context.
**   ljp_os_lock, LJP_OS_LOCK_INIT, ljp_os_lock_take(l), ljp_os_lock_drop(l)
**                                                        inline
**     A statically initialised mutex (Linux: pthread_mutex_t; Windows:
**     SRWLOCK, exclusive). Normal context only.
**   void ljp_os_yield(void)                              inline
**     Give up the CPU to another ready thread (sched_yield;
**     SwitchToThread). Normal context.
**   pid_t ljp_gettid(void)                               inline, AS-safe
**     The calling thread's kernel id. Any context.
**   int ljp_os_tgkill(pid_t pid, pid_t tid, int sig)     inline, AS-safe
**     Send sig to thread tid of process pid (plain, no value). Any
**     context. 0, or -1 with errno (ESRCH: no such thread).
**   int ljp_os_tgsigqueue(pid_t pid, pid_t tid, int sig, siginfo_t *si)
**                                                        inline, AS-safe
**     The same, carrying si (si_code SI_QUEUE, its si_value), as
**     pthread_sigqueue would but by thread id. Any context.
**   pid_t ljp_self_pid(void)                                      AS-safe
**     This process's id, cached (no system call) once
**     ljp_self_pid_cache has run; a fork handler forgets it in the child.
**   void ljp_self_pid_cache(void)           normal context, library pinned
**   int ljp_peek(void *dst, uintptr_t src, size_t n)              AS-safe
**     Fault-safe read of our own memory: 0, or -1 for an unreadable range
**     (never a fault). Any context.
**   ssize_t ljp_peekv(const struct iovec *l, const struct iovec *r, int n)
**                                                        inline, AS-safe
**     The same for n ranges in one call: the bytes read (a short count:
**     some range unreadable). Any context.
**   uintptr_t ljp_os_uc_pc(const void *uc)               inline, AS-safe
**     The interrupted PC in a signal handler's ucontext (0: unknown
**     architecture). Signal context (the handler's own ucontext).
**   size_t ljp_os_uc_alt_room(const void *uc, const void *here)
**                                                        inline, AS-safe
**     Bytes of stack left below `here` when the handler runs on the
**     thread's alternate signal stack, else SIZE_MAX. No system call.
**     Signal context.
**   int ljp_os_find_object(uintptr_t pc, uintptr_t *map_start,
**                          uintptr_t *eh_frame_hdr)      inline, AS-safe
**     The loader's object at pc, lock-free (glibc's _dl_find_object):
**     0 and its mapping's start and unwind table, -1 when none or not
**     available. LJP_OS_FIND_OBJECT is 1 where the loader has it;
**     ljp_os_find_object_ready() says whether it was found.
**   void ljp_os_find_object_init(void)          normal context, any thread
**     Look it up (once; later calls do nothing).
**   void ljp_os_thread_name(char name[16])       normal context, the thread
**     The calling thread's name ("luajit", "nginx"), NUL-ended.
**   void ljp_os_timer_slack_min(void)           normal context, the thread
**     Wake the calling thread without timer slack (1 ns).
**   void ljp_os_parent_death_signal(int sig)     the child of fork, AS-safe
**     Ask for sig when the parent (the forking thread) exits.
**   int ljp_os_thread_state_open(pid_t tid)     normal context, the thread
**     A descriptor to watch thread tid's state (close it with close()),
**     or -1 when it cannot be looked at.
**   int ljp_os_thread_state(int fd, char *buf, size_t n, uintptr_t *pc)
**                                          normal context, any thread
**     What the watched thread does now: LJP_OS_IN_SYSCALL (blocked in a
**     system call, *pc its user PC there, buf its text), LJP_OS_RUNNING
**     (on a CPU), LJP_OS_USER (waiting for a CPU in user space),
**     LJP_OS_UNKNOWN (cannot be read). One read system call.
**   const char *ljp_os_prog_name(void)                    normal context
**     The program's short name ("luajit"; Windows: the exe's, no ".exe").
**   int ljp_os_cwd(char *buf, size_t n)                    normal context
**     The working directory into buf[n], NUL-ended: 0, or -1 (too long,
**     unreadable). LJP_OS_DIRSEP: the separator a path is joined with.
**   int ljp_os_path_is_abs(const char *t, size_t k)        normal context
**     Whether the package-path template t[0..k) needs no working
**     directory: absolute ("/x"; Windows: "C:", "\\", "/", LuaJIT's "!"
**     for the exe's directory) or "?" alone.
**   void *ljp_os_lua_symbol(const char *name)             normal context
**     A function the process's LuaJIT exports (Linux: the global scope;
**     Windows: lua51.dll, else the exe), NULL when there is none.
**
** Windows (os_win.c/.h, issue 31): the interface above where it has a
** Windows meaning (the clock, the lock, ljp_peek through
** ReadProcessMemory, the names); no signals (tgkill fails, nothing has a
** ucontext), no lock-free loader lookup. os_win.h adds the timer
** thread's calls (suspend and read a thread's registers, resume; the
** ticker thread; the sleep) that timer_win.c uses, and the POSIX types
** the shared files name.
**
** Not here: ljp_cfi_regs (cfi.c) decodes the whole register file from a
** ucontext for the unwinder; cfi.c calls nothing outside itself (it is
** async-signal-safe by construction, checked by structure.py), so it
** keeps that decoding rather than depend on this file.
*/
#ifndef LJP_OS_H
#define LJP_OS_H

#include "os_decl.h"   /* the out-of-line functions, the thread states */

#if defined(__linux__)
#include "os_linux.h"
#elif defined(_WIN32)
#include "os_win.h"
#else
#error "ljprof: no OS file for this system (src/os.h)"
#endif

#endif
