-- LuaRocks: `luarocks make` in the source tree builds the C module and
-- installs it with jit/prof.lua, jit/prof/*.lua, ljprof/auto.lua
-- (luajit -l ljprof.auto) and the `ljprof` command
-- (docs/usage.md, "Install"). The rock's version is meson's project
-- version (tests/rockspec.sh checks both, and installs this rockspec into
-- a local tree).
rockspec_format = "3.0"
package = "ljprof"
version = "0.1.0-1"
source = {
  -- `luarocks make` builds the working tree and does not fetch this; set
  -- the project's public repository here before publishing the rock.
  url = "git+file:///dev/null",
}
description = {
  summary = "Low-overhead sampling profiler for LuaJIT 2.1",
  detailed = [[
A statistical sampling profiler for stock LuaJIT 2.1, written in C: a
drop-in for jit.profile, luajit -jprof (LuaJIT's -jp with more), and the
ljprof command, which writes flame graphs, speedscope, pprof and folded
stacks. Linux x86-64.]],
  license = "MIT",
  labels = {"luajit", "profiler"},
}
supported_platforms = {"linux"}
dependencies = {
  "lua >= 5.1, < 5.2",  -- LuaJIT 2.1: the module uses LuaJIT's API
}
-- The module includes <luajit.h>, found under LUAJIT_DIR's
-- include/luajit-2.1 (Debian: /usr). A LuaJIT elsewhere:
--   luarocks make LUAJIT_DIR=/opt/luajit   (or LUAJIT_INCDIR=.../include)
-- LuaRocks' LUA_INCDIR (Debian: /usr/include/lua5.1, PUC Lua's headers)
-- is not used.
external_dependencies = {
  LUAJIT = {header = "luajit-2.1/luajit.h"},
}
build = {
  type = "command",
  -- One compiler call over src/*.c, with meson's flags (the library hides
  -- everything but its API; lua_* symbols come from the process that loads
  -- it, as in the meson build).
  build_command = [[$(CC) $(CFLAGS) -std=gnu11 -fvisibility=hidden -pthread -D_FILE_OFFSET_BITS=64 -Iinclude -I"$(LUAJIT_INCDIR)/luajit-2.1" -I"$(LUAJIT_INCDIR)" src/*.c -o ljprof.so $(LIBFLAG) -pthread -ldl -lm -lrt]],
  -- jit/prof/ whole (a new writer needs no entry here); the launcher
  -- src/ljprof.in as it is (it finds the module in the LuaRocks tree
  -- around it), with the version filled in and bash as its interpreter
  -- when there is one (src/ljprof.in says why).
  install_command = [[mkdir -p "$(LIBDIR)" "$(LUADIR)/jit/prof" "$(LUADIR)/ljprof" "$(BINDIR)" && cp ljprof.so "$(LIBDIR)/" && cp jit/prof.lua "$(LUADIR)/jit/" && cp jit/prof/*.lua "$(LUADIR)/jit/prof/" && cp ljprof/auto.lua "$(LUADIR)/ljprof/" && sed -e "s/@VERSION@/0.1.0/" -e "1s|@SHELL@|`command -v bash || echo /bin/sh`|" src/ljprof.in > "$(BINDIR)/ljprof" && chmod 755 "$(BINDIR)/ljprof"]],
}
