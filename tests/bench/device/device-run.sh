#!/bin/bash
# On the machine with the GPU, from the unpacked bundle (bundle.sh) inside a copy of the repository:
#   tar xJf longvk-bundle.tar.xz && bash bundle/device-run.sh [REPO]     (REPO: that copy's root)
# Finds the Vulkan driver, lists the devices, runs `longvk bench chunks` and `bench attn`, then
# every test executable under the validation layer, then the benchmarks of issue 46 beside their
# PyTorch peer on the same GPU (tests/bench/device/torch_peer.py, with the python3 that has torch):
#   longvk bench gemm --shapes dit and 4096        torch.matmul bf16 and fp32 at the same shapes
#   longvk bench dit --preset sana-video-2b-480p   the reference DiT in bf16, same chunk and depth
#                                                  (longvk at f32 and at --precision f16)
#   longvk bench dit --preset sana-video-2b-720p   the same at 720p
#   longvk bench vae --preset 480p                 and at --precision f16 (the convs on the tensor cores)
#   longvk bench generate --no-encode --precision f16   the whole block loop (the FFmpeg here is a stub)
#   longvk bench sp --preset sana-video-2b-480p --depth 4 --vae   (issue 45: each rank alone; no peer)
# and prints longvk / PyTorch ratios (ratios.py). Logs in $OUT (or /tmp when unset): tests.log,
# bench.log (everything the benchmarks printed), bench.json (every figure, one object).
# ONLY=tests or ONLY=bench runs one half; BUDGET_S and TEST_LIMIT (below) bound its time; COOPMAT_TILES
# (below) times block shapes of the tensor-core kernel; DIT_RUNS timed chunks per DiT bench (default 2, after a
# warm-up chunk); SMOKE=1 runs every benchmark at a toy size (depth 1, one 4x4 frame, 8 text tokens, M = 16,
# the peer in fp32), to check this script and the pairing in a minute or two, on lavapipe too. Each benchmark has its own time limit, so one slow kernel cannot eat the lease;
# on an H100 the benchmarks are expected to take 3 to 6 minutes with today's fp32 kernels.
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "${1:-$here/..}" && pwd)
. "$here/paths"
out=${OUT:-/tmp}
log=$out/tests.log
export LD_LIBRARY_PATH=$here/lib VK_LAYER_PATH=$here/layers
icd=$(find / -xdev -path '*vulkan/icd.d/*' -name '*nvidia*.json' 2>/dev/null | head -1)
[ -n "$icd" ] && export VK_DRIVER_FILES=$icd
echo "driver manifest: ${icd:-none found, the loader searches its default places}"
# the tests were built with the source at $src and the CLI at $build/longvk
[ "$repo" = "$src" ] || { mkdir -p "$(dirname "$src")" && ln -sfn "$repo" "$src"; }
mkdir -p "$build/tests/tmp" && cp "$here/longvk" "$build/longvk"
cd "$here"
./longvk devices || exit 1
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv 2>/dev/null

# BUDGET_S: seconds the whole script may take (default 1800): each benchmark's limit is cut to
# what is left, and a benchmark with under 20 s left is skipped (said in the log), so the lease's
# limit never kills the script before ratios.py prints; TEST_LIMIT: seconds per test executable;
# TESTS: which test executables (names, default all).
deadline=$((SECONDS + ${BUDGET_S:-1800}))
left() { echo $((deadline - SECONDS)); }

run_tests() {
    for b in chunks attn; do echo "== bench $b"; timeout 60 ./longvk bench $b; done
    local t names=${TESTS:-}
    for t in ${names:-tests/*}; do
        t=tests/$(basename "$t")
        LONGVK_VALIDATE=1 timeout "${TEST_LIMIT:-120}" "$t" --jobs 1 >>"$log" 2>&1
        echo "$(basename "$t") rc=$? $(grep Synthesis "$log" | tail -1)"
    done
}

# one benchmark: NAME LIMIT COMMAND...; its JSON (the last line of stdout) into $json/NAME.json
bench() {
    local name=$1 limit=$2
    shift 2
    [ "$limit" -le "$(($(left) - 10))" ] || limit=$(($(left) - 10))
    if [ "$limit" -lt 20 ]; then echo "== $name: skipped (budget spent)" | tee -a "$out/bench.log"; return; fi
    echo "== $name: $*" | tee -a "$out/bench.log"
    local t0=$SECONDS
    timeout "$limit" "$@" >"$json/$name.json" 2>>"$out/bench.log"
    local rc=$?
    cat "$json/$name.json" >>"$out/bench.log"
    echo "   rc=$rc, $((SECONDS - t0)) s" | tee -a "$out/bench.log"
}

# the PyTorch peer: NAME LIMIT ARGS...; it writes its JSON itself, its lines go to the log
peer() {
    local name=$1 limit=$2
    shift 2
    [ "$limit" -le "$(($(left) - 10))" ] || limit=$(($(left) - 10))
    if [ "$limit" -lt 20 ]; then echo "== $name: skipped (budget spent)" | tee -a "$out/bench.log"; return; fi
    echo "== $name: torch_peer.py $*" | tee -a "$out/bench.log"
    local t0=$SECONDS
    # without the bundle's libraries: its FFmpeg is a stub, and a torch built against the
    # system's FFmpeg (Debian's python3-torch) fails to import with it
    timeout "$limit" env -u LD_LIBRARY_PATH -u VK_LAYER_PATH python3 "$repo/tests/bench/device/torch_peer.py" "$@" \
        --json "$json/$name.json" \
        >>"$out/bench.log" 2>&1
    echo "   rc=$?, $((SECONDS - t0)) s" | tee -a "$out/bench.log"
}

# COOPMAT_TILES="BMxBNxBKxWMxWN ...": the tensor-core kernel's block shapes (LONGVK_COOPMAT_TILE)
# timed on the DiT's widest product (M 15600, K 2240, N 13440, bf16 weights) at --precision f16,
# each in its own process, before the benchmarks (which use the default tile)
tile_sweep() {
    local t line
    for t in ${COOPMAT_TILES:-}; do
        [ "$(left)" -gt 30 ] || { echo "== tile $t: skipped (budget spent)" | tee -a "$out/bench.log"; continue; }
        line=$(LONGVK_PRECISION=f16 LONGVK_COOPMAT_TILE=$t timeout 30 ./longvk bench gemm \
            --shape 15600x13440x2240:bf16 --variant coopmat --no-c --runs 5 2>&1 | tail -1)
        echo "== tile $t: $line" | tee -a "$out/bench.log"
    done
}

run_bench() {
    tile_sweep
    json=$(mktemp -d)
    local runs=${DIT_RUNS:-2}
    export PYTHONPATH="$repo/tests/reference:$repo/assets/default-model" PYTHONUNBUFFERED=1
    if [ "${SMOKE:-0}" = 1 ]; then
        local small=(--depth 1 --frames 1 --latent 4x4 --text-tokens 8) gemm=(--tokens 16) vae=(--dim 8 --latent 2x2)
        local pdtype=(--dtype f32) pgemm=(--gemm dit --gemm-tokens 16 --gemm-runs 3)
    else
        local small=() gemm=() vae=(--preset 480p) pdtype=() pgemm=()
    fi
    # in order of what matters most: BUDGET_S cuts from the end
    bench gemm_dit 120 ./longvk bench gemm --shapes dit "${gemm[@]}" --json
    peer peer_480p 150 --preset sana-video-2b-480p "${small[@]}" "${pdtype[@]}" "${pgemm[@]}" --runs "$runs"
    # f16: the DiT's products on the tensor cores, 16-bit activations between kernels
    bench dit_480p_f16 200 ./longvk bench dit --preset sana-video-2b-480p "${small[@]}" --runs "$runs" \
        --precision f16 --json
    # f16: every convolution as f16 columns times the weights, on the tensor cores
    bench vae_480p_f16 120 ./longvk bench vae "${vae[@]}" --precision f16 --json
    # the whole block loop through lv_generate; --no-encode: the bundle's FFmpeg is a stub that traps
    # (bundle.sh), so the frames go to a sink that discards them (the encoder's time is not counted)
    bench generate_480p 180 ./longvk bench generate "${small[@]}" $([ "${SMOKE:-0}" = 1 ] && echo --vae-dim 8) \
        --no-encode --precision f16 --json
    bench dit_480p 200 ./longvk bench dit --preset sana-video-2b-480p "${small[@]}" --runs "$runs" --json
    bench vae_480p 120 ./longvk bench vae "${vae[@]}" --json
    [ "${SMOKE:-0}" = 1 ] || bench gemm_4096 60 ./longvk bench gemm --shapes 4096 --json
    # every rank of R = 2, 4, 8 alone: 15 chunks of 4 blocks (2 ranks in the smoke run's 2 rows),
    # and 15 + 1 VAE decodes of a latent frame (--vae: the whole block modelled)
    bench sp_480p 180 ./longvk bench sp --preset sana-video-2b-480p --depth 4 "${small[@]}" \
        $([ "${SMOKE:-0}" = 1 ] && echo --ranks 2 --vae-dim 8) --vae --json
    bench dit_720p 180 ./longvk bench dit --preset sana-video-2b-720p "${small[@]}" --runs "$runs" --json
    peer peer_720p 120 --preset sana-video-2b-720p "${small[@]}" "${pdtype[@]}" --runs "$runs" --gemm none
    python3 "$repo/tests/bench/device/ratios.py" "$json" --out "$out/bench.json" | tee -a "$out/bench.log"
    rm -rf "$json"
}

[ "${ONLY:-}" = bench ] || run_tests
[ "${ONLY:-}" = tests ] || run_bench
