#!/usr/bin/env bash
# Cross-build Debian's LuaJIT 2.1 for Windows x64 (mingw-w64), once, into a
# cache directory: tools/win/build-luajit.sh DIR  (./run test-windows uses
# build-win/luajit). Reused when DIR/luajit.exe and DIR/lua51.dll are there.
#
# The source is Debian's own (`apt-get source luajit`), fetched with a
# private apt configuration under DIR/apt (a deb-src entry of its own, its
# own lists): the system's apt setup is not changed. Leaves in DIR:
# luajit.exe, lua51.dll, include/ (lua.h, lauxlib.h, lualib.h, luaconf.h,
# luajit.h, lua.hpp), jit/ (LuaJIT's Lua modules: -jp, -jv, ...), VERSION
# (the Debian source version) and src/ (the unpacked tree).
# Needs: gcc-mingw-w64-x86-64, dpkg-dev (apt-get source unpacks with it),
# gcc (LuaJIT's build-time host tools).
set -euo pipefail
out=${1:?usage: build-luajit.sh DIR}
mkdir -p "$out"
out=$(cd "$out" && pwd)

if [ -f "$out/luajit.exe" ] && [ -f "$out/lua51.dll" ] && [ -f "$out/include/lua.h" ]; then
  exit 0
fi

apt_dir="$out/apt"
rm -rf "$apt_dir" "$out/src"
mkdir -p "$apt_dir/lists/partial" "$apt_dir/parts" "$apt_dir/cache/archives/partial"
# The same archive and suite as the system's (Debian bookworm), source only.
suite=$(. /etc/os-release 2>/dev/null && echo "${VERSION_CODENAME:-bookworm}")
cat > "$apt_dir/sources.list" <<SRC
deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian $suite main
deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian $suite-updates main
SRC
apt_opts=(-o "Dir::Etc::SourceList=$apt_dir/sources.list"
          -o "Dir::Etc::SourceParts=$apt_dir/parts"
          -o "Dir::State::Lists=$apt_dir/lists"
          -o "Dir::Cache=$apt_dir/cache"
          -o "Dir::Cache::pkgcache=" -o "Dir::Cache::srcpkgcache="
          -o "APT::Get::List-Cleanup=false"
          -o "APT::Sandbox::User=$(id -un)")  # the files are ours, not _apt's
echo "build-luajit: fetching Debian's LuaJIT source ($suite)" >&2
apt-get "${apt_opts[@]}" update -qq
mkdir -p "$out/src"
(cd "$out/src" && apt-get "${apt_opts[@]}" source -qq luajit >/dev/null)
tree=$(find "$out/src" -mindepth 1 -maxdepth 1 -type d -name 'luajit-*' | head -1)
[ -n "$tree" ] || { echo "build-luajit: apt-get source luajit unpacked nothing in $out/src" >&2; exit 1; }
# Debian's patches are applied by dpkg-source when unpacking (3.0 quilt).
ver=$(cd "$tree" && dpkg-parsechangelog -S Version)

echo "build-luajit: cross-building LuaJIT $ver for Windows x64" >&2
make -C "$tree" -j"$(nproc)" HOST_CC=gcc CROSS=x86_64-w64-mingw32- TARGET_SYS=Windows \
  >"$out/build.log" 2>&1 || { tail -30 "$out/build.log" >&2; exit 1; }
mkdir -p "$out/include" "$out/jit"
cp "$tree/src/luajit.exe" "$tree/src/lua51.dll" "$out/"
cp "$tree/src/lua.h" "$tree/src/lauxlib.h" "$tree/src/lualib.h" "$tree/src/luaconf.h" \
   "$tree/src/luajit.h" "$tree/src/lua.hpp" "$out/include/"
cp "$tree/src/jit/"*.lua "$out/jit/"
echo "$ver" > "$out/VERSION"
