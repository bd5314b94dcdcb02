/* A C program that embeds LuaJIT and knows nothing of ljprof: it links
** only -lluajit-5.1. test_auto.lua profiles it from the outside with
** LD_PRELOAD=libljprof.so and LJPROF (docs/usage.md, "Starting from the
** environment"), as one would nginx-lua, LOVE or a game engine.
**
**   plain_host SCRIPT [STATES [threads]]
**
** runs SCRIPT in STATES Lua states (default 1), one after the other, or
** each on a thread of its own at the same time with "threads"; each state
** gets its number as the global STATE, is closed with lua_close, and the
** host prints "host: state N: <what the script returned>". Exit status 0,
** or 1 when a script failed. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>

static const char *script;
static int failed;

static void *run(void *arg)
{
  int n = (int)(long)arg;
  lua_State *L = luaL_newstate();
  if (!L) {
    fprintf(stderr, "host: out of memory\n");
    failed = 1;
    return NULL;
  }
  luaL_openlibs(L);
  lua_pushinteger(L, n);
  lua_setglobal(L, "STATE");
  if (luaL_loadfile(L, script) != 0 || lua_pcall(L, 0, 1, 0) != 0) {
    fprintf(stderr, "host: state %d: %s\n", n, lua_tostring(L, -1));
    failed = 1;
  } else {
    printf("host: state %d: %s\n", n,
           lua_isstring(L, -1) ? lua_tostring(L, -1) : "(no result)");
    fflush(stdout);
  }
  lua_close(L);
  return NULL;
}

int main(int argc, char **argv)
{
  int i, n = argc > 2 ? atoi(argv[2]) : 1;
  int threads = argc > 3 && !strcmp(argv[3], "threads");
  pthread_t th[64];
  if (argc < 2 || n < 1 || n > 64) {
    fprintf(stderr, "usage: plain_host SCRIPT [STATES [threads]]\n");
    return 2;
  }
  script = argv[1];
  for (i = 0; i < n; i++) {
    if (threads) pthread_create(&th[i], NULL, run, (void *)(long)(i + 1));
    else run((void *)(long)(i + 1));
  }
  if (threads)
    for (i = 0; i < n; i++) pthread_join(th[i], NULL);
  return failed;
}
