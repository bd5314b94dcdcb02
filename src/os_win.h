/*
** Windows: the inline half of the OS interface (os.h), and the POSIX
** types the shared files name (siginfo_t in timer.h's rearm, timer_t,
** struct iovec for ljp_peekv, the signal numbers the options know) that
** mingw-w64's headers lack: declared here so that those files compile
** unchanged; on Windows nothing delivers a signal, so none of them
** carries a value (timer_win.c's ticks are taken on the timer thread).
** Included by os.h only.
**
** The Windows-only part of the interface (the timer thread's, used by
** timer_win.c; normal context unless said):
**   void *ljp_os_thread_open(void)     the calling thread, a handle that
**     can suspend it and read its registers (NULL: cannot)
**   void ljp_os_thread_close(void *h)
**   int ljp_os_thread_stop(void *h, struct ljp_regs *r, uintptr_t *pc)
**     SuspendThread + GetThreadContext: 0 and the thread stopped with its
**     PC, SP and frame pointer in *r (r may be NULL), -1 (not stopped).
**     Takes no lock the stopped thread may hold: the CONTEXT is on the
**     caller's stack, no heap, no loader, no CRT.
**   void ljp_os_thread_go(void *h)      ResumeThread: the thread runs on.
**     Between stop and go the caller may call only what takes no lock
**     (ljp_sample: sampling context).
**   int ljp_os_ticker_start(void **th, unsigned (*fn)(void *), void *arg)
**     A thread running fn(arg) (CreateThread): 0, or -1.
**   void ljp_os_ticker_join(void *th)   wait for it to end, close it
**   void ljp_os_timer_res(int on)       timeBeginPeriod(1)/timeEndPeriod
**   void *ljp_os_sleeper_open(void), ljp_os_sleeper_close(void *s)
**   void ljp_os_sleep_ns(void *s, uint64_t ns)  sleep ns on s, a
**     high-resolution waitable timer when Windows has one (10 1803+),
**     else a plain one; without s, Sleep (whole ms)
**   uint64_t ljp_os_thread_cycles(void *h) the thread's CPU cycles
**     (QueryThreadCycleTime; 0: not known), for the cpu clock
**   int ljp_os_replace(const char *from, const char *to)
**     rename from over to (MoveFileEx, replacing): 0, or Windows' error
**   int ljp_os_module_of(uintptr_t addr, uintptr_t *lo, uintptr_t *hi)
**     the loaded image holding addr (GetModuleHandleEx: the loader's
**     lock), its extent: 0, or -1 (none)
**   uintptr_t ljp_os_exe_base(void)     the program's image (its base)
** The console control events' part (exit_win.c):
**   int ljp_os_console_trap(int (*fn)(int ev), int on)
**     SetConsoleCtrlHandler: fn(ev) is called on the thread the system
**     makes for each event (ev: LJP_OS_CTRL_*), its result the handler's
**     (0: the next handler's turn); on = 0 removes it. 0, or -1.
**   void *ljp_os_event_new(void)        an auto-reset event (NULL: none)
**   void ljp_os_event_set(void *e), ljp_os_event_free(void *e)
**   int ljp_os_event_wait(void *e, uint32_t ms)  1: set, 0: timed out
**     (ms = LJP_OS_FOREVER: no time-out)
**   int ljp_os_thread_start(void **th, unsigned (*fn)(void *), void *arg)
**     a thread of normal priority (ljp_os_ticker_join ends it)
**   void ljp_os_sleep_ms(uint32_t ms)   Sleep
**   void ljp_os_park(void)              sleep for ever (noreturn)
**   void ljp_os_exit_ctrl_c(void)       ExitProcess(STATUS_CONTROL_C_EXIT),
**     what Windows' default handler does on a control event
*/
#ifndef LJP_OS_WIN_H
#define LJP_OS_WIN_H

#ifndef WIN32_LEAN_AND_MEAN
#define WIN32_LEAN_AND_MEAN
#endif
#ifndef NOMINMAX
#define NOMINMAX  /* windef.h's min/max macros */
#endif
#include <windows.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>

/* -- POSIX types and constants the shared files name ------------------- */
#ifndef LJP_OS_WIN_POSIX
#define LJP_OS_WIN_POSIX
typedef void *timer_t;
typedef unsigned long long sigset_t;
union sigval { int sival_int; void *sival_ptr; };
typedef struct {
  int si_signo, si_code, si_overrun;
  pid_t si_pid;
  union sigval si_value;
} siginfo_t;
struct iovec { void *iov_base; size_t iov_len; };
/* The signal numbers Linux gives them: only option values here. */
#ifndef SIGHUP
#define SIGHUP 1
#endif
#ifndef SIGQUIT
#define SIGQUIT 3
#endif
#ifndef SIGTRAP
#define SIGTRAP 5
#endif
#ifndef SIGBUS
#define SIGBUS 7
#endif
#ifndef SIGKILL
#define SIGKILL 9
#endif
#ifndef SIGUSR1
#define SIGUSR1 10
#endif
#ifndef SIGUSR2
#define SIGUSR2 12
#endif
#ifndef SIGPIPE
#define SIGPIPE 13
#endif
#ifndef SIGALRM
#define SIGALRM 14
#endif
#ifndef SIGCHLD
#define SIGCHLD 17
#endif
#ifndef SIGCONT
#define SIGCONT 18
#endif
#ifndef SIGSTOP
#define SIGSTOP 19
#endif
#ifndef SIGURG
#define SIGURG 23
#endif
#ifndef SIGPROF
#define SIGPROF 27
#endif
#ifndef SIGWINCH
#define SIGWINCH 28
#endif
#ifndef _NSIG
#define _NSIG 65
#endif
#define SIGRTMIN 34
#define SIGRTMAX 64
#endif

/* Console control events (CTRL_*_EVENT's values). */
#define LJP_OS_CTRL_C 0
#define LJP_OS_CTRL_BREAK 1
#define LJP_OS_CTRL_CLOSE 2
#define LJP_OS_CTRL_LOGOFF 5
#define LJP_OS_CTRL_SHUTDOWN 6
#define LJP_OS_FOREVER 0xffffffffu

/* QueryPerformanceFrequency, read once (os_win.c); never 0. */
uint64_t ljp_os_qpc_hz(void);

/* QueryPerformanceCounter in ns: monotonic, takes no lock, any thread. */
static inline uint64_t ljp_now_ns(void)
{
  LARGE_INTEGER c;
  uint64_t hz = ljp_os_qpc_hz(), t;
  QueryPerformanceCounter(&c);
  t = (uint64_t)c.QuadPart;
  return t / hz * 1000000000u + t % hz * 1000000000u / hz;
}

/* The separator a path is joined with (os.h: ljp_os_cwd). */
#define LJP_OS_DIRSEP '\\'

/* SRWLOCK (exclusive): statically initialised, no handle to close. */
typedef SRWLOCK ljp_os_lock;
#define LJP_OS_LOCK_INIT SRWLOCK_INIT
static inline void ljp_os_lock_take(ljp_os_lock *l) { AcquireSRWLockExclusive(l); }
static inline void ljp_os_lock_drop(ljp_os_lock *l) { ReleaseSRWLockExclusive(l); }
static inline void ljp_os_yield(void) { SwitchToThread(); }

/* The thread id (no lock, any context). */
static inline pid_t ljp_gettid(void) { return (pid_t)GetCurrentThreadId(); }

/* No signals on Windows: nothing is sent (ESRCH-like -1). */
static inline int ljp_os_tgkill(pid_t pid, pid_t tid, int sig)
{
  (void)pid; (void)tid; (void)sig;
  return -1;
}

/* n ranges through ljp_peek (ReadProcessMemory): bytes read up to the
** first unreadable range. Takes no lock. */
static inline ssize_t ljp_peekv(const struct iovec *l, const struct iovec *r,
                                int n)
{
  ssize_t got = 0;
  int i;
  for (i = 0; i < n; i++) {
    size_t k = l[i].iov_len < r[i].iov_len ? l[i].iov_len : r[i].iov_len;
    if (ljp_peek(l[i].iov_base, (uintptr_t)r[i].iov_base, k) != 0) break;
    got += (ssize_t)k;
  }
  return got;
}

/* No loader lookup without a lock on Windows (RtlLookupFunctionEntry
** takes one): none. */
static inline int ljp_os_find_object_ready(void) { return 0; }
static inline int ljp_os_find_object(uintptr_t pc, uintptr_t *map_start,
                                     uintptr_t *eh_frame_hdr)
{
  (void)pc; (void)map_start; (void)eh_frame_hdr;
  return -1;
}

/* libc functions mingw-w64 lacks that the shared files call (os_win.c):
** memmem (api.c), strsignal (run.c's message; no signal is named on
** Windows but the option's number). */
void *memmem(const void *h, size_t hn, const void *n, size_t nn);
char *strsignal(int sig);

struct ljp_regs;
void *ljp_os_thread_open(void);
void ljp_os_thread_close(void *h);
int ljp_os_thread_stop(void *h, struct ljp_regs *r, uintptr_t *pc);
void ljp_os_thread_go(void *h);
int ljp_os_ticker_start(void **th, unsigned (*fn)(void *), void *arg);
void ljp_os_ticker_join(void *th);
void ljp_os_timer_res(int on);
uintptr_t ljp_os_exe_base(void);
int ljp_os_console_trap(int (*fn)(int ev), int on);
void *ljp_os_event_new(void);
void ljp_os_event_set(void *e);
void ljp_os_event_free(void *e);
int ljp_os_event_wait(void *e, uint32_t ms);
int ljp_os_thread_start(void **th, unsigned (*fn)(void *), void *arg);
void ljp_os_sleep_ms(uint32_t ms);
void ljp_os_park(void) __attribute__((noreturn));
void ljp_os_exit_ctrl_c(void) __attribute__((noreturn));
void *ljp_os_sleeper_open(void);
void ljp_os_sleeper_close(void *s);
void ljp_os_sleep_ns(void *s, uint64_t ns);
uint64_t ljp_os_thread_cycles(void *h);
int ljp_os_replace(const char *from, const char *to);
int ljp_os_module_of(uintptr_t addr, uintptr_t *lo, uintptr_t *hi);

#endif
