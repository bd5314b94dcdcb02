#!/usr/bin/env bash
# docs/embedding.md's OpenResty/nginx-lua example (nginx/init_worker.conf
# and nginx/location.conf, included as they are) in a real nginx: Debian
# 12's nginx and libnginx-mod-http-lua, which runs on OpenResty's LuaJIT
# fork. Installing libnginx-mod-http-lua would replace the system's
# luajit (its libluajit2 takes libluajit-5.1.so.2's place), so the .debs
# are only downloaded (apt-get download, kept under the build directory
# for the next run) and unpacked into a temporary directory; that nginx
# runs with LD_LIBRARY_PATH on the unpacked libluajit and loads ljprof
# from the build tree. Skipped, with the reason, when the packages cannot
# be downloaded. Checks: the VM is OpenResty's fork; /ljprof returns
# folded stacks in which the Lua function the requests ran is hot;
# ljprof printed no notice (its probes work under the fork, in
# init_worker_by_lua) and nginx logged no error.
# Usage: tests/embed/nginx.sh SOURCE_DIR BUILD_DIR
set -u
src=$(cd "$1" && pwd) build=$(cd "$2" && pwd)
pkgs=(nginx libnginx-mod-http-lua libnginx-mod-http-ndk libluajit2-5.1-2
      libluajit2-5.1-common lua-resty-core lua-resty-lrucache)
debs="$build/embed-nginx-debs"
passes=0 fails=0
ok() { echo "ok: $*"; passes=$((passes + 1)); }
bad() { echo "FAILED: $*"; fails=$((fails + 1)); }

have_debs() {
  local p
  for p in "${pkgs[@]}"; do ls "$debs/${p}_"*.deb >/dev/null 2>&1 || return 1; done
}
if ! have_debs; then
  rm -rf "$debs"; mkdir -p "$debs"
  if ! (cd "$debs" && apt-get download -q "${pkgs[@]}") >"$debs/download.log" 2>&1 || ! have_debs; then
    echo "SKIP: cannot download Debian's nginx-lua packages with apt-get download:"
    grep -E '^(E|W):' "$debs/download.log" | head -5 | sed 's/^/    /'
    rm -rf "$debs"
    exit 77
  fi
fi
echo "using: $(cd "$debs" && ls *.deb | tr '\n' ' ')"

tmp=$(mktemp -d "$build/nginx-test.XXXXXX") || exit 1
pid=
cleanup() {
  [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
  cd /; rm -rf "$tmp"
}
trap cleanup EXIT
R="$tmp/root"
for d in "$debs"/*.deb; do dpkg-deb -x "$d" "$R" || { bad "dpkg-deb -x $d"; exit 1; }; done
mkdir -p "$tmp/temp"
cat >"$tmp/nginx.conf" <<EOF
load_module $R/usr/lib/nginx/modules/ndk_http_module.so;
load_module $R/usr/lib/nginx/modules/ngx_http_lua_module.so;
daemon off;
master_process off;  # one process: the worker that starts and answers
pid $tmp/nginx.pid;
error_log $tmp/error.log notice;
events { worker_connections 64; }
http {
    access_log off;
    client_body_temp_path $tmp/temp/body;
    proxy_temp_path $tmp/temp/proxy;
    fastcgi_temp_path $tmp/temp/fastcgi;
    uwsgi_temp_path $tmp/temp/uwsgi;
    scgi_temp_path $tmp/temp/scgi;
    lua_package_path "$src/?.lua;$R/usr/share/lua/5.1/?.lua;;";
    lua_package_cpath "$build/lib?.so;;";
    include $src/tests/embed/nginx/init_worker.conf;
    server {
        listen unix:$tmp/nginx.sock;
        include $src/tests/embed/nginx/location.conf;
        location = /work {
            content_by_lua_block {
                local function fib(n) if n < 2 then return n end return fib(n - 1) + fib(n - 2) end
                local t0, n = os.clock(), 0
                while os.clock() - t0 < 0.1 do n = n + fib(20) end
                ngx.say(n)
            }
        }
        location = /vm {
            content_by_lua_block {
                ngx.say(jit.version, "; OpenResty's fork: ", (pcall(require, "thread.exdata")))
            }
        }
    }
}
EOF
LD_LIBRARY_PATH="$R/usr/lib/x86_64-linux-gnu" "$R/usr/sbin/nginx" -p "$tmp" -c "$tmp/nginx.conf" \
  -e "$tmp/error.log" >"$tmp/nginx.out" 2>&1 &
pid=$!

get() {  # GET $1 over the unix socket; the body on stdout
  python3 - "$tmp/nginx.sock" "$1" <<'PY'
import socket, sys, time
for _ in range(300):  # nginx starts: up to 30 s under load
    try:
        s = socket.socket(socket.AF_UNIX)
        s.connect(sys.argv[1])
        break
    except OSError:
        time.sleep(0.1)
s.sendall(("GET %s HTTP/1.0\r\nHost: localhost\r\n\r\n" % sys.argv[2]).encode())
data = b""
while True:
    chunk = s.recv(65536)
    if not chunk:
        break
    data += chunk
head, _, body = data.partition(b"\r\n\r\n")
status = head.split(b"\r\n")[0].decode()
if " 200 " not in status:
    sys.stderr.write(status + "\n")
    sys.exit(1)
sys.stdout.write(body.decode())
PY
}

vm=$(get /vm) || { bad "GET /vm"; cat "$tmp/nginx.out" "$tmp/error.log" 2>/dev/null; exit 1; }
case $vm in
  *"fork: true"*) ok "nginx-lua runs on $vm" ;;
  *) echo "note: not OpenResty's LuaJIT fork: $vm" ;;
esac
for i in 1 2 3 4 5; do get /work >/dev/null || bad "GET /work"; done
get /ljprof >"$tmp/profile.folded" || bad "GET /ljprof"
lines=$(wc -l <"$tmp/profile.folded")
badl=$(grep -cvE '^[^ ].* [0-9]+$' "$tmp/profile.folded")
total=$(awk '{n += $NF} END {print n + 0}' "$tmp/profile.folded")
fib=$(awk '/fib/ {n += $NF} END {print n + 0}' "$tmp/profile.folded")
[ "$lines" -gt 0 ] && [ "$badl" = 0 ] && ok "/ljprof: $lines folded lines, $total samples" ||
  { bad "/ljprof: $lines lines, $badl not folded:"; head -5 "$tmp/profile.folded"; }
[ "$fib" -gt $((total / 5)) ] && ok "/ljprof: $fib of $total samples in fib (the /work requests)" ||
  { bad "/ljprof: $fib of $total samples in fib:"; sort -t' ' -k2 -nr "$tmp/profile.folded" | head -5; }
echo "top stacks:"; sort -k2 -nr -t' ' "$tmp/profile.folded" | awk '{print $NF, $0}' | sort -nr | cut -d' ' -f2- | head -3 | sed 's/^/    /'

kill "$pid"; wait "$pid" 2>/dev/null; pid=
notes=$(grep -h 'ljprof' "$tmp/error.log" "$tmp/nginx.out")
[ -z "$notes" ] && ok "ljprof said nothing in nginx's log" || bad "ljprof in nginx's log: $notes"
errors=$(grep -E '\[(error|crit|alert|emerg)\]' "$tmp/error.log")
[ -z "$errors" ] && ok "no errors in nginx's log" || bad "nginx's log: $errors"

echo "nginx: $passes passed, $fails failed"
[ $fails = 0 ]
