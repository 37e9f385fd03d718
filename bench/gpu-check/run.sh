#!/usr/bin/env bash
# The GPU check from its pack (bench/gpu-check/pack.ts), on a host with an NVIDIA driver and no Node:
#   bash .gpu-pack/run.sh            results in $OUT/gpu-check.md (or the pack's out/ when OUT is unset)
# Unpacks Node and libonnxruntime.so.1 into a folder of /tmp, the Vulkan loader (Debian's libvulkan1)
# beside them, and runs the check with that Node. Arguments go to the check (check.ts: --quick, --timeout-secs N,
# --rehearse-on-cpu, --third-party DIR); BATCHWISE_PYTHON names a python3 with torch if not the one on PATH.
set -u
PACK="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
OUT="${OUT:-$PACK/out}"
mkdir -p "$OUT"
WORK="$(mktemp -d /tmp/batchwise-gpu-check.XXXXXX)"
say() { echo "gpu-check: $*" >&2; }

unpack() { # <name in the pack> <target>: name.xz decompressed, or the file itself (a smoke pack links it)
  if [ -f "$PACK/$1.xz" ]; then
    if command -v xz >/dev/null; then xz -dc "$PACK/$1.xz" >"$2"
    else python3 -c 'import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' "$PACK/$1.xz" "$2"
    fi
  elif [ -e "$PACK/$1" ]; then cp -L "$PACK/$1" "$2"
  else say "the pack has no $1 (nor $1.xz): pack it again with pnpm gpu:pack"; return 1
  fi
}

cp -r "$PACK/app" "$WORK/app"
unpack node "$WORK/node" && chmod +x "$WORK/node" || exit 3
unpack libonnxruntime.so.1 "$WORK/app/node_modules/onnxruntime-node/bin/napi-v6/linux/x64/libonnxruntime.so.1" || exit 3

if [ -f "$PACK/libvulkan1_amd64.deb" ]; then
  dpkg-deb -x "$PACK/libvulkan1_amd64.deb" "$WORK/vulkan" && export LD_LIBRARY_PATH="$WORK/vulkan/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
else
  say "the pack has no Vulkan loader (libvulkan1_amd64.deb); using the host's, if any"
fi

# The ICD names the driver's library by name: where the driver is mounted outside ldconfig's paths, add them.
for lib in /usr/local/nvidia/lib64 /usr/local/nvidia/lib; do
  [ -d "$lib" ] && export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$lib"
done
# A driver mounted under /usr/local/nvidia keeps its Vulkan manifest in share/vulkan/icd.d there: searched too.
# Without a display the check (as `batchwise serve`) uses the driver through libEGL_nvidia.so.0 (headless-vulkan.ts).
if [ -z "${VK_DRIVER_FILES:-}" ] && [ -d /usr/local/nvidia/share/vulkan/icd.d ]; then
  export XDG_DATA_DIRS="/usr/local/nvidia/share:${XDG_DATA_DIRS:-/usr/local/share:/usr/share}"
fi
say "node $("$WORK/node" --version) in $WORK; VK_DRIVER_FILES=${VK_DRIVER_FILES:-<unset>} XDG_DATA_DIRS=${XDG_DATA_DIRS:-<unset>}"

"$WORK/node" "$WORK/app/check/check.js" --out "$OUT/gpu-check.md" --work "$WORK" "$@"
status=$?
[ -n "${KEEP_GPU_CHECK_WORK:-}" ] || rm -rf "$WORK"
exit $status
