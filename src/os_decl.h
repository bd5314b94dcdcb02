/*
** The OS interface's declarations (os.h describes each function: what
** may call it, whether it is async-signal-safe): the functions every OS
** file defines out of line, and the thread states. Declarations only: no
** inline function, no OS header. os.h includes it with the OS's inline
** half (os_linux.h, os_win.h); an OS file includes it and its own inline
** half, not os.h, so that the compiler checks its definitions against
** these declarations without the OS file depending on os.h, which
** depends on it (tests/structure.py: no cycle).
*/
#ifndef LJP_OS_DECL_H
#define LJP_OS_DECL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

enum { LJP_OS_UNKNOWN = -1, LJP_OS_USER, LJP_OS_IN_SYSCALL, LJP_OS_RUNNING };

pid_t ljp_self_pid(void);
void ljp_self_pid_cache(void);
int ljp_peek(void *dst, uintptr_t src, size_t n);
void ljp_os_find_object_init(void);
void ljp_os_thread_name(char name[16]);
void ljp_os_timer_slack_min(void);
void ljp_os_parent_death_signal(int sig);
int ljp_os_thread_state_open(pid_t tid);
int ljp_os_thread_state(int fd, char *buf, size_t n, uintptr_t *pc);
/* The program's short name ("luajit"); a Lua API function the loaded
** LuaJIT exports, by name (NULL: none). Normal context. */
const char *ljp_os_prog_name(void);
int ljp_os_cwd(char *buf, size_t n);
int ljp_os_path_is_abs(const char *t, size_t k);
void *ljp_os_lua_symbol(const char *name);

#endif
