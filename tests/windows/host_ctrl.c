/* A C host under a console control event (tests/windows/ctrlevents.py):
** embeds LuaJIT (lua51.dll), has no console handler of its own, starts
** jit.prof from Lua (its on_signal trap) unless MODE says none, and runs
** a Lua loop that never ends while a thread of the host sends the
** console group EVENT (c: CTRL_C_EVENT, break: CTRL_BREAK_EVENT) 0.5 s
** after the loop began, printing "SENT" first; close, logoff: CTRL_CLOSE_EVENT,
** CTRL_LOGOFF_EVENT, which Wine does not deliver, through ljprof.dll's
** test entry (ljp_win_test_ctrl_event: the handler called on a new
** thread, then the default's ExitProcess, as Windows does). The loop: interp (jit off, a function
** called in a loop, 20 s), compiled (one compiled endless loop), blocked
** (a C call that sleeps); the event 0.5 s after the loop began. "RAN ON" if the loop ever ends.
** Usage: host_ctrl EVENT MODE OUT [none]
** or:    host_ctrl spawn MS COMMAND-LINE: COMMAND-LINE run on this
** console, CTRL_C_EVENT sent MS ms after it made the file "started" ("SENT" first; this process
** takes its Ctrl-C itself), its exit status returned. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <windows.h>

#include <lauxlib.h>
#include <lualib.h>

static DWORD ev;
static int direct;
static HANDLE ready_ev;   /* set by the Lua loop's ready() */

static DWORD WINAPI sender(LPVOID p)
{
  (void)p;
  /* 0.5 s of the loop (under load, Wine's start and the profile's may
  ** take longer than the loop had before) */
  WaitForSingleObject(ready_ev, 60000);
  Sleep(500);
  fprintf(stderr, "SENT\n");
  fflush(stderr);
  if (direct) {
    HMODULE m = GetModuleHandleA("ljprof.dll");
    int (*fn)(int) = m ? (int (*)(int))(void (*)(void))
                             GetProcAddress(m, "ljp_win_test_ctrl_event") : NULL;
    if (!fn || fn((int)ev) != 0)
      fprintf(stderr, "GenerateConsoleCtrlEvent failed: no test entry\n");
  } else if (!GenerateConsoleCtrlEvent(ev, 0)) {
    fprintf(stderr, "GenerateConsoleCtrlEvent failed: %lu\n", GetLastError());
    fflush(stderr);
    ExitProcess(9);   /* not delivered: the test says so */
  }
  return 0;
}

static int ready(lua_State *L)
{
  (void)L;
  SetEvent(ready_ev);
  return 0;
}

static int sleep_long(lua_State *L)
{
  (void)L;
  Sleep(20000);
  return 0;
}

static BOOL WINAPI keep(DWORD e)
{
  (void)e;
  return TRUE;   /* the sender's own Ctrl-C */
}

static int spawn(int ms, char *cmd)
{
  STARTUPINFOA si;
  PROCESS_INFORMATION pi;
  DWORD code = 255;
  memset(&si, 0, sizeof(si));
  si.cb = sizeof(si);
  SetConsoleCtrlHandler(keep, TRUE);
  if (!CreateProcessA(NULL, cmd, NULL, NULL, TRUE, 0, NULL, NULL, &si, &pi)) {
    fprintf(stderr, "host: cannot run %s: %lu\n", cmd, GetLastError());
    return 254;
  }
  /* the child makes the file "started" when its loop begins */
  for (int i = 0; i < 600 && GetFileAttributesA("started") ==
                            INVALID_FILE_ATTRIBUTES; i++)
    if (WaitForSingleObject(pi.hProcess, 100) != WAIT_TIMEOUT) break;
  if (WaitForSingleObject(pi.hProcess, (DWORD)ms) == WAIT_TIMEOUT) {
    fprintf(stderr, "SENT\n");
    fflush(stderr);
    if (!GenerateConsoleCtrlEvent(CTRL_C_EVENT, 0))
      fprintf(stderr, "GenerateConsoleCtrlEvent failed: %lu\n", GetLastError());
  }
  WaitForSingleObject(pi.hProcess, INFINITE);
  GetExitCodeProcess(pi.hProcess, &code);
  return (int)code;
}

int main(int argc, char **argv)
{
  lua_State *L;
  char chunk[1024];
  const char *loop;
  if (argc == 4 && !strcmp(argv[1], "spawn"))
    return spawn(atoi(argv[2]), argv[3]);
  if (argc < 4) return 2;
  ev = !strcmp(argv[1], "break") ? CTRL_BREAK_EVENT : CTRL_C_EVENT;
  if (!strcmp(argv[1], "close") || !strcmp(argv[1], "logoff") ||
      !strcmp(argv[1], "tbreak")) {
    direct = 1;
    ev = !strcmp(argv[1], "close") ? CTRL_CLOSE_EVENT
         : !strcmp(argv[1], "logoff") ? CTRL_LOGOFF_EVENT : CTRL_BREAK_EVENT;
  }
  if (!strcmp(argv[2], "compiled"))
    loop = "ready() local x = 0 while true do x = x + 1 end";
  else if (!strcmp(argv[2], "blocked"))
    loop = "local function busy(n) local s = 0 for i = 1, n do s = s + i % 3 end return s end\n"
           "ready() local t0 = os.clock() while os.clock() - t0 < 0.3 do busy(1e5) end\n"
           "sleep_long()";
  else
    loop = "jit.off()\n"
           "local function spin(n) local s = 0 for i = 1, n do s = s + i % 3 end return s end\n"
           "ready() local t0 = os.clock() while os.clock() - t0 < 20 do spin(100000) end";
  L = luaL_newstate();
  luaL_openlibs(L);
  lua_register(L, "sleep_long", sleep_long);
  lua_register(L, "ready", ready);
  ready_ev = CreateEventA(NULL, TRUE, FALSE, NULL);
  if (argc < 5 || strcmp(argv[4], "none")) {
    snprintf(chunk, sizeof(chunk), "require('jit.prof').start('f', [[%s]])",
             argv[3]);
    if (luaL_dostring(L, chunk) != 0) {
      fprintf(stderr, "host: %s\n", lua_tostring(L, -1));
      return 3;
    }
  }
  CloseHandle(CreateThread(NULL, 0, sender, NULL, 0, NULL));
  if (luaL_dostring(L, loop) != 0) {
    fprintf(stderr, "host: %s\n", lua_tostring(L, -1));
    return 4;
  }
  fprintf(stderr, "RAN ON\n");
  lua_close(L);
  return 0;
}
