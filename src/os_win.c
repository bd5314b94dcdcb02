/*
** Windows: the OS interface (os.h) and its Windows-only part (os_win.h:
** the timer thread's suspend, registers, resume, sleep). Compiles to
** nothing elsewhere: a build that takes every src file (the rockspec's one
** compiler call) stays right on Linux.
**
** What may run while the profiled thread is suspended (between
** ljp_os_thread_stop and ljp_os_thread_go): ljp_peek (ReadProcessMemory
** on our own process: a system call, no user-mode lock; an unreadable
** range fails, never faults) and ljp_now_ns (QueryPerformanceCounter).
** ljp_os_thread_stop itself: SuspendThread and GetThreadContext with the
** CONTEXT on the caller's stack (no heap, no loader, no CRT).
*/
#ifdef _WIN32
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <direct.h>     /* _getcwd */

#include "cfi.h"       /* struct ljp_regs: DWARF numbering */
#include "os_decl.h"
#include "os_win.h"
#include <mmsystem.h>   /* timeBeginPeriod (winmm) */

static _Atomic uint64_t qpc_hz;

uint64_t ljp_os_qpc_hz(void)
{
  uint64_t hz = atomic_load_explicit(&qpc_hz, memory_order_relaxed);
  if (!hz) {  /* fixed at boot: racing first calls store the same value */
    LARGE_INTEGER f;
    hz = QueryPerformanceFrequency(&f) && f.QuadPart > 0
             ? (uint64_t)f.QuadPart : 1000000000u;
    atomic_store_explicit(&qpc_hz, hz, memory_order_relaxed);
  }
  return hz;
}

/* -- Fault-safe reads ------------------------------------------------------ */

int ljp_peek(void *dst, uintptr_t src, size_t n)
{
  SIZE_T got = 0;
  if (src < 65536) return -1;  /* Windows never maps the first 64 KB */
  return ReadProcessMemory(GetCurrentProcess(), (LPCVOID)src, dst, n, &got) &&
                 got == n ? 0 : -1;
}

pid_t ljp_self_pid(void) { return (pid_t)GetCurrentProcessId(); }
void ljp_self_pid_cache(void) {}  /* no fork: nothing to cache */

/* -- The loader: no lock-free lookup (os_win.h) ---------------------------- */

void ljp_os_find_object_init(void) {}

int ljp_os_cwd(char *buf, size_t n)
{
  return _getcwd(buf, (int)n) ? 0 : -1;
}

/* "C:...", "\\..." or "/..." (a drive's root, a UNC path), LuaJIT's "!"
** (the exe's directory), or "?" alone. */
int ljp_os_path_is_abs(const char *t, size_t k)
{
  return k > 0 && ((k >= 2 && t[1] == ':') || t[0] == '\\' ||
                   t[0] == '/' || t[0] == '!' || (k == 1 && t[0] == '?'));
}

void *ljp_os_lua_symbol(const char *name)
{
  HMODULE m = GetModuleHandleA("lua51.dll");
  FARPROC f = m ? GetProcAddress(m, name) : NULL;
  if (!f && (m = GetModuleHandleA(NULL))) f = GetProcAddress(m, name);
  return (void *)f;
}

const char *ljp_os_prog_name(void)
{
  static char name[64];
  char path[MAX_PATH], *b, *dot;
  DWORD n;
  if (name[0]) return name;
  n = GetModuleFileNameA(NULL, path, sizeof(path));
  if (!n || n >= sizeof(path)) return "exe";
  b = strrchr(path, '\\');
  b = b ? b + 1 : path;
  if ((dot = strrchr(b, '.')) && !_stricmp(dot, ".exe")) *dot = '\0';
  snprintf(name, sizeof(name), "%s", b);
  return name;
}

/* -- Threads ----------------------------------------------------------------- */

void ljp_os_thread_name(char name[16])
{
  snprintf(name, 16, "%s", ljp_os_prog_name());
}

void ljp_os_timer_slack_min(void) {}
void ljp_os_parent_death_signal(int sig) { (void)sig; }
int ljp_os_thread_state_open(pid_t tid) { (void)tid; return -1; }
int ljp_os_thread_state(int fd, char *buf, size_t n, uintptr_t *pc)
{
  (void)fd; (void)buf; (void)n; (void)pc;
  return LJP_OS_UNKNOWN;
}

void *ljp_os_thread_open(void)
{
  HANDLE h = NULL;
  if (!DuplicateHandle(GetCurrentProcess(), GetCurrentThread(),
                       GetCurrentProcess(), &h,
                       THREAD_SUSPEND_RESUME | THREAD_GET_CONTEXT |
                       THREAD_QUERY_INFORMATION, FALSE, 0))
    return NULL;
  return h;
}

void ljp_os_thread_close(void *h)
{
  if (h) CloseHandle((HANDLE)h);
}

int ljp_os_thread_stop(void *h, struct ljp_regs *r, uintptr_t *pc)
{
  CONTEXT c;
  if (SuspendThread((HANDLE)h) == (DWORD)-1) return -1;
  /* SuspendThread is asynchronous: GetThreadContext waits until the
  ** thread is really stopped, and fails if it cannot be read. */
  memset(&c, 0, sizeof(c));
  c.ContextFlags = CONTEXT_CONTROL | CONTEXT_INTEGER;
  if (!GetThreadContext((HANDLE)h, &c)) {
    ResumeThread((HANDLE)h);
    return -1;
  }
  *pc = (uintptr_t)c.Rip;
  if (r) {
    memset(r, 0, sizeof(*r));
    r->r[LJP_CFI_RA] = (uintptr_t)c.Rip;
    r->r[LJP_CFI_RSP] = (uintptr_t)c.Rsp;
    r->r[6] = (uintptr_t)c.Rbp;  /* DWARF 6: the frame pointer */
    r->valid = (1u << LJP_CFI_RA) | (1u << LJP_CFI_RSP) | (1u << 6);
  }
  return 0;
}

void ljp_os_thread_go(void *h) { ResumeThread((HANDLE)h); }

uint64_t ljp_os_thread_cycles(void *h)
{
  ULONG64 c = 0;
  return QueryThreadCycleTime((HANDLE)h, &c) ? (uint64_t)c : 0;
}

typedef struct { unsigned (*fn)(void *); void *arg; } ticker_start;

static DWORD WINAPI ticker_main(LPVOID p)
{
  ticker_start s = *(ticker_start *)p;
  free(p);
  return s.fn(s.arg);
}

int ljp_os_thread_start(void **th, unsigned (*fn)(void *), void *arg)
{
  ticker_start *s = malloc(sizeof(*s));
  HANDLE h;
  if (!s) return -1;
  s->fn = fn;
  s->arg = arg;
  if (!(h = CreateThread(NULL, 0, ticker_main, s, 0, NULL))) {
    free(s);
    return -1;
  }
  *th = h;
  return 0;
}

int ljp_os_ticker_start(void **th, unsigned (*fn)(void *), void *arg)
{
  if (ljp_os_thread_start(th, fn, arg) != 0) return -1;
  /* above the Lua thread: its ticks are not late behind it */
  SetThreadPriority((HANDLE)*th, THREAD_PRIORITY_TIME_CRITICAL);
  return 0;
}

/* -- Console control events (exit_win.c) --------------------------------- */

static int (*_Atomic console_fn)(int);

static BOOL WINAPI console_handler(DWORD ev)
{
  int (*fn)(int) = atomic_load(&console_fn);
  return fn && fn((int)ev) ? TRUE : FALSE;
}

int ljp_os_console_trap(int (*fn)(int ev), int on)
{
  if (on) {
    atomic_store(&console_fn, fn);
    return SetConsoleCtrlHandler(console_handler, TRUE) ? 0 : -1;
  }
  SetConsoleCtrlHandler(console_handler, FALSE);
  atomic_store(&console_fn, NULL);
  return 0;
}

void *ljp_os_event_new(void) { return CreateEventA(NULL, FALSE, FALSE, NULL); }
void ljp_os_event_set(void *e) { if (e) SetEvent((HANDLE)e); }
void ljp_os_event_free(void *e) { if (e) CloseHandle((HANDLE)e); }

int ljp_os_event_wait(void *e, uint32_t ms)
{
  return e && WaitForSingleObject((HANDLE)e, ms == LJP_OS_FOREVER ? INFINITE
                                                   : (DWORD)ms) == WAIT_OBJECT_0;
}

void ljp_os_sleep_ms(uint32_t ms) { Sleep(ms); }

void ljp_os_park(void)
{
  for (;;) Sleep(INFINITE);
}

void ljp_os_exit_ctrl_c(void)
{
  ExitProcess((UINT)0xC000013Au);  /* STATUS_CONTROL_C_EXIT */
}

uintptr_t ljp_os_exe_base(void) { return (uintptr_t)GetModuleHandleA(NULL); }

void ljp_os_ticker_join(void *th)
{
  WaitForSingleObject((HANDLE)th, INFINITE);
  CloseHandle((HANDLE)th);
}

void ljp_os_timer_res(int on)
{
  if (on) timeBeginPeriod(1);
  else timeEndPeriod(1);
}

#ifndef CREATE_WAITABLE_TIMER_HIGH_RESOLUTION
#define CREATE_WAITABLE_TIMER_HIGH_RESOLUTION 0x00000002
#endif

void *ljp_os_sleeper_open(void)
{
  HANDLE h = CreateWaitableTimerExW(NULL, NULL,
                                    CREATE_WAITABLE_TIMER_HIGH_RESOLUTION,
                                    TIMER_ALL_ACCESS);
  if (!h) h = CreateWaitableTimerExW(NULL, NULL, 0, TIMER_ALL_ACCESS);
  return h;
}

void ljp_os_sleeper_close(void *s)
{
  if (s) CloseHandle((HANDLE)s);
}

void ljp_os_sleep_ns(void *s, uint64_t ns)
{
  LARGE_INTEGER due;
  if (s) {
    due.QuadPart = -(LONGLONG)(ns / 100 ? ns / 100 : 1);  /* relative, 100 ns */
    if (SetWaitableTimer((HANDLE)s, &due, 0, NULL, NULL, FALSE) &&
        WaitForSingleObject((HANDLE)s, INFINITE) == WAIT_OBJECT_0)
      return;
  }
  Sleep((DWORD)((ns + 999999u) / 1000000u));
}

int ljp_os_replace(const char *from, const char *to)
{
  return MoveFileExA(from, to, MOVEFILE_REPLACE_EXISTING) ? 0
         : (int)GetLastError();
}

int ljp_os_module_of(uintptr_t addr, uintptr_t *lo, uintptr_t *hi)
{
  HMODULE m = NULL;
  const IMAGE_DOS_HEADER *dos;
  const IMAGE_NT_HEADERS *nt;
  if (!addr || !GetModuleHandleExA(GET_MODULE_HANDLE_EX_FLAG_FROM_ADDRESS |
                              GET_MODULE_HANDLE_EX_FLAG_UNCHANGED_REFCOUNT,
                              (LPCSTR)addr, &m) || !m)
    return -1;
  dos = (const IMAGE_DOS_HEADER *)m;
  nt = (const IMAGE_NT_HEADERS *)((const char *)m + dos->e_lfanew);
  *lo = (uintptr_t)m;
  *hi = (uintptr_t)m + nt->OptionalHeader.SizeOfImage;
  return 0;
}

/* -- libc functions mingw-w64 lacks ----------------------------------------- */

void *memmem(const void *h, size_t hn, const void *n, size_t nn)
{
  const char *p = h, *end;
  if (!nn) return (void *)h;
  if (hn < nn) return NULL;
  for (end = p + hn - nn; p <= end; p++)
    if (*p == *(const char *)n && !memcmp(p, n, nn)) return (void *)p;
  return NULL;
}

char *strsignal(int sig)
{
  static char buf[32];
  snprintf(buf, sizeof(buf), "signal %d", sig);
  return buf;
}

#endif /* _WIN32 */
