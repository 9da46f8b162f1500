#!/usr/bin/env bash
# kiln-runtime's part of the GPU bundle: runs the Rust GPU test executables (plain, then under
# compute-sanitizer memcheck and racecheck) and kiln-gpu-bench on a Linux machine with an
# NVIDIA GPU. Needs no Rust; finds cuBLAS/cuDNN/NCCL in the nvidia-* wheels of the python3 on
# PATH (torch's), or on LD_LIBRARY_PATH.
#
# usage: run-rust-gpu.sh BIN_DIR OUT_DIR
#   BIN_DIR: gpu_ops, no_driver, stub_libcuda (test executables, hash suffix removed) and
#            kiln-gpu-bench — see crates/kiln-runtime/BUNDLE.md.
#   OUT_DIR: receives <step>.log for every step, rust_bench.json and rust_summary.json
#            ({"steps": {name: exit code}, ...}); exit code 0 only if every step passed.
set -u
if [ $# -ne 2 ]; then
    echo "usage: $0 BIN_DIR OUT_DIR" >&2
    exit 2
fi
BIN=$(cd "$1" && pwd) || exit 2
mkdir -p "$2" && OUT=$(cd "$2" && pwd) || exit 2

# Every site-packages/nvidia/*/lib of python3 (torch's nvidia-cublas, -cudnn, -nccl wheels).
NV_LIBS=$(python3 - <<'PY' 2>/dev/null
import glob, os, site, sys
roots = list(getattr(site, "getsitepackages", lambda: [])()) + [site.getusersitepackages()] + sys.path
seen, dirs = set(), []
for r in roots:
    for d in sorted(glob.glob(os.path.join(r, "nvidia", "*", "lib"))):
        d = os.path.realpath(d)
        if d not in seen:
            seen.add(d)
            dirs.append(d)
print(":".join(dirs))
PY
)
export LD_LIBRARY_PATH="${NV_LIBS}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# The site-packages holding those wheels (for the runtime_libraries test).
NV_SITE=$(printf '%s' "$NV_LIBS" | tr ':' '\n' | head -1 | sed 's#/nvidia/[^/]*/lib$##')
# NVLink SHARP/multicast stays off on the shared multi-GPU machines.
export NCCL_NVLS_ENABLE="${NCCL_NVLS_ENABLE:-0}"

SANITIZER=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer /usr/local/cuda/compute-sanitizer/compute-sanitizer 2>/dev/null | head -1)

declare -A RC
ORDER=()
step() { # step NAME TIMEOUT_S CMD...
    local name=$1 limit=$2
    shift 2
    echo "== $name: $*"
    local t0=$SECONDS
    timeout "$limit" "$@" >"$OUT/$name.log" 2>&1
    RC[$name]=$?
    ORDER+=("$name")
    echo "   $name: exit ${RC[$name]} in $((SECONDS - t0)) s (log: $OUT/$name.log)"
}

{
    echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>&1
    echo "compute-sanitizer: ${SANITIZER:-not found}"
} >"$OUT/environment.log"

# 1. Every op vs the CPU reference, full shapes (prints per-op case counts).
step gpu_ops 300 "$BIN/gpu_ops" --test-threads=1 --nocapture
# 1b. The Rust kernels (kernels/rust) vs a float64 reference and vs their C++ twins.
step gpu_rust_kernels 300 "$BIN/gpu_rust_kernels" --test-threads=1 --nocapture
# Streams and CUDA graphs: capture + replay vs eager, cross-stream ordering, capture refusal.
step gpu_streams 120 "$BIN/gpu_streams" --test-threads=1 --nocapture
# 2. No-driver path (skips with a reason where a driver exists) and the stub-libcuda check.
step no_driver 120 "$BIN/no_driver" --test-threads=1
step stub_libcuda 120 "$BIN/stub_libcuda" --test-threads=1
step runtime_libraries 120 env KILN_TEST_NVIDIA_SITE="$NV_SITE" "$BIN/runtime_libraries" --test-threads=1
# 3. compute-sanitizer on small shapes (≤ 65536 elements), on kiln's own kernels: the tests of
#    cuBLAS, cuDNN and NCCL are left out (their kernels are not ours, cuDNN's instrumentation
#    alone can eat the time budget, and NCCL's proxy threads and IPC are outside what memcheck
#    models). racecheck checks shared-memory hazards, so it runs the tests of the kernels that
#    use shared memory (rmsnorm, softmax, rope).
if [ -n "$SANITIZER" ]; then
    step memcheck 420 env KILN_GPU_TEST_SIZES=small "$SANITIZER" --tool memcheck --error-exitcode 1 \
        "$BIN/gpu_ops" --test-threads=1 --skip nccl --skip matmul --skip cudnn
    step racecheck 420 env KILN_GPU_TEST_SIZES=small "$SANITIZER" --tool racecheck --error-exitcode 1 \
        "$BIN/gpu_ops" --test-threads=1 --skip nccl --skip matmul --skip cudnn --skip elementwise --skip embedding --skip bad_inputs
    step memcheck_rust_kernels 420 env KILN_GPU_TEST_SIZES=small "$SANITIZER" --tool memcheck --error-exitcode 1 \
        "$BIN/gpu_rust_kernels" --test-threads=1
    # rs.rmsnorm is the Rust kernel with shared memory and barriers.
    step racecheck_rust_kernels 420 env KILN_GPU_TEST_SIZES=small "$SANITIZER" --tool racecheck --error-exitcode 1 \
        "$BIN/gpu_rust_kernels" --test-threads=1 rmsnorm
else
    echo "compute-sanitizer not found: memcheck/racecheck not run" | tee "$OUT/sanitizer.log"
    RC[sanitizer_missing]=1
    ORDER+=(sanitizer_missing)
fi
# 4. Bandwidth vs a device-to-device copy, same run.
step bench 300 "$BIN/kiln-gpu-bench" --out "$OUT/rust_bench.json"
step percall 60 "$BIN/kiln-gpu-bench" --percall --out "$OUT/rust_percall.json"

status=0
{
    echo '{"steps": {'
    sep=""
    for n in "${ORDER[@]}"; do
        printf '%s  "%s": %s' "$sep" "$n" "${RC[$n]}"
        sep=$',\n'
        [ "${RC[$n]}" -eq 0 ] || status=1
    done
    printf '\n}, "all_passed": %s}\n' "$([ $status -eq 0 ] && echo true || echo false)"
} >"$OUT/rust_summary.json"
cat "$OUT/rust_summary.json"
exit $status
