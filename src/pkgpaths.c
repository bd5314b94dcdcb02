/*
** The program's package paths for a Lua state of ljprof's own (the exit
** helper's, a writer's, an export's: ljp_own_newstate), which must find
** ljprof's modules wherever the program went since: package.path and
** package.cpath with their relative templates ("./?.lua", "lib/?.so")
** made absolute from the working directory now. What is particular to an
** OS (the working directory, what is absolute, the separator) is in
** os.h. Normal context (malloc, the Lua API), on the program's thread.
*/
#include <stdlib.h>
#include <string.h>

#include <lua.h>

#include "buf.h"
#include "exit_signals.h"
#include "os.h"

/* v[0..n) with its relative templates made absolute (malloc'ed, NUL-ended;
** NULL when out of memory); as it is when the working directory cannot be
** read. */
static char *abs_package_path(const char *v, size_t n)
{
  char cwd[4096];
  ljp_buf b = {0};
  size_t i = 0;
  int have_cwd = ljp_os_cwd(cwd, sizeof(cwd)) == 0;
  while (i <= n) {
    size_t j = i;
    while (j < n && v[j] != ';') j++;
    if (have_cwd && j > i && !ljp_os_path_is_abs(v + i, j - i)) {
      const char *t = v + i;
      size_t k = j - i;
      if (k >= 2 && t[0] == '.' && (t[1] == '/' || t[1] == LJP_OS_DIRSEP)) {
        t += 2;
        k -= 2;
      }
      ljp_buf_put(&b, cwd, strlen(cwd));
      ljp_buf_putc(&b, LJP_OS_DIRSEP);
      ljp_buf_put(&b, t, k);
    } else {
      ljp_buf_put(&b, v + i, j - i);  /* absolute, empty (;;), or "?" */
    }
    if (j < n) ljp_buf_putc(&b, ';');
    i = j + 1;
  }
  if (ljp_buf_reserve(&b, 0) != 0) {  /* room for the NUL */
    ljp_buf_free(&b);
    return NULL;
  }
  b.b[b.n] = '\0';
  return b.b;
}

void ljp_package_paths(lua_State *L, char **path, char **cpath)
{
  size_t n;
  const char *v;
  *path = *cpath = NULL;
  lua_getglobal(L, "package");
  if (lua_istable(L, -1)) {
    lua_getfield(L, -1, "path");
    if ((v = lua_tolstring(L, -1, &n))) *path = abs_package_path(v, n);
    lua_getfield(L, -2, "cpath");
    if ((v = lua_tolstring(L, -1, &n))) *cpath = abs_package_path(v, n);
    lua_pop(L, 2);
  }
  lua_pop(L, 1);
}
