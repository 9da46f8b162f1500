#!/usr/bin/env python3
"""The kiln wheel on a machine without an NVIDIA GPU or driver (CI, the build machines).

    python3 checks/wheel/check_no_gpu.py WHEEL [--pins Cargo.toml] [--offline]

In a fresh venv: `pip install --no-deps WHEEL` works (the NVIDIA runtime wheels are large and
useless without a GPU, so they are not installed), while `pip install --dry-run WHEEL` proves
that the full install, Requires-Dist included, resolves on PyPI at the pinned versions
(--offline skips that one check). Then `import kiln` works, `kiln.build_info()` lists every
target of the arch matrix its build manifest records (SASS per target, PTX where the matrix
says +PTX; `kiln audit` checks that matrix against Cargo.toml) with the same kernels in each, and GPU calls raise kiln.NoDriverError with the clear
"no NVIDIA driver found: libcuda.so.1" message, also with a stub libcuda.so (built here with
gcc) on LD_LIBRARY_PATH, while device_count() is 0 and is_available() False. The extension's
ELF NEEDs no CUDA library. The package's pytest suite (crates/kiln-py/tests) runs in the venv,
and mypy checks the typed stubs against crates/kiln-py/tests/typing.

Exit status 0 when every check passes, 1 otherwise; each check prints one line.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import textwrap
import zipfile
from pathlib import Path

try:
    import tomllib  # Python 3.11+
except ModuleNotFoundError:  # pragma: no cover
    tomllib = None

FAILED: list[str] = []


def check(name: str, ok: bool, detail: str = "") -> bool:
    print(f"  {'ok  ' if ok else 'FAIL'} {name}" + (f": {detail}" if detail else ""), flush=True)
    if not ok:
        FAILED.append(name)
    return ok


def run(cmd, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def load_kiln_table(pins: Path) -> dict:
    if tomllib is None:
        raise RuntimeError("Python 3.11+ (tomllib) is needed to read the pins")
    return tomllib.loads(pins.read_text())["workspace"]["metadata"]["kiln"]


PROBE = textwrap.dedent(
    r"""
    import json, sys
    result = {}
    import kiln
    result["version"] = kiln.__version__
    info = kiln.build_info()
    result["build_info"] = info
    result["runtime_libraries"] = kiln.runtime_libraries()
    errors = {}
    import numpy as np
    x = np.arange(37, dtype=np.float32)
    calls = {
        "vecadd(numpy)": lambda: kiln.vecadd(x, x),
        "rmsnorm(numpy)": lambda: kiln.rmsnorm(x.reshape(1, 37), x),
        "matmul(numpy)": lambda: kiln.matmul(x.reshape(1, 37), x.reshape(37, 1)),
        "device_info()": kiln.device_info,
    }
    result["device_count"] = kiln.device_count()
    result["is_available"] = kiln.is_available()
    for name, f in calls.items():
        try:
            f()
            errors[name] = None
        except BaseException as e:
            errors[name] = {"type": type(e).__name__, "message": str(e),
                            "is_no_driver": isinstance(e, kiln.NoDriverError),
                            "is_kiln_error": isinstance(e, kiln.KilnError)}
    try:
        kiln.vecadd(object(), object())
        errors["vecadd(object)"] = None
    except TypeError as e:
        errors["vecadd(object)"] = {"type": type(e).__name__, "message": str(e),
                                    "is_kiln_error": isinstance(e, kiln.KilnError)}
    result["errors"] = errors
    print(json.dumps(result))
    """
)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("wheel", type=Path)
    ap.add_argument("--pins", type=Path, default=Path(__file__).resolve().parents[2] / "Cargo.toml")
    ap.add_argument("--offline", action="store_true", help="skip the PyPI resolution of Requires-Dist")
    args = ap.parse_args()
    wheel = args.wheel.resolve()
    if not wheel.is_file():
        print(f"error: {wheel} is not a file", file=sys.stderr)
        return 2

    print(f"kiln wheel without a GPU: {wheel.name}")
    with zipfile.ZipFile(wheel) as z:
        meta_name = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        metadata = z.read(meta_name).decode()
        so_names = [n for n in z.namelist() if n.endswith(".so")]
        so_bytes = {n: z.read(n) for n in so_names}
        names = z.namelist()
        sboms = {n: json.loads(z.read(n)) for n in names if re.search(r"\.dist-info/sboms/[^/]+\.cyclonedx\.json$", n)}
    bytecode = [n for n in names if "__pycache__/" in n or n.endswith((".pyc", ".pyo"))]
    check("no bytecode (__pycache__/, *.pyc) in the wheel", not bytecode, ", ".join(bytecode) or "none")
    requires = [l.split(":", 1)[1].strip() for l in metadata.splitlines() if l.startswith("Requires-Dist:")]
    check("wheel name is cp39-abi3-manylinux x86_64", bool(re.search(r"-cp39-abi3-manylinux_\d+_\d+_x86_64\.whl$", wheel.name)), wheel.name)
    # Requires-Dist is each runtime pin's declared range (`requires`), never an exact `==`: the
    # wheel must install beside torch & co.; the exact pins (`version`) are what the SBOM lists.
    runtime = load_kiln_table(args.pins).get("runtime", {})
    declared = {lib["wheel"].lower(): lib for lib in runtime.values()}
    req_names = {re.match(r"[A-Za-z0-9._-]+", r).group(0).lower(): r for r in requires}
    check("Requires-Dist declares the NVIDIA runtime wheels as the pinned ranges",
          bool(requires) and all(n in declared and r == n + declared[n]["requires"] for n, r in req_names.items()),
          ", ".join(requires))
    # The CycloneDX SBOM: the Rust crates (maturin) and every Requires-Dist wheel (xtask).
    purls = {c.get("purl", "") for doc in sboms.values() for c in doc.get("components", [])}
    wanted = [f"pkg:pypi/{declared[n]['wheel']}@{declared[n]['version']}" for n in req_names if n in declared]
    check("CycloneDX SBOM lists the Rust crates (pyo3)", any(p.startswith("pkg:cargo/pyo3@") for p in purls), ", ".join(sboms) or "no SBOM")
    missing = [w for w in wanted if w not in purls]
    check("CycloneDX SBOM lists every Requires-Dist wheel", bool(sboms) and not missing, "missing " + ", ".join(missing) if missing else ", ".join(wanted))

    with tempfile.TemporaryDirectory(prefix="kiln-wheel-check-") as tmp:
        tmp = Path(tmp)
        # The extension NEEDs no CUDA library: the driver and libraries are opened at run time.
        for name, data in so_bytes.items():
            p = tmp / Path(name).name
            p.write_bytes(data)
            r = run(["readelf", "-d", str(p)])
            needed = re.findall(r"\(NEEDED\).*\[(.+?)\]", r.stdout)
            cuda = [n for n in needed if re.match(r"lib(cuda|cudart|cublas|cudnn|nccl|nvrtc|python)", n)]
            check(f"{name} NEEDs no CUDA/Python library", r.returncode == 0 and not cuda, f"NEEDED {needed}")

        # A fresh venv means nothing from outside it: PYTHONPATH (cargo xtask puts its own
        # .toolchain/py there) would make pip think pytest is already installed.
        os.environ.pop("PYTHONPATH", None)
        venv = tmp / "venv"
        r = run([sys.executable, "-m", "venv", str(venv)])
        if not check("fresh venv", r.returncode == 0, r.stderr.strip()[-300:]):
            return 1
        py = str(venv / "bin" / "python")
        pip = [py, "-m", "pip", "--disable-pip-version-check", "--no-input"]
        r = run(pip + ["install", "--quiet", "--no-deps", str(wheel)])
        check("pip install --no-deps WHEEL", r.returncode == 0, (r.stdout + r.stderr).strip()[-500:])
        if not args.offline:
            report = tmp / "report.json"
            r = run(pip + ["install", "--quiet", "--dry-run", "--ignore-installed", "--only-binary=:all:", "--report", str(report), str(wheel)])
            if check("pip install --dry-run WHEEL resolves every Requires-Dist on PyPI", r.returncode == 0, (r.stderr.strip()[-500:])):
                got = {i["metadata"]["name"].lower(): i["metadata"]["version"] for i in json.loads(report.read_text())["install"]}
                for name, req in req_names.items():
                    check(f"  resolves {req}", name in got, f"got {got.get(name)}")
        # numpy is the host-array producer the no-driver calls use.
        r = run(pip + ["install", "--quiet", "numpy"])
        check("pip install numpy (for host-array calls)", r.returncode == 0, r.stderr.strip()[-300:])

        # The package's own tests (crates/kiln-py/tests), with pytest at its pinned version.
        tests = Path(__file__).resolve().parents[2] / "crates" / "kiln-py" / "tests"
        pytest_pin = load_kiln_table(args.pins).get("test-tools", {}).get("pytest")
        if check("pytest pinned in [workspace.metadata.kiln.test-tools]", bool(pytest_pin), str(pytest_pin)):
            r = run(pip + ["install", "--quiet", f"pytest=={pytest_pin}"])
            if check(f"pip install pytest=={pytest_pin}", r.returncode == 0, r.stderr.strip()[-300:]):
                env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "LD_LIBRARY_PATH")}
                r = run([py, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tests)], env=env, cwd=str(tmp))
                last = (r.stdout.strip().splitlines() or [""])[-1]
                check("pytest crates/kiln-py/tests (installed wheel)", r.returncode == 0,
                      last if r.returncode == 0 else (r.stdout + r.stderr)[-2500:])

        # The typed stubs, as a user's mypy reads them from the installed wheel: a file of
        # correct uses must check clean (each assert_type holds), and every line of a file of
        # misuses marked `# E:` must be an error.
        mypy_pin = load_kiln_table(args.pins).get("test-tools", {}).get("mypy")
        if check("mypy pinned in [workspace.metadata.kiln.test-tools]", bool(mypy_pin), str(mypy_pin)):
            r = run(pip + ["install", "--quiet", f"mypy=={mypy_pin}"])
            if check(f"pip install mypy=={mypy_pin}", r.returncode == 0, r.stderr.strip()[-300:]):
                typing_dir = tests / "typing"
                env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
                # torch is not installed here (several GB with its CUDA wheels): its two types
                # kiln's stubs name come from a stub of them (tests/typing/torch_stub, cited).
                env["MYPYPATH"] = str(typing_dir / "torch_stub")
                mypy = [py, "-m", "mypy", "--no-incremental", "--cache-dir", str(tmp / "mypy-cache")]
                # One mypy run over both files (mypy's start-up and numpy's stubs dominate its
                # cost: ~70 s per run at load 22 on 2 cores); errors are told apart by file.
                r = run(mypy + [str(typing_dir / "uses_kiln.py"), str(typing_dir / "misuses_kiln.py")],
                        env=env, cwd=str(tmp))
                # (by the whole file name: "misuses_kiln.py:" ends in "uses_kiln.py:" too)
                uses_errors = [l for l in r.stdout.splitlines()
                               if re.search(r"(^|/)uses_kiln\.py:\d+: error:", l)]
                check("mypy: correct uses of kiln type-check (assert_type on every return)",
                      r.returncode in (0, 1) and not uses_errors,
                      "\n".join(uses_errors)[-1500:] or "no errors in uses_kiln.py" if r.returncode in (0, 1)
                      else (r.stdout + r.stderr)[-1500:])
                src = (typing_dir / "misuses_kiln.py").read_text().splitlines()
                want = {i + 1 for i, l in enumerate(src) if "# E:" in l}
                got = {int(m) for m in re.findall(r"misuses_kiln\.py:(\d+): error:", r.stdout)}
                check("mypy: every misuse of kiln is an error", bool(want) and want <= got,
                      f"marked lines {sorted(want)}, errors on {sorted(got)}; missed {sorted(want - got)}")

        # Stub libcuda.so (the toolkit's link-time stub is like this): must not be taken for the driver.
        stub_dir = tmp / "stub"
        stub_dir.mkdir()
        (stub_dir / "stub.c").write_text("int cuInit(unsigned int flags) { (void)flags; return 0; }\n"
                                          "int cuDriverGetVersion(int *v) { *v = 13000; return 0; }\n")
        r = run(["gcc", "-shared", "-fPIC", "-o", str(stub_dir / "libcuda.so"), str(stub_dir / "stub.c")])
        have_stub = check("stub libcuda.so built with gcc", r.returncode == 0, r.stderr.strip())

        envs = {"plain environment": {}}
        if have_stub:
            envs["stub libcuda.so on LD_LIBRARY_PATH"] = {"LD_LIBRARY_PATH": str(stub_dir)}
        for label, extra in envs.items():
            env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "LD_LIBRARY_PATH", "LD_PRELOAD")}
            env.update(extra)
            r = run([py, "-c", PROBE], env=env, cwd=str(tmp))
            if not check(f"[{label}] import kiln, build_info(), GPU calls", r.returncode == 0, (r.stderr.strip()[-800:])):
                continue
            res = json.loads(r.stdout.strip().splitlines()[-1])
            info = res["build_info"]
            # The matrix and the targets it asks for (matrix_targets) come from the wheel's own
            # build manifest, read by kiln-arch's grammar: this script never reads or parses
            # the matrix. That the manifest's matrix is the checkout's is `kiln audit --policy
            # Cargo.toml`'s check (manifest/matrix-differs), run on the same wheel.
            check(f"[{label}] build_info matrix (the embedded manifest's)", bool(info["matrix"]),
                  " ".join(info["matrix"]))
            targets = {t["target"]: t["kind"] for t in info["targets"]}
            wanted = {t["target"]: t["kind"] for t in info["matrix_targets"]}
            check(f"[{label}] build_info targets = the matrix's targets", bool(wanted) and targets == wanted,
                  " ".join(f"{t}({k})" for t, k in targets.items()))
            kernels = [set(t["kernels"]) for t in info["targets"]]
            check(f"[{label}] every target has the same kernels", bool(kernels[0]) and all(k == kernels[0] for k in kernels),
                  f"{len(kernels[0])} kernels per target")
            ptx = [t for t in info["targets"] if t["kind"] == "ptx"]
            check(f"[{label}] PTX targets carry their PTX ISA", all(t.get("ptx_isa") for t in ptx), ", ".join(f"{t['target']} ISA {t.get('ptx_isa')}" for t in ptx))
            feats = info["features"]
            check(f"[{label}] features: cuda, cublas, cudnn, nccl", all(feats.get(k) is True for k in ("cuda", "cublas", "cudnn", "nccl")), json.dumps(feats))
            check(f"[{label}] version = workspace version", res["version"] == info["version"], res["version"])
            check(f"[{label}] commit recorded", bool(info.get("commit")), f"{info.get('commit')} dirty={info.get('dirty')}")
            prov = info.get("provenance") or {}
            same = all(info.get(k) == prov.get(k) for k in ("commit", "dirty", "rustc", "clang"))
            check(f"[{label}] commit/dirty/rustc/clang = the manifest's provenance", bool(prov) and same,
                  json.dumps({k: info.get(k) for k in ("commit", "dirty", "rustc", "clang")}))
            for call, err in res["errors"].items():
                if call == "vecadd(object)":
                    check(f"[{label}] {call} -> a TypeError that is a kiln.KilnError",
                          err is not None and err["is_kiln_error"], err and f"{err['type']}: {err['message']}")
                    continue
                ok = err is not None and err["is_no_driver"] and err["message"].startswith("no NVIDIA driver found: libcuda.so.1")
                check(f"[{label}] {call} -> kiln.NoDriverError", ok, err and f"{err['type']}: {err['message']}")
            check(f"[{label}] device_count() = 0, is_available() = False (no driver is no device)",
                  res["device_count"] == 0 and res["is_available"] is False,
                  f"device_count() = {res['device_count']}, is_available() = {res['is_available']}")
            not_found = all(v["status"] == "not found" for v in res["runtime_libraries"].values())
            check(f"[{label}] runtime_libraries() reports each soname", bool(res["runtime_libraries"]) and not_found,
                  ", ".join(f"{k}: {v['status']}" for k, v in res["runtime_libraries"].items()))

    print(f"{'FAILED: ' + ', '.join(FAILED) if FAILED else 'all checks passed'}")
    return 1 if FAILED else 0


if __name__ == "__main__":
    sys.exit(main())
