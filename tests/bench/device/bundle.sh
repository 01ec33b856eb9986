#!/bin/bash
# Packs longvk's CLI and the engine tests that need no codec (with the tensor-core kernels), with
# every library they load, for a machine that has a Vulkan driver but none of Debian's packages
# (a lent GPU machine, say): run
# there with device-run.sh. FFmpeg is replaced by stub libraries whose functions trap, so
# `longvk devices`, `info` and every `bench` but `encode` run (the issue-46 ones, `bench gemm --shapes dit`,
# `bench dit`, `bench vae --preset 480p`, `bench generate --no-encode`, with them); generate, decode
# and metrics do not. NVIDIA's driver also needs the GL vendor-neutral dispatch libraries, which
# are added from Debian's archive (apt-get download: nothing is installed here).
#
#   tests/bench/device/bundle.sh /tmp/longvk-bundle.tar.xz      (from the repository root)
set -euo pipefail
out=$(realpath -m "$1")
src=$(pwd)
build=/tmp/longvk-bundle-build
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
b=$work/bundle
mkdir -p "$b/lib" "$b/tests" "$b/layers"

# The tensor-core kernels need a glslang that knows GL_KHR_cooperative_matrix: LONGVK_GLSLANG,
# else the one .ci/glslang finds or builds (once, about 3 minutes; cached).
glslang="${LONGVK_GLSLANG:-$(bash "$src/.ci/glslang")}"
echo "bundle: shaders compiled with $glslang" >&2
# --as-needed: a test that calls no FFmpeg function does not load it
cmake -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=Release -DCMAKE_EXE_LINKER_FLAGS=-Wl,--as-needed \
    -DLONGVK_GLSLANG="$glslang" >/dev/null
cmake --build "$build" -j"$(nproc)" >/dev/null
cp "$build/longvk" "$b/"
# every test executable is built in the build's tests/, whatever its folder of tests/ (tests/CMakeLists.txt)
for t in "$build"/tests/test_*; do
    [ -x "$t" ] && ! readelf -d "$t" | grep -q 'libav' && cp "$t" "$b/tests/"
done

# stub FFmpeg: a trapping function for each symbol the CLI imports, under the symbol's version
# (LIBAVCODEC_59 -> libavcodec.so.59)
nm -D --undefined-only "$build/longvk" | awk '{print $2}' | grep -E '@LIB(AV|SW)[A-Z]+_[0-9]+$' | sort -u >"$work/syms"
for tag in $(cut -d@ -f2 "$work/syms" | sort -u); do
    name=$(echo "${tag%_*}" | tr 'A-Z' 'a-z')
    grep "@$tag\$" "$work/syms" | cut -d@ -f1 | sed 's/.*/void &(void) { __builtin_trap(); }/' >"$work/$tag.c"
    echo "$tag { global: *; };" >"$work/$tag.map"
    gcc -shared -fPIC -fno-builtin -o "$b/lib/$name.so.${tag##*_}" "$work/$tag.c" \
        -Wl,--version-script="$work/$tag.map" -Wl,-soname,"$name.so.${tag##*_}"
done

# every other library the CLI and the tests load, but glibc's own
{ LD_LIBRARY_PATH=$b/lib ldd "$b/longvk" "$b"/tests/*; } | awk '$3 ~ /^\// {print $3}' | sort -u |
    grep -v -E "/(libc|libm|libpthread|libdl|librt|libresolv|ld-linux-x86-64)\.so|^$b/" |
    xargs -I{} cp -L {} "$b/lib/"

# the validation layer (the tests fail on any message), its manifest pointing into the bundle
cp -L /usr/lib/x86_64-linux-gnu/libVkLayer_khronos_validation.so "$b/lib/"
sed 's|"library_path": *"[^"]*"|"library_path": "../lib/libVkLayer_khronos_validation.so"|' \
    /usr/share/vulkan/explicit_layer.d/VkLayer_khronos_validation.json >"$b/layers/VkLayer_khronos_validation.json"

# libglvnd and the X libraries it loads, for NVIDIA's libGLX_nvidia.so.0
(cd "$work" && apt-get download -q libglvnd0 libglx0 libegl1 libx11-6 libxcb1 libxau6 libxdmcp6 libbsd0 \
    libmd0 libxext6 >/dev/null 2>&1)
for deb in "$work"/*.deb; do dpkg -x "$deb" "$work/deb"; done
for so in "$work"/deb/usr/lib/x86_64-linux-gnu/*.so.*.*; do
    cp "$so" "$b/lib/$(readelf -d "$so" | sed -n 's/.*SONAME.*\[\(.*\)\]/\1/p')"
done

# the tests read the assets and the CLI from the paths they were built with
printf 'src=%s\nbuild=%s\n' "$src" "$build" >"$b/paths"
cp "$src/tests/bench/device/device-run.sh" "$b/"
tar -C "$work" -cf - bundle | xz -6 -T0 >"$out"
echo "wrote $out ($(du -h "$out" | cut -f1)): $(ls "$b/tests" | wc -l) test executables, $(ls "$b/lib" | wc -l) libraries"
