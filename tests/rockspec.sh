#!/usr/bin/env bash
# The LuaRocks rockspec (issue 15): its version is meson's, it lists what
# the meson build compiles, and Debian's `luarocks make` installs the
# module, jit/prof.lua, jit/prof/*.lua and the `ljprof` command into a
# local tree, from which `luajit -jprof` and `ljprof` profile a script
# after `eval "$(luarocks path --tree ...)"`, in a clean environment.
# The build runs in a copy of the sources; everything is written under a
# temporary directory in the build directory, removed at exit.
# Usage: tests/rockspec.sh SOURCE_DIR BUILD_DIR
set -u
src=$(cd "$1" && pwd) build=$(cd "$2" && pwd)
version=$(sed -n "s/^ *version : '\([^']*\)'.*/\1/p" "$src/meson.build" | head -1)
clean_path=/usr/local/bin:/usr/bin:/bin
passes=0 fails=0
ok() { echo "ok: $*"; passes=$((passes + 1)); }
bad() { echo "FAILED: $*"; fails=$((fails + 1)); }

spec=$(cd "$src" && ls ljprof-*.rockspec 2>/dev/null)
[ "$(echo "$spec" | wc -w)" = 1 ] && [ "$spec" = "ljprof-$version-1.rockspec" ] &&
  ok "rockspec $spec matches meson's version $version" ||
  bad "want one ljprof-$version-1.rockspec at the top of the tree, found '$spec'"
grep -q "^version = \"$version-1\"" "$src/$spec" && ok "its version field is $version-1" ||
  bad "$spec: version field is not \"$version-1\""
grep -q "s/@VERSION@/$version/" "$src/$spec" && ok "the command it installs says $version" ||
  bad "$spec: install_command does not fill in version $version"
grep -q "define LJPROF_VERSION \"$version\"" "$src/include/ljprof.h" && ok "ljprof.h's LJPROF_VERSION is $version" ||
  bad "include/ljprof.h: LJPROF_VERSION is not \"$version\""
# The rock compiles src/*.c: so must meson.
missing=$(cd "$src" && for f in src/*.c; do grep -q "'$f'" meson.build || echo "$f"; done)
[ -z "$missing" ] && ok "meson.build compiles every src/*.c, as the rock does" ||
  bad "src files the rock compiles and meson does not: $missing"

if ! command -v luarocks >/dev/null 2>&1; then
  echo "SKIP: luarocks is not installed (./run test installs Debian's luarocks)"
  [ $fails = 0 ] || exit 1
  exit 77
fi

tmp=$(mktemp -d "$build/rockspec-test.XXXXXX") || exit 1
trap 'cd /; rm -rf "$tmp"' EXIT
mkdir "$tmp/src" "$tmp/home" "$tmp/run"
cp -R "$src/src" "$src/include" "$src/jit" "$src/ljprof" "$src/$spec" "$tmp/src/"
E=(env -i PATH="$clean_path" HOME="$tmp/home")
if (cd "$tmp/src" && "${E[@]}" luarocks make --tree "$tmp/tree" "$spec") >"$tmp/make.log" 2>&1; then
  ok "luarocks make --tree: $(grep -m1 'is now installed' "$tmp/make.log")"
else
  bad "luarocks make --tree:"; sed 's/^/    /' "$tmp/make.log"
  echo "rockspec: $passes passed, $fails failed"
  exit 1
fi
for f in lib/lua/5.1/ljprof.so share/lua/5.1/jit/prof.lua share/lua/5.1/ljprof/auto.lua bin/ljprof; do
  [ -e "$tmp/tree/$f" ] || bad "not installed: $f"
done
n_src=$(ls "$src"/jit/prof/*.lua | wc -l)
n_got=$(ls "$tmp"/tree/share/lua/5.1/jit/prof/*.lua 2>/dev/null | wc -l)
[ "$n_src" = "$n_got" ] && ok "jit/prof: $n_got files installed" || bad "jit/prof: $n_got of $n_src files installed"
got=$(nm -D --defined-only "$tmp/tree/lib/lua/5.1/ljprof.so" | awk '{print $3}' | grep -v '^ljprof_\|^luaopen_ljprof$\|^luaL_openlibs$' | grep -Ev '^f?exec(l|le|lp|v|ve|vp|vpe)$' | tr '\n' ' ')
[ -z "$got" ] && ok "the rock's ljprof.so exports only ljprof_*, luaopen_ljprof and the LD_PRELOAD interposers luaL_openlibs and exec*" ||
  bad "the rock's ljprof.so also exports: $got"

cat >"$tmp/run/app.lua" <<'EOF'
local function busy(n)
  local s = 0
  for i = 1, n do s = s + math.sin(i) end
  return s
end
local t0, s = os.clock(), 0
while os.clock() - t0 < 0.3 do s = s + busy(1e5) end
io.write("app: done\n")
EOF
cd "$tmp/run" || exit 1
paths=$("${E[@]}" luarocks path --tree "$tmp/tree")
R=("${E[@]}" sh -c "$paths"'; exec "$@"' sh)
if "${R[@]}" luajit -jprof=i1 app.lua >jp.out 2>&1 && grep -q busy jp.out; then
  ok "luajit -jprof app.lua with luarocks path: $(grep -m1 busy jp.out | tr -s ' ')"
else
  bad "luajit -jprof app.lua with luarocks path:"; sed 's/^/    /' jp.out
fi
got=$("${R[@]}" sh -c 'command -v ljprof; ljprof --version' 2>&1 | tr '\n' ' ')
[ "$got" = "$tmp/tree/bin/ljprof ljprof $version " ] && ok "ljprof is the rock's: $got" ||
  bad "ljprof: '$got'"
if "${R[@]}" ljprof -r 1000 -o app.folded app.lua >cmd.out 2>&1 && grep -q busy app.folded; then
  ok "the rock's ljprof app.lua: $(tail -1 cmd.out)"
else
  bad "the rock's ljprof app.lua:"; sed 's/^/    /' cmd.out
fi
if "${R[@]}" env LJPROF="rate=1000,output=auto.folded" luajit -l ljprof.auto app.lua >auto.out 2>&1 &&
   grep -q busy auto.folded; then
  ok "LJPROF=... luajit -l ljprof.auto app.lua with luarocks path"
else
  bad "luajit -l ljprof.auto app.lua with luarocks path:"; sed 's/^/    /' auto.out
fi
# The command alone (no luarocks path): it finds its tree by itself.
if "${E[@]}" "$tmp/tree/bin/ljprof" -r 1000 -o app2.folded app.lua >cmd2.out 2>&1 && grep -q busy app2.folded; then
  ok "the rock's ljprof without luarocks path: $(tail -1 cmd2.out)"
else
  bad "the rock's ljprof without luarocks path:"; sed 's/^/    /' cmd2.out
fi

echo "rockspec: $passes passed, $fails failed"
[ $fails = 0 ]
