#!/usr/bin/env bash
# Installed copies work from a clean environment (issue 15).
#
# One build of the library (tests off), installed three ways:
#   /usr, /usr/local  meson install into a DESTDIR, laid over the real
#                     directory in a private mount namespace (unshare -m,
#                     overlayfs), so that the commands below see exactly
#                     what a real install gives; skipped, with the reason,
#                     where that is not permitted (not root, no overlayfs);
#   a custom prefix   installed into a temporary directory, then moved.
# For each: the installed `ljprof` command and `luajit -jprof` run under
# `env -i PATH=...` (nothing else set; a custom prefix gets exactly what
# `ljprof --env` prints) and profile a script; the module and jit.prof
# load from the install directories; the installed library has its
# SONAME, needs no libunwind and exports no _Unwind_*; a C host
# (tests/embed/host.c) built with `pkg-config --cflags --libs ljprof` runs
# and finds LuaJIT's _Unwind_RaiseException in libgcc_s (also read from
# LD_DEBUG=bindings); as a control, the same host linked with libunwind is
# caught. Everything is written under a temporary directory in the build
# directory, removed at exit.
#
# Usage: tests/install.sh SOURCE_DIR BUILD_DIR
set -u
src=$(cd "$1" && pwd) build=$(cd "$2" && pwd)
version=$(sed -n "s/^ *version : '\([^']*\)'.*/\1/p" "$src/meson.build" | head -1)
major=${version%%.*}
clean_path=/usr/local/bin:/usr/bin:/bin

passes=0 fails=0 skips=0
ok() { echo "ok: $*"; passes=$((passes + 1)); }
bad() { echo "FAILED: $*"; fails=$((fails + 1)); }
skip() { echo "SKIP: $*"; skips=$((skips + 1)); }

# The checks of one installed copy. $1 prefix (as seen by the commands),
# $2 its C module dir, $3 its Lua dir, $4 its libdir, $5 the environment
# (NAME=value words, besides PATH), $6 "host" to build and run the C host,
# $7 the copy's name in messages (default: the prefix). Prints ok/FAILED
# lines; the caller counts them.
check_copy() {
  local prefix=$1 cmod=$2 lmod=$3 libdir=$4 extra=$5 host=$6 name=${7:-$1}
  local out; out=$(mktemp -d "$tmp/run.XXXXXX")
  local E=(env -i PATH="$prefix/bin:$clean_path" HOME="$out" $extra)
  local got
  cd "$out" || return

  got=$("${E[@]}" sh -c 'command -v ljprof')
  [ "$got" = "$prefix/bin/ljprof" ] && ok "$name: ljprof is $got" ||
    bad "$name: 'command -v ljprof' gave '$got', want $prefix/bin/ljprof"
  got=$("${E[@]}" ljprof --version 2>&1)
  [ "$got" = "ljprof $version" ] && ok "$name: ljprof --version: $got" ||
    bad "$name: ljprof --version gave '$got'"

  got=$("${E[@]}" luajit -e 'io.write(package.searchpath("ljprof", package.cpath) or "none", " ",
                                       package.searchpath("jit.prof", package.path) or "none")' 2>&1)
  [ "$got" = "$cmod/ljprof.so $lmod/jit/prof.lua" ] && ok "$name: luajit finds $got" ||
    bad "$name: luajit finds '$got', want '$cmod/ljprof.so $lmod/jit/prof.lua'"
  got=$("${E[@]}" luajit -e 'local p = require("ljprof") io.write(p.version)' 2>&1)
  [ "$got" = "$version" ] && ok "$name: require('ljprof').version is $got" ||
    bad "$name: require('ljprof') gave '$got'"

  # The command: a flame graph and folded stacks of app.lua.
  if "${E[@]}" ljprof -r 1000 -o app.svg -o app.folded "$tmp/app.lua" >cmd.out 2>&1 &&
     grep -q 'busy' app.folded && grep -q '<svg' app.svg; then
    ok "$name: ljprof app.lua ($(tail -1 cmd.out))"
  else
    bad "$name: ljprof app.lua:"; sed 's/^/    /' cmd.out; [ -f app.folded ] && head -3 app.folded
  fi
  # -jprof: the text report, and folded stacks.
  if "${E[@]}" luajit -jprof=i1 "$tmp/app.lua" >jp.out 2>&1 && grep -q 'busy' jp.out &&
     "${E[@]}" luajit -jprof=Gi1,jp.folded "$tmp/app.lua" >/dev/null 2>&1 && grep -q 'busy' jp.folded; then
    ok "$name: luajit -jprof app.lua ($(grep -m1 'busy' jp.out | tr -s ' '))"
  else
    bad "$name: luajit -jprof app.lua:"; sed 's/^/    /' jp.out
  fi

  # The installed library.
  local lib="$libdir/libljprof.so.$major"
  got=$(readelf -dW "$lib" 2>&1 | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
  [ "$got" = "libljprof.so.$major" ] && ok "$name: SONAME $got" || bad "$name: SONAME '$got'"
  got=$(readelf -dW "$lib" | grep NEEDED | grep -o 'libunwind[^]]*')
  [ -z "$got" ] && ok "$name: libljprof needs no libunwind" || bad "$name: libljprof needs $got"
  got=$(nm -D --defined-only "$lib" | awk '$3 !~ /^(ljprof_|luaopen_ljprof$|luaL_openlibs$|f?exec(l|le|lp|v|ve|vp|vpe)$)/ {print $3}' | tr '\n' ' ')
  [ -z "$got" ] && ok "$name: libljprof exports only ljprof_*, luaopen_ljprof and the LD_PRELOAD interposers luaL_openlibs and exec* (no _Unwind_*)" ||
    bad "$name: libljprof also exports $got"
  # Started from the environment: luajit -l ljprof.auto, and LD_PRELOAD
  # of the installed library into luajit (LJPROF names the output).
  if "${E[@]}" LJPROF="rate=1000,output=auto-%p.folded" luajit -l ljprof.auto "$tmp/app.lua" >auto.out 2>&1 &&
     grep -q 'busy' auto-*.folded 2>/dev/null; then
    ok "$name: LJPROF=... luajit -l ljprof.auto app.lua"
  else
    bad "$name: luajit -l ljprof.auto app.lua:"; sed 's/^/    /' auto.out
  fi
  if "${E[@]}" LJPROF="rate=1000,output=pre-%p.folded" LD_PRELOAD="$lib" luajit "$tmp/app.lua" >pre.out 2>&1 &&
     grep -q 'busy' pre-*.folded 2>/dev/null; then
    ok "$name: LJPROF=... LD_PRELOAD=$lib luajit app.lua"
  else
    bad "$name: LD_PRELOAD=$lib luajit app.lua:"; sed 's/^/    /' pre.out
  fi
  got=$(readlink -f "$cmod/ljprof.so")
  [ "$got" = "$(readlink -f "$lib")" ] && ok "$name: ljprof.so -> $(readlink "$cmod/ljprof.so")" ||
    bad "$name: ljprof.so resolves to '$got'"

  [ "$host" = host ] || return 0
  # A C host built exactly with pkg-config's flags (nothing added).
  local flags
  flags=$("${E[@]}" pkg-config --cflags --libs ljprof 2>&1)
  if ! "${E[@]}" cc "$src/tests/embed/host.c" -o host $flags >host.out 2>&1; then
    bad "$name: cc host.c \$(pkg-config --cflags --libs ljprof) [$flags]:"; sed 's/^/    /' host.out
    return 0
  fi
  if "${E[@]}" LD_DEBUG=bindings LD_DEBUG_OUTPUT="$out/ld" ./host >host.out 2>&1; then
    ok "$name: C host [$flags]: $(grep -m1 '^_Unwind' host.out)"
  else
    bad "$name: C host [$flags] (exit $?):"; sed 's/^/    /' host.out
  fi
  got=$(cat "$out"/ld.* 2>/dev/null | grep "libluajit.*normal symbol \`_Unwind_RaiseException'" |
        sed -n 's/.* to \([^ ]*\) .*/\1/p' | sort -u)
  case $got in
    *libgcc_s*) ok "$name: LD_DEBUG=bindings: libluajit's _Unwind_RaiseException -> $got" ;;
    *) bad "$name: LD_DEBUG=bindings: libluajit's _Unwind_RaiseException -> '$got'" ;;
  esac
  # Control: the same host with libunwind linked in (what linking ljprof
  # did before it had its own unwinder) must be caught.
  if "${E[@]}" cc "$src/tests/embed/host.c" -o host-unwind $flags -Wl,--no-as-needed -lunwind \
       >/dev/null 2>&1; then
    "${E[@]}" ./host-unwind >host-unwind.out 2>&1
    local rc=$?
    [ $rc = 3 ] && ok "$name: control: a host linked with libunwind is caught ($(grep -m1 '^_Unwind' host-unwind.out))" ||
      bad "$name: control: a host linked with libunwind exited $rc"
  else
    echo "note: $name: no libunwind to link the control host with"
  fi
}

# -- the mount namespace side: re-entered through unshare ---------------
if [ "${3:-}" = --inside ]; then
  # $4 DESTDIR, $5 prefix, $6 cmod, $7 lmod, $8 libdir, $9 tmp
  dest=$4 prefix=$5 tmp=$9
  if ! mount -t overlay overlay -o "lowerdir=$dest$prefix:$prefix" "$prefix" 2>"$tmp/mount.err"; then
    echo "SKIP: $prefix: cannot lay the install over $prefix (overlayfs): $(cat "$tmp/mount.err")"
    exit 77
  fi
  host=
  [ "$prefix" = /usr ] && host=host  # /usr/lib/<multiarch> is searched without ldconfig
  check_copy "$prefix" "$6" "$7" "$8" "" "$host"
  exit 0
fi

tmp=$(mktemp -d "$build/install-test.XXXXXX") || exit 1
trap 'cd /; rm -rf "$tmp"' EXIT
cat >"$tmp/app.lua" <<'EOF'
local function busy(n)
  local s = 0
  for i = 1, n do s = s + math.sin(i) end
  return s
end
local t0, s = os.clock(), 0
while os.clock() - t0 < 0.3 do s = s + busy(1e5) end
io.write("app: done\n")
EOF

b="$tmp/build"
if ! meson setup -Dtests=false --prefix=/usr "$b" "$src" >"$tmp/setup.log" 2>&1 ||
   ! ninja -C "$b" >"$tmp/ninja.log" 2>&1; then
  cat "$tmp/setup.log" "$tmp/ninja.log"
  echo "FAILED: meson setup/ninja"
  exit 1
fi

[ -e "$b/tests" ] && bad "-Dtests=false: test programs were built: $(ls "$b/tests" | head -5 | tr '\n' ' ')" ||
  ok "-Dtests=false: the install build makes the library and the command only (no test or sanitizer build)"

# The libdir of the configured prefix.
dirs_of() {
  meson introspect --buildoptions "$b" | python3 -c '
import json, sys
o = {x["name"]: x["value"] for x in json.load(sys.stdin)}
print(o["prefix"] + "/" + o["libdir"])'
}

namespace_ok=true
why=
if [ "$(id -u)" != 0 ]; then
  namespace_ok=false why="not root"
elif ! unshare -m true 2>"$tmp/unshare.err"; then
  namespace_ok=false why="unshare -m is not permitted: $(head -1 "$tmp/unshare.err")"
fi

for prefix in /usr /usr/local; do
  meson configure "$b" -Dprefix=$prefix >/dev/null || { bad "meson configure -Dprefix=$prefix"; continue; }
  dest="$tmp/dest$(echo $prefix | tr / _)"
  if ! DESTDIR="$dest" meson install -C "$b" --quiet >"$tmp/install.log" 2>&1; then
    bad "$prefix: meson install"; cat "$tmp/install.log"; continue
  fi
  libdir=$(dirs_of)
  if [ $prefix = /usr ]; then
    cmod=$(pkg-config --variable=INSTALL_CMOD luajit) lmod=$(pkg-config --variable=INSTALL_LMOD luajit)
  else
    cmod=/usr/local/lib/lua/5.1 lmod=/usr/local/share/lua/5.1
  fi
  for f in "$cmod/ljprof.so" "$lmod/jit/prof.lua" "$lmod/jit/prof/cli.lua" "$lmod/jit/prof/auto.lua" \
           "$lmod/ljprof/auto.lua" "$prefix/bin/ljprof" \
           "$libdir/libljprof.so.$major" "$libdir/pkgconfig/ljprof.pc" "$prefix/include/ljprof.h"; do
    [ -e "$dest$f" ] || [ -L "$dest$f" ] || bad "$prefix: $f not installed"
  done
  ok "$prefix: installed into DESTDIR: $(cd "$dest" && find . \( -type f -o -type l \) | grep -v '/jit/prof/' | sort | tr '\n' ' ')"
  if ! $namespace_ok; then
    skip "$prefix: running the installed copy needs a private mount namespace ($why)"
    continue
  fi
  unshare -m --propagation private "$0" "$src" "$build" --inside "$dest" "$prefix" "$cmod" "$lmod" "$libdir" "$tmp" \
    >"$tmp/inside.log" 2>&1
  rc=$?
  cat "$tmp/inside.log"
  n=$(grep -c '^ok:' "$tmp/inside.log"); passes=$((passes + n))
  n=$(grep -c '^FAILED:' "$tmp/inside.log"); fails=$((fails + n))
  n=$(grep -c '^SKIP:' "$tmp/inside.log"); skips=$((skips + n))
  if [ $rc != 0 ] && [ $rc != 77 ]; then bad "$prefix: the namespace side exited $rc"; fi
done

# A custom prefix: the command needs nothing; luajit needs what
# `ljprof --env` prints; the C host needs PKG_CONFIG_PATH and
# LD_LIBRARY_PATH (docs/usage.md, "Install").
P="$tmp/opt/ljprof"
meson configure "$b" -Dprefix="$P" >/dev/null && meson install -C "$b" --quiet >"$tmp/install.log" 2>&1 ||
  { bad "custom prefix $P: meson install"; cat "$tmp/install.log"; }
libdir=$(dirs_of)
envline=$(env -i PATH="$clean_path" "$P/bin/ljprof" --env)
luapath=$(env -i PATH="$clean_path" sh -c "$envline"'; echo "$LUA_PATH"')
luacpath=$(env -i PATH="$clean_path" sh -c "$envline"'; echo "$LUA_CPATH"')
[ "$luapath" = "$P/share/lua/5.1/?.lua;;" ] && [ "$luacpath" = "$P/lib/lua/5.1/?.so;;" ] &&
  ok "custom prefix: ljprof --env: $envline" || bad "custom prefix: ljprof --env gave LUA_PATH='$luapath' LUA_CPATH='$luacpath'"
if env -i PATH="$clean_path" luajit -jprof "$tmp/app.lua" >/dev/null 2>&1; then
  echo "note: custom prefix: luajit -jprof ran without the environment: another ljprof is installed"
else
  ok "custom prefix: without the environment, luajit -jprof fails as documented"
fi
check_copy "$P" "$P/lib/lua/5.1" "$P/share/lua/5.1" "$libdir" \
  "LUA_PATH=$luapath LUA_CPATH=$luacpath PKG_CONFIG_PATH=$libdir/pkgconfig LD_LIBRARY_PATH=$libdir" \
  host "custom prefix"
# Moved elsewhere, the tree still finds itself (the command, --env).
M="$tmp/moved"
mv "$tmp/opt" "$M"
P="$M/ljprof"
envline=$(env -i PATH="$clean_path" "$P/bin/ljprof" --env)
luapath=$(env -i PATH="$clean_path" sh -c "$envline"'; echo "$LUA_PATH"')
luacpath=$(env -i PATH="$clean_path" sh -c "$envline"'; echo "$LUA_CPATH"')
check_copy "$P" "$P/lib/lua/5.1" "$P/share/lua/5.1" "$M${libdir#"$tmp/opt"}" \
  "LUA_PATH=$luapath LUA_CPATH=$luacpath" "" "custom prefix, moved"

echo "install: $passes passed, $fails failed, $skips skipped"
[ $fails = 0 ] || exit 1
[ $passes -gt 0 ] || exit 77
exit 0
