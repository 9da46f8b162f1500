#!/bin/sh
# kiln GPU bundle: ./run.sh RESULTS_DIR
# On any Linux machine with an NVIDIA GPU and Python 3 with torch: installs the wheel (no deps;
# cuBLAS/cuDNN/NCCL come from torch's nvidia-* wheels), runs the Python and Rust GPU tests,
# compute-sanitizer memcheck/racecheck, the NCCL all-reduce and the benchmarks, and writes JSON
# results (summary.json last) into RESULTS_DIR. Every step runs even when another fails.
# KILN_PYTHON picks the interpreter (default: python3); KILN_BUNDLE_BUDGET_S the time budget.
set -u
if [ $# -ne 1 ]; then
    echo "usage: $0 RESULTS_DIR" >&2
    exit 2
fi
HERE=$(cd "$(dirname "$0")" && pwd)
PY=${KILN_PYTHON:-python3}
if ! command -v "$PY" >/dev/null 2>&1; then
    echo "error: $PY not found (set KILN_PYTHON)" >&2
    exit 2
fi
exec "$PY" "$HERE/run_all.py" "$1"
