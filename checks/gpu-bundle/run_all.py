#!/usr/bin/env python3
"""Runs everything in kiln's GPU bundle and writes JSON results (run.sh calls this).

    ./run.sh RESULTS_DIR        (or: python3 run_all.py RESULTS_DIR)

Needs: Linux, Python 3.8+, an NVIDIA GPU + driver (libcuda.so.1 on the loader path), torch with
CUDA for the Python tests and benchmarks (its nvidia-* wheels provide cuBLAS/cuDNN/NCCL);
compute-sanitizer, pytest and cupy are used when present. No network, no Rust.

Steps (each one runs whatever happened to the others, is recorded in RESULTS_DIR/steps.json
with its status passed / failed / skipped (with the reason), and logs to RESULTS_DIR/logs/):
  environment      GPUs, driver, torch, tools
  install          pip install --no-deps --target <tmp> the wheel
  venv             issue 18: a venv with --system-site-packages (torch and its nvidia-* wheels
                   visible), `pip install --no-index WHEEL` with its Requires-Dist (no --no-deps):
                   every declared range must be met by what torch brought; the Python tests
                   below then run in that venv
  import           import kiln, build_info(), runtime_libraries(), device_info()
  python-tests     test_kiln_gpu.py: every op vs float64 reference and torch, DLPack contract,
                   streams and CUDA graphs (check_streams.py), NCCL all-reduce over all GPUs
  torch-native     test_torch_native.py: ops as torch custom ops (torch tensors out), under
                   torch.compile(fullgraph=True) and CUDA graph capture, equal to eager; out=,
                   streams, backward formulas, opcheck, error classes, lazy library loading
  torch-bench      bench_torch.py: bandwidth as a fraction of D2D copy, time vs torch, and the
                   decode-size section (bench_decode.py: per-call cost, eager and in CUDA graphs)
  doctor, audit    bin/kiln doctor --json, bin/kiln audit WHEEL --json (when bin/kiln exists)
  rust:*           kiln-runtime's runner (bin/run-rust-gpu.sh, crates/kiln-runtime/BUNDLE.md):
                   its GPU tests vs the CPU reference, compute-sanitizer memcheck and racecheck
                   (reduced sizes), kiln-gpu-bench; results under RESULTS_DIR/rust/
  nccl             the NCCL all-reduce results of the above, summarized (all visible GPUs)
  kernel-library   test_kernel_library.py: checks/kernel-library as kiln-build built it (one module
                   per source, one linked module, each module's PTX through the JIT) run through
                   the driver API against references; gated kernels absent exactly where declared
Then RESULTS_DIR/summary.json. Total time is kept under KILN_BUNDLE_BUDGET_S (default 480 s):
a step that would start after the budget is spent is skipped, saying so. KILN_BUNDLE_ONLY
(comma-separated step names, e.g. "environment,install,venv,python-tests") runs only those.
"""

from __future__ import annotations

import ctypes
import json
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
BUDGET_S = float(os.environ.get("KILN_BUNDLE_BUDGET_S", "480"))
T0 = time.time()


def left() -> float:
    return BUDGET_S - (time.time() - T0)


class Runner:
    def __init__(self, results: Path):
        self.results = results
        self.logs = results / "logs"
        self.logs.mkdir(parents=True, exist_ok=True)
        self.steps: list[dict] = []
        self.bundle = json.loads((HERE / "bundle.json").read_text()) if (HERE / "bundle.json").exists() else {}
        self.site: str | None = None
        # The venv's interpreter once the `venv` step installed the wheel into it.
        self.python: str = sys.executable
        self.gpu_count = 0
        self.gpu_reason = ""

    def record(self, name: str, status: str, **fields) -> dict:
        step = {"step": name, "status": status, **fields}
        self.steps.append(step)
        detail = fields.get("reason") or fields.get("summary") or ""
        print(f"[{time.time() - T0:6.1f} s] {name:<13} {status.upper():<8} {detail}", flush=True)
        (self.results / "steps.json").write_text(json.dumps(self.steps, indent=1, default=str))
        return step

    def run(self, name: str, cmd: list[str], timeout: float, env: dict | None = None, log: str | None = None):
        """(returncode or None on timeout, output text, seconds); output also goes to logs/."""
        timeout = max(5.0, min(timeout, left()))
        t = time.time()
        log_path = self.logs / (log or f"{name}.log")
        full_env = dict(os.environ)
        full_env.update(env or {})
        with open(log_path, "w") as f:
            f.write(f"$ {' '.join(map(str, cmd))}\n")
            f.flush()
            try:
                # Own process group: a timeout ends the whole tree (a runner script's children too).
                p = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, env=full_env, cwd=str(HERE),
                                     start_new_session=True)
            except OSError as e:
                f.write(f"\n[run_all] cannot start: {e}\n")
                return 127, log_path.read_text(errors="replace"), time.time() - t
            try:
                rc = p.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                rc = None
                for sig in (signal.SIGTERM, signal.SIGKILL):
                    try:
                        os.killpg(p.pid, sig)
                    except ProcessLookupError:
                        break
                    try:
                        p.wait(timeout=10)
                        break
                    except subprocess.TimeoutExpired:
                        continue
                f.write(f"\n[run_all] TIMEOUT after {timeout:.0f} s: process group ended\n")
        return rc, log_path.read_text(errors="replace"), time.time() - t

    def py_env(self) -> dict:
        # NVLink SHARP/multicast stays off on the shared multi-GPU machines (NCCL all-reduce).
        env = {"NCCL_NVLS_ENABLE": os.environ.get("NCCL_NVLS_ENABLE", "0")}
        if self.site and self.python == sys.executable:
            env["PYTHONPATH"] = self.site + (os.pathsep + os.environ["PYTHONPATH"] if os.environ.get("PYTHONPATH") else "")
        return env


def cuda_device_count() -> tuple[int, str]:
    """Through the driver API directly (ctypes), so it works without torch."""
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError as e:
        return 0, f"no NVIDIA driver: libcuda.so.1 cannot be loaded ({e})"
    rc = cuda.cuInit(0)
    if rc != 0:
        return 0, f"cuInit failed with CUresult {rc} (no usable GPU)"
    n = ctypes.c_int(0)
    rc = cuda.cuDeviceGetCount(ctypes.byref(n))
    if rc != 0 or n.value == 0:
        return 0, f"no CUDA device visible (cuDeviceGetCount -> {rc}, {n.value})"
    return n.value, ""


def step_environment(r: Runner):
    env = {"python": sys.version.split()[0], "platform": platform.platform(), "bundle": r.bundle}
    r.gpu_count, r.gpu_reason = cuda_device_count()
    env["cuda_devices"] = r.gpu_count
    if r.gpu_reason:
        env["no_gpu_reason"] = r.gpu_reason
    smi = shutil.which("nvidia-smi")
    if smi:
        q = subprocess.run([smi, "--query-gpu=index,name,driver_version,memory.total,clocks.max.sm",
                            "--format=csv,noheader"], capture_output=True, text=True)
        env["nvidia_smi"] = q.stdout.strip().splitlines() if q.returncode == 0 else q.stderr.strip()
    t = subprocess.run([sys.executable, "-c", "import torch, json; print(json.dumps({'torch': torch.__version__, "
                        "'cuda': torch.version.cuda, 'available': torch.cuda.is_available(), "
                        "'devices': torch.cuda.device_count()}))"], capture_output=True, text=True)
    env["torch"] = json.loads(t.stdout) if t.returncode == 0 else f"not importable: {t.stderr.strip()[-300:]}"
    env["tools"] = {k: shutil.which(k) for k in ("compute-sanitizer", "nvidia-smi", "ncu", "cuobjdump", "pytest")}
    env["tools"]["compute-sanitizer"] = sanitizer_path()
    env["nvidia_lib_dirs"] = nvidia_lib_dirs()
    (r.results / "environment.json").write_text(json.dumps(env, indent=1, default=str))
    r.record("environment", "passed", summary=f"{r.gpu_count} CUDA device(s)" + (f"; {r.gpu_reason}" if r.gpu_reason else ""))


def nvidia_lib_dirs():
    """site-packages/nvidia/*/lib of this Python (torch's nvidia-cublas, -cudnn, -nccl wheels)."""
    import glob
    import site

    roots = list(getattr(site, "getsitepackages", lambda: [])()) + [site.getusersitepackages()] + sys.path
    seen = []
    for root in roots:
        for d in sorted(glob.glob(os.path.join(root, "nvidia", "*", "lib"))):
            d = os.path.realpath(d)
            if d not in seen:
                seen.append(d)
    return seen


def sanitizer_path():
    found = shutil.which("compute-sanitizer")
    if found:
        return found
    for p in ["/usr/local/cuda/bin/compute-sanitizer", "/usr/local/cuda/compute-sanitizer/compute-sanitizer"]:
        if os.path.exists(p):
            return p
    return None


def step_install(r: Runner):
    wheel = r.bundle.get("wheel")
    wheels = [HERE / wheel] if wheel else sorted(HERE.glob("kiln_cuda-*.whl"))
    if not wheels or not wheels[0].exists():
        return r.record("install", "failed", reason="no kiln wheel in the bundle")
    site = tempfile.mkdtemp(prefix="kiln-site-")
    rc, out, secs = r.run("install", [sys.executable, "-m", "pip", "install", "--no-deps", "--no-input",
                                      "--disable-pip-version-check", "--target", site, str(wheels[0])], 120)
    if rc == 0:
        r.site = site
        r.record("install", "passed", summary=f"{wheels[0].name} -> {site}", seconds=round(secs, 1))
        return
    # No usable pip: a wheel is a zip laid out as site-packages; unpacking it is an install
    # without the scripts/metadata bookkeeping pip adds, enough to import it.
    try:
        import zipfile

        with zipfile.ZipFile(wheels[0]) as z:
            z.extractall(site)
        r.site = site
        r.record("install", "passed", summary=f"pip exited {rc}; unpacked {wheels[0].name} -> {site} instead",
                 log="logs/install.log")
    except Exception as e:
        r.record("install", "failed", reason=f"pip exited {rc}; unpacking failed too: {e}", log="logs/install.log")


def step_venv(r: Runner):
    wheel = r.bundle.get("wheel")
    wheels = [HERE / wheel] if wheel else sorted(HERE.glob("kiln_cuda-*.whl"))
    if not wheels or not wheels[0].exists():
        return r.record("venv", "failed", reason="no kiln wheel in the bundle")
    venv = Path(tempfile.mkdtemp(prefix="kiln-venv-"))
    rc, _, _ = r.run("venv", [sys.executable, "-m", "venv", "--system-site-packages", str(venv)], 60)
    py = venv / "bin" / "python"
    if rc != 0 or not py.exists():
        return r.record("venv", "failed", reason=f"python -m venv exited {rc}", log="logs/venv.log")
    if sys.prefix != sys.base_prefix:
        # This interpreter is itself a venv (torch installed there, as on the H200 machine):
        # --system-site-packages would show only the base interpreter's packages, so the new
        # venv also sees this one's site-packages through a .pth file.
        import site

        inner = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True).stdout.strip()
        Path(inner, "_kiln_parent_env.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    # No --no-deps: pip must find every Requires-Dist already installed (torch's nvidia-*
    # wheels); --no-index means nothing can be downloaded to make up for a range they miss.
    rc, out, secs = r.run("venv-install", [str(py), "-m", "pip", "install", "--no-index", "--no-input",
                                           "--disable-pip-version-check", str(wheels[0])], 120)
    if rc != 0:
        return r.record("venv", "failed", reason=f"pip install --no-index exited {rc}: {out.strip()[-600:]}",
                        log="logs/venv-install.log")
    rc, out, _ = r.run("venv-check", [str(py), "-m", "pip", "show", "nvidia-cublas", "nvidia-cudnn-cu13",
                                      "nvidia-nccl-cu13", "torch"], 60)
    have = dict(re.findall(r"^Name: (\S+)\nVersion: (\S+)", out, re.M))
    r.python = str(py)
    r.site = r.site or str(venv)
    r.record("venv", "passed", seconds=round(secs, 1),
             summary=f"{wheels[0].name} installed with its Requires-Dist met by: "
                     + ", ".join(f"{k} {v}" for k, v in sorted(have.items())))


PROBE = r"""
import json, kiln
out = {"version": kiln.__version__, "build_info": kiln.build_info(), "runtime_libraries": kiln.runtime_libraries()}
try:
    out["device_count"] = kiln.device_count()
    out["devices"] = [kiln.device_info(i) for i in range(out["device_count"])]
except Exception as e:
    out["device_error"] = {"type": type(e).__name__, "message": str(e)}
print("KILN_PROBE " + json.dumps(out, default=str))
"""


def step_kernel_library(r: Runner):
    """checks/kernel-library's modules (per source, one module, PTX JIT) run through the driver."""
    lib = HERE / "kernel-library"
    if not lib.is_dir():
        return r.record("kernel-library", "skipped", reason="kernel-library/ is not in this bundle")
    if not r.gpu_count:
        return r.record("kernel-library", "skipped", reason=r.gpu_reason)
    out = "kernel_library.json"
    rc, _, secs = r.run("kernel-library", [sys.executable, str(HERE / "test_kernel_library.py"), str(lib),
                                            "--out", str(r.results / out)], 120)
    doc = {}
    try:
        doc = json.loads((r.results / out).read_text())
    except Exception:
        pass
    summary = f"{doc.get('cases', 0)} cases, {doc.get('failed', '?')} failed on {doc.get('gpu_capability', '?')}"
    status = "passed" if rc == 0 else ("skipped" if rc == 2 else "failed")
    r.record("kernel-library", status, summary=summary, seconds=round(secs, 1), result=out,
             log="logs/kernel-library.log")


def step_import(r: Runner):
    if not r.site:
        return r.record("import", "skipped", reason="the wheel is not installed")
    rc, out, _ = r.run("import", [r.python, "-c", PROBE], 60, env=r.py_env())
    line = next((l for l in out.splitlines() if l.startswith("KILN_PROBE ")), None)
    if rc != 0 or not line:
        return r.record("import", "failed", reason=f"python exited {rc}", log="logs/import.log")
    probe = json.loads(line[len("KILN_PROBE "):])
    (r.results / "kiln_import.json").write_text(json.dumps(probe, indent=1))
    targets = [t["target"] for t in probe["build_info"]["targets"]]
    if r.gpu_count and "device_error" in probe:
        return r.record("import", "failed", reason=f"GPU present but kiln says {probe['device_error']}")
    if not r.gpu_count:
        # Without a GPU kiln.device_count() is 0, as torch.cuda.device_count() is.
        ok = probe.get("device_count") == 0 and "device_error" not in probe
        return r.record("import", "passed" if ok else "failed",
                        summary=f"targets {targets}; without a GPU: device_count() = {probe.get('device_count')}"
                                f"{' ' + str(probe['device_error']) if 'device_error' in probe else ''}")
    r.record("import", "passed", summary=f"targets {targets}; devices {[d['name'] for d in probe['devices']]}")


def python_script_step(r: Runner, name: str, script: str, extra: list[str], timeout: float, out_json: str):
    if not r.site:
        return r.record(name, "skipped", reason="the wheel is not installed")
    if not r.gpu_count:
        return r.record(name, "skipped", reason=r.gpu_reason)
    rc, out, secs = r.run(name, [r.python, str(HERE / script), "--out", str(r.results / out_json)] + extra,
                          timeout, env=r.py_env())
    doc = {}
    try:
        doc = json.loads((r.results / out_json).read_text())
    except Exception:
        pass
    if rc is None:
        return r.record(name, "failed", reason=f"timeout after {timeout:.0f} s", log=f"logs/{name}.log")
    if rc == 2:
        return r.record(name, "skipped", reason=doc.get("reason", "could not run"), log=f"logs/{name}.log")
    summary = ""
    if "cases" in doc:
        summary = f"{doc['cases']} cases, {doc['failed']} failed"
    if "large_summary" in doc:
        s = doc["large_summary"]
        summary = (f"large size: {s['meet_bandwidth_target']}/{s['cases']} reach >= 0.85 of D2D copy, "
                   f"{s['meet_torch_target']}/{s['cases']} at most torch's time; {s['errors']} errors")
    r.record(name, "passed" if rc == 0 else "failed", summary=summary, seconds=round(secs, 1), result=out_json,
             log=f"logs/{name}.log")


def step_rust(r: Runner):
    """kiln-runtime's runner (bin/run-rust-gpu.sh, see crates/kiln-runtime/BUNDLE.md): its GPU
    tests vs the CPU reference, compute-sanitizer memcheck and racecheck, kiln-gpu-bench.
    Each of its steps becomes one step here: rust:<name>."""
    runner = HERE / r.bundle.get("rust_runner", "bin/run-rust-gpu.sh")
    if not runner.exists():
        return r.record("rust", "failed", reason=f"{runner.name} is missing from the bundle")
    out = r.results / "rust"
    # Leave a little budget for the summary; the runner's own per-step limits are larger.
    rc, text, secs = r.run("rust", ["bash", str(runner), str(HERE / "bin"), str(out)], max(30.0, left() - 15))
    steps = {}
    try:
        steps = json.loads((out / "rust_summary.json").read_text())["steps"]
    except Exception:
        # Killed before it wrote its summary: take what its progress lines say.
        for m in re.finditer(r"^\s+(\S+): exit (\d+) in (\d+) s", text, re.M):
            steps[m.group(1)] = int(m.group(2))
    for name, code in steps.items():
        log = out / f"{name}.log"
        body = log.read_text(errors="replace") if log.exists() else ""
        counts = libtest_counts(body)
        detail = {
            "exit": code, "log": f"rust/{name}.log",
            **({k: v for k, v in counts.items()} if any(counts.values()) else {}),
        }
        m = re.search(r"ERROR SUMMARY: (\d+) error", body)
        if m:
            detail["sanitizer_errors"] = int(m.group(1))
        hz = re.search(r"RACECHECK SUMMARY: (\d+) hazard", body)
        if hz:
            detail["racecheck_hazards"] = int(hz.group(1))
        skips = [l.strip() for l in body.splitlines() if "skip" in l.lower()][:3]
        if skips:
            detail["skip_lines"] = skips
        status = "passed" if code == 0 else "failed"
        no_driver = next((l.strip() for l in body.splitlines() if "no NVIDIA driver" in l), None)
        if code != 0 and not r.gpu_count and no_driver:
            status, detail["reason"] = "skipped", no_driver[:300]
        if code != 0 and name == "runtime_libraries" and not nvidia_lib_dirs():
            status, detail["reason"] = "skipped", "this Python has no site-packages/nvidia/*/lib (torch's nvidia wheels) to test"
        if name == "sanitizer_missing":
            status, detail["reason"] = "skipped", "compute-sanitizer not found"
        elif code == 124:
            detail["reason"] = "timeout (the runner's own limit)"
        summary = ", ".join(f"{k} {v}" for k, v in detail.items() if k in ("passed", "failed", "ignored", "sanitizer_errors", "racecheck_hazards"))
        r.record(f"rust:{name}", status, summary=summary, **detail)
    if (out / "rust_bench.json").exists():
        r.record("rust:bench-json", "passed", summary="rust/rust_bench.json", result="rust/rust_bench.json")
    if rc is None:
        r.record("rust", "failed", reason=f"the runner did not finish within the budget ({secs:.0f} s); "
                                         f"steps finished: {list(steps)}", log="logs/rust.log")
    elif not steps:
        r.record("rust", "failed", reason=f"the runner exited {rc} without results", log="logs/rust.log")


def libtest_counts(out: str):
    counts = {"passed": 0, "failed": 0, "ignored": 0}
    for m in re.finditer(r"test result: \w+\. (\d+) passed; (\d+) failed; (\d+) ignored", out):
        counts["passed"] += int(m.group(1))
        counts["failed"] += int(m.group(2))
        counts["ignored"] += int(m.group(3))
    return counts


def step_kiln(r: Runner, name: str, args: list[str]):
    kiln = HERE / "bin" / "kiln"
    if not kiln.exists():
        return r.record(name, "skipped", reason="the bundle has no kiln binary")
    rc, out, secs = r.run(name, [str(kiln)] + args, 120)
    text = out.split("\n", 1)[1] if "\n" in out else ""
    try:
        doc = json.loads(text[text.index("{"):text.rindex("}") + 1])
        (r.results / f"{name}.json").write_text(json.dumps(doc, indent=1))
    except ValueError:
        doc = None
    if rc is None:
        return r.record(name, "failed", reason="timeout", log=f"logs/{name}.log")
    if rc == 2 and "unrecognized subcommand" in out:
        return r.record(name, "skipped", reason=f"kiln has no `{args[0]}` subcommand", log=f"logs/{name}.log")
    status = "passed" if rc == 0 else "failed"
    if doc and isinstance(doc.get("checks"), list):
        failing = [c.get("id") for c in doc["checks"] if c.get("status") == "fail"]
        if failing:
            summary_extra = f"; failing checks: {failing}"
            # Without a GPU the driver/GPU checks must fail: that is the finding, not a fault.
            if not r.gpu_count and rc == 1:
                status = "findings"
        else:
            summary_extra = ""
    else:
        summary_extra = ""
    r.record(name, status, summary=f"exit {rc}" + ("" if doc else " (no JSON)") + summary_extra,
             log=f"logs/{name}.log", result=f"{name}.json" if doc else None)


def step_nccl(r: Runner):
    """The NCCL all-reduce results, pulled out of the Python and Rust test results."""
    found = {}
    try:
        doc = json.loads((r.results / "python_gpu_tests.json").read_text())
        cases = [c for c in doc.get("all_cases", []) if str(c.get("op", "")).startswith("all_reduce")]
        if cases:
            found["python"] = {"gpus": r.gpu_count, "cases": len(cases), "failed": sum(not c["ok"] for c in cases),
                               "op": cases[0]["op"]}
    except Exception:
        pass
    log = r.results / "rust" / "gpu_ops.log"
    if log.exists():
        lines = [l.strip() for l in log.read_text(errors="replace").splitlines() if "nccl" in l.lower()]
        if lines:
            found["rust"] = {"lines": lines[:10], "passed": not any("FAILED" in l or "panicked" in l for l in lines)}
    if not r.gpu_count:
        return r.record("nccl", "skipped", reason=r.gpu_reason)
    if not found:
        return r.record("nccl", "failed", reason="no all-reduce results (see python-tests)")
    ok = found.get("python", {}).get("failed", 0) == 0 and found.get("rust", {}).get("passed", True)
    r.record("nccl", "passed" if ok else "failed",
             summary=f"all_reduce_sum over {r.gpu_count} GPU(s): " + json.dumps(found), result="python_gpu_tests.json")


def main() -> int:
    if len(sys.argv) != 2 or sys.argv[1] in ("-h", "--help"):
        print(__doc__)
        return 2
    results = Path(sys.argv[1]).resolve()
    results.mkdir(parents=True, exist_ok=True)
    r = Runner(results)
    print(f"kiln GPU bundle: results -> {results} (budget {BUDGET_S:.0f} s)", flush=True)
    steps = [
        ("environment", lambda: step_environment(r)),
        ("install", lambda: step_install(r)),
        ("venv", lambda: step_venv(r)),
        ("import", lambda: step_import(r)),
        ("python-tests", lambda: python_script_step(r, "python-tests", "test_kiln_gpu.py", [], 150, "python_gpu_tests.json")),
        ("torch-native", lambda: python_script_step(r, "torch-native", "test_torch_native.py", [], 240, "torch_native.json")),
        ("torch-bench", lambda: python_script_step(r, "torch-bench", "bench_torch.py",
                                                   ["--table", str(results / "bench_table.md")], 120, "bench_torch.json")),
        ("doctor", lambda: step_kiln(r, "doctor", ["doctor", "--json", "--runtime-only",
                                                   "--pins", str(HERE / "policy" / "Cargo.toml")])),
        ("audit", lambda: step_kiln(r, "audit", ["audit", str(HERE / r.bundle.get("wheel", "missing.whl")),
                                                 "--policy", str(HERE / "policy" / "Cargo.toml"), "--json"])),
        ("rust", lambda: step_rust(r)),
        ("nccl", lambda: step_nccl(r)),
        ("kernel-library", lambda: step_kernel_library(r)),
    ]
    only = [s for s in os.environ.get("KILN_BUNDLE_ONLY", "").split(",") if s]
    unknown = [s for s in only if s not in dict(steps)]
    if unknown:
        print(f"error: KILN_BUNDLE_ONLY names unknown steps {unknown} (steps: {', '.join(n for n, _ in steps)})",
              file=sys.stderr)
        return 2
    for name, fn in steps:
        if only and name not in only:
            r.record(name, "skipped", reason="not in KILN_BUNDLE_ONLY")
            continue
        if left() <= 0:
            r.record(name, "skipped", reason=f"time budget of {BUDGET_S:.0f} s spent")
            continue
        try:
            fn()
        except Exception as e:  # a broken step never stops the others
            import traceback

            r.record(name, "error", reason=f"{type(e).__name__}: {e}", traceback=traceback.format_exc()[-1500:])
    counts = {}
    for s in r.steps:
        counts[s["status"]] = counts.get(s["status"], 0) + 1
    summary = {
        "seconds": round(time.time() - T0, 1),
        "gpus": r.gpu_count,
        "no_gpu_reason": r.gpu_reason or None,
        "counts": counts,
        "ok": not any(s["status"] in ("failed", "error") for s in r.steps),
        "steps": [{k: v for k, v in s.items() if k != "traceback"} for s in r.steps],
        "bundle": {k: r.bundle.get(k) for k in ("kiln_version", "commit", "dirty", "wheel")},
    }
    (results / "summary.json").write_text(json.dumps(summary, indent=1, default=str))
    if (results / "bench_table.md").exists():
        print((results / "bench_table.md").read_text())
    print(f"summary: {counts} in {summary['seconds']} s -> {results / 'summary.json'}")
    if r.site:
        shutil.rmtree(r.site, ignore_errors=True)
    return 0 if summary["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
