#!/bin/bash
# On the machine with the GPU, from the unpacked bundle (bundle.sh) inside a copy of the repository:
#   tar xJf longvk-bundle.tar.xz && bash bundle/device-run.sh [REPO]     (REPO: that copy's root)
# Finds the Vulkan driver, lists the devices, runs `longvk bench chunks` and `bench attn`, then
# every test executable under the validation layer (logs in $OUT, or /tmp when unset).
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "${1:-$here/..}" && pwd)
. "$here/paths"
log=${OUT:-/tmp}/tests.log
export LD_LIBRARY_PATH=$here/lib VK_LAYER_PATH=$here/layers
icd=$(find / -xdev -path '*vulkan/icd.d/*' -name '*nvidia*.json' 2>/dev/null | head -1)
[ -n "$icd" ] && export VK_DRIVER_FILES=$icd
echo "driver manifest: ${icd:-none found, the loader searches its default places}"
# the tests were built with the source at $src and the CLI at $build/longvk
[ "$repo" = "$src" ] || { mkdir -p "$(dirname "$src")" && ln -sfn "$repo" "$src"; }
mkdir -p "$build/tests/tmp" && cp "$here/longvk" "$build/longvk"
cd "$here"
./longvk devices || exit 1
for b in chunks attn; do echo "== bench $b"; timeout 120 ./longvk bench $b; done
export LONGVK_VALIDATE=1
for t in tests/*; do
    timeout 120 "$t" --jobs 1 >>"$log" 2>&1
    echo "$(basename "$t") rc=$? $(grep Synthesis "$log" | tail -1)"
done
