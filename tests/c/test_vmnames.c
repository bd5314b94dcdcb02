/*
** LuaJIT's opcode and IR call names (src/vmnames.c): what is read from
** jit.vmdef's text is what requiring the module gives (every bytecode and
** IR opcode's number by its name, every IR call's name), a preloaded
** module is required, one already loaded is read as it is, a module not
** found leaves the names unknown, and a name is looked up only at a
** name's start. The names are learnt once per process: each case runs in
** a child of its own.
*/
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <lauxlib.h>
#include <lualib.h>

#include "../../src/vmnames.h"

static int fails;

#define CHECK(c, ...) do { if (!(c)) { printf("  FAIL %s:%d: ", __FILE__, \
  __LINE__); printf(__VA_ARGS__); printf("\n"); return 1; } } while (0)

static lua_State *state(const char *setup)
{
  lua_State *S = luaL_newstate();
  luaL_openlibs(S);
  if (setup && luaL_dostring(S, setup)) {
    printf("  setup: %s\n", lua_tostring(S, -1));
    return NULL;
  }
  lua_settop(S, 0);
  return S;
}

/* Every name of the module's string key (required in R) looked up. */
static int names_match(lua_State *R, const char *key, int (*op)(const char *))
{
  size_t n, i;
  const char *s;
  lua_getglobal(R, "v");
  lua_getfield(R, -1, key);
  s = lua_tolstring(R, -1, &n);
  CHECK(s && n % 6 == 0 && n >= 60 * 6, "%s: %zu characters", key, n);
  for (i = 0; i < n / 6; i++) {
    char nm[7];
    int k;
    memcpy(nm, s + 6 * i, 6);
    nm[6] = 0;
    for (k = 5; k >= 0 && nm[k] == ' '; k--) nm[k] = 0;
    CHECK(op(nm) == (int)i, "%s %s: %d, not %zu", key, nm, op(nm), i);
  }
  lua_settop(R, 0);
  return 0;
}

/* From the text (the module not loaded in S, nor after): as required. */
static int from_text(void)
{
  lua_State *S = state(NULL), *R = state("v = require 'jit.vmdef'");
  int i;
  CHECK(S && R, "states");
  CHECK(ljp_vmnames_learn(S) && ljp_vmnames_known(), "names learnt");
  CHECK(ljp_vmnames_learn_calls(S), "calls learnt");
  CHECK(lua_gettop(S) == 0, "stack left: %d", lua_gettop(S));
  CHECK(luaL_dostring(S, "return package.loaded['jit.vmdef'] == nil") == 0 &&
        lua_toboolean(S, -1), "read from the text, not required");
  if (names_match(R, "bcnames", ljp_vmnames_bc) ||
      names_match(R, "irnames", ljp_vmnames_ir))
    return 1;
  for (i = 0; i < 600; i++) {
    const char *c = ljp_vmnames_call(i), *m;
    lua_getglobal(R, "v");
    lua_getfield(R, -1, "ircall");
    lua_rawgeti(R, -1, i);
    m = lua_tostring(R, -1);
    CHECK((!c) == (!m) && (!c || !strcmp(c, m)), "ircall[%d]: %s, not %s",
          i, c ? c : "none", m ? m : "none");
    lua_settop(R, 0);
    if (!m) break;
  }
  CHECK(i >= 50 && i < 600, "%d calls", i);
  CHECK(ljp_vmnames_bc("CALL") != ljp_vmnames_bc("CALLM"), "padded names");
  CHECK(ljp_vmnames_bc("NOSUCH") == -1 && ljp_vmnames_ir("") == -1 &&
        ljp_vmnames_ir("TOOLONG") == -1 && ljp_vmnames_call(-1) == NULL,
        "absent names");
  return 0;
}

/* A preloaded module (an embedder's own) is required, not read from the
** installed text; a name's first place that is not a name's start is
** skipped. */
static int preloaded(void)
{
  lua_State *S = state(
    "package.preload['jit.vmdef'] = function() return {\n"
    "  bcnames = 'ABCDLT    XYLT    ', irnames = 'X     Y     ',\n"
    "  ircall = {[0] = 'f', 'g'}} end");
  CHECK(S, "state");
  CHECK(ljp_vmnames_learn(S) && ljp_vmnames_learn_calls(S), "learnt");
  CHECK(ljp_vmnames_bc("LT") == 2, "LT at %d", ljp_vmnames_bc("LT"));
  CHECK(ljp_vmnames_ir("Y") == 1 && ljp_vmnames_ir("LOOP") == -1, "irnames");
  CHECK(!strcmp(ljp_vmnames_call(1), "g") && !ljp_vmnames_call(2), "ircall");
  return 0;
}

/* Loaded in the state already: read as it is (no ircall: none). */
static int loaded(void)
{
  lua_State *S = state(
    "package.loaded['jit.vmdef'] = {bcnames = 'A     B     ', "
    "irnames = 'X     '}");
  CHECK(S, "state");
  CHECK(ljp_vmnames_learn(S) && ljp_vmnames_bc("B") == 1, "bcnames");
  CHECK(ljp_vmnames_learn_calls(S) && !ljp_vmnames_call(0), "no calls");
  return 0;
}

/* Not found, or not 6 characters a name: unknown, looked up as absent. */
static int unknown(void)
{
  lua_State *S = state("package.path = './nothing/?.lua'");
  lua_State *T = state("package.loaded['jit.vmdef'] = {bcnames = 'A    ', "
                       "irnames = 'X     '}");
  CHECK(S && T, "states");
  CHECK(!ljp_vmnames_learn(S) && !ljp_vmnames_known(), "not found");
  CHECK(!ljp_vmnames_learn(T) && ljp_vmnames_ir("X") == -1, "bad names");
  CHECK(lua_gettop(S) == 0 && lua_gettop(T) == 0, "stacks left");
  return 0;
}

static void run(const char *name, int (*f)(void))
{
  int st;
  pid_t p;
  fflush(stdout);
  if ((p = fork()) == 0) {
    int r = f();
    fflush(stdout);
    _exit(r);
  }
  if (p < 0 || waitpid(p, &st, 0) != p || !WIFEXITED(st) ||
      WEXITSTATUS(st)) {
    printf("FAIL %s\n", name);
    fails++;
  } else {
    printf("ok %s\n", name);
  }
}

int main(void)
{
  run("from the text: as required", from_text);
  run("preloaded: required; a name's start only", preloaded);
  run("loaded: read as it is", loaded);
  run("not found or bad: unknown", unknown);
  printf("%d failed\n", fails);
  return fails != 0;
}
