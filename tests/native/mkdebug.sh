#!/bin/sh
# Stripped copies of test fixtures and their separate debug files, as
# Debian's -dbg/-dbgsym packages install them (tests/lua/test_native_names.lua).
#   mkdebug.sh OBJCOPY OUTDIR LIB_WITH_BUILD_ID LIB_WITHOUT_BUILD_ID
# In OUTDIR:
#   libljp_dbgid.so         stripped, build ID; debug file in
#                           debugroot/.build-id/xx/rest.debug
#   libljp_dbglink_dir.so   stripped, no build ID, .gnu_debuglink to a file
#                           next to it (OUTDIR/)
#   libljp_dbglink_dot.so   ... in OUTDIR/.debug/
#   libljp_dbglink_root.so  ... in debugroot/OUTDIR/ (the debug directory)
#   libljp_dbglink_bad.so   ... in OUTDIR/.debug/, changed after the link
#                           was made (its CRC does not match: refused)
#   libljp_dbgnone.so       stripped, no debug file anywhere
set -eu
objcopy=$1 out=$2 withid=$(realpath "$3") noid=$(realpath "$4")
cd "$out"
out=$(pwd -P)
rm -rf debugroot .debug libljp_dbglink_dir.debug
mkdir -p debugroot .debug "debugroot$out"

id=$(LC_ALL=C readelf -n "$withid" | sed -n 's/.*Build ID: *\([0-9a-f]*\).*/\1/p' | head -n 1)
[ -n "$id" ] || { echo "mkdebug.sh: $withid has no build ID" >&2; exit 1; }
idd=debugroot/.build-id/$(echo "$id" | cut -c1-2)
mkdir -p "$idd"
"$objcopy" --only-keep-debug "$withid" "$idd/$(echo "$id" | cut -c3-).debug"
"$objcopy" --strip-all "$withid" libljp_dbgid.so

link() {  # link NAME DIR: the debug file in DIR, the stripped copy here
  "$objcopy" --only-keep-debug "$noid" "$2/libljp_$1.debug"
  "$objcopy" --strip-all --add-gnu-debuglink="$2/libljp_$1.debug" "$noid" "libljp_$1.so"
}
link dbglink_dir .
link dbglink_dot .debug
link dbglink_root "debugroot$out"
link dbglink_bad .debug
printf 'x' >> .debug/libljp_dbglink_bad.debug
"$objcopy" --strip-all "$noid" libljp_dbgnone.so
