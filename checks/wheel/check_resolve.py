#!/usr/bin/env python3
"""The kiln wheel installs beside the CUDA 13 packages a Python user already has (issue 18).

    python3 checks/wheel/check_resolve.py WHEEL [--pins Cargo.toml]

For each partner — the newest torch, torch 2.11 (the release the Requires-Dist lower bounds
were taken from, CUDA 13 on PyPI), jax[cuda13], cupy-cuda13x — pip resolves the wheel
together with it from the package index, metadata only:
`pip install --dry-run --ignore-installed --report R.json WHEEL PARTNER`. Each must resolve,
keep the partner at the newest version the index has (as `pip index versions` lists it, within
the partner's own specifier), keep one CUDA major (no `nvidia-*-cu12`, no `*-cuda12*`), and
choose, for every runtime library of `[workspace.metadata.kiln.runtime.*]` that the wheel's
Requires-Dist names, a release inside the declared `requires` range.

The default PyPI torch is the CUDA 13 build: its wheels depend on `cuda-toolkit` 13.x and
`nvidia-cudnn-cu13` (seen in the report, and checked here: a torch that pulls a `-cu12`
package fails the single-CUDA-major check). Other CUDA builds of torch live only on
download.pytorch.org, which this check does not reach.

When the package index cannot be reached at all, prints one SKIP line and exits 0; any other
failure exits 1.

"Metadata only" holds where the index serves PEP 658 metadata files. The index this project's CI
reaches does not (its simple pages carry no `core-metadata` key), so pip downloads every wheel it
considers: about 4 GB in the temporary directory for one torch resolve (measured with pip 23.2.1
and 26.3 alike). Partners therefore resolve one at a time, each with its own TMPDIR that is
removed before the next, pip's cache off, and the check refuses to start with less than
MIN_FREE_GIB free there — a clear error instead of pip's ENOSPC traceback half-way through.
"""

from __future__ import annotations

import argparse
import json
import re
import os
import shutil
import subprocess
import sys
import tempfile
import urllib.request
import zipfile
from pathlib import Path

try:
    import tomllib  # Python 3.11+
except ModuleNotFoundError:  # pragma: no cover
    tomllib = None

# (label, requirement given to pip, distribution name, specifier the newest version must meet)
PARTNERS = [
    ("newest torch (PyPI's torch is the CUDA 13 build)", "torch", "torch", None),
    ("torch 2.11 on CUDA 13", "torch==2.11.*", "torch", "2.11."),
    ("jax[cuda13]", "jax[cuda13]", "jax", None),
    ("cupy-cuda13x", "cupy-cuda13x", "cupy-cuda13x", None),
]

# What one partner's resolve downloads where the index has no PEP 658 metadata (~4 GB for
# torch), with room to spare; checked before the first resolve.
MIN_FREE_GIB = 8

# A second CUDA major next to CUDA 13 kiln: NVIDIA's cu12 wheels, jax's cuda12 plugins, cupy 12.
CUDA12 = re.compile(r"(^nvidia-.*-cu12$)|(cuda12)|(^cupy-cuda12x$)")


def norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def index_url() -> str:
    out = subprocess.run(
        [sys.executable, "-m", "pip", "config", "get", "global.index-url"],
        capture_output=True,
        text=True,
    )
    url = out.stdout.strip() if out.returncode == 0 and out.stdout.strip() else ""
    return url or "https://pypi.org/simple/"


def index_reachable(url: str) -> str | None:
    """None when the index answers; else why not."""
    try:
        with urllib.request.urlopen(url.rstrip("/") + "/pip/", timeout=30) as r:
            r.read(1)
        return None
    except Exception as e:  # noqa: BLE001 — any failure to reach it is the skip reason
        return f"{type(e).__name__}: {e}"


def newest_version(dist: str, prefix: str | None) -> str:
    out = subprocess.run(
        [sys.executable, "-m", "pip", "index", "versions", dist],
        capture_output=True,
        text=True,
    )
    m = re.search(r"Available versions: (.*)", out.stdout)
    if out.returncode != 0 or not m:
        raise RuntimeError(f"pip index versions {dist} failed: {out.stderr.strip()[-400:]}")
    versions = [v.strip() for v in m.group(1).split(",")]  # newest first
    matching = [v for v in versions if prefix is None or v.startswith(prefix)]
    if not matching:
        raise RuntimeError(f"no {dist} release starting {prefix!r} on the index")
    return matching[0]


def version_tuple(v: str) -> tuple:
    return tuple(int(x) for x in re.findall(r"\d+", v))


def in_range(version: str, requires: str) -> bool:
    """`requires` as kiln-pins validates it: ">=MAJOR.MINOR,<MAJOR+1"."""
    low, high = (s.strip() for s in requires.split(","))
    lo = version_tuple(low.removeprefix(">="))
    hi = version_tuple(high.removeprefix("<"))
    v = version_tuple(version)
    return v[: len(lo)] >= lo and v[: len(hi)] < hi


def resolve(wheel: Path, runtime: dict, partner) -> list[str]:
    """Problems with one partner (empty: it resolves as required)."""
    label, requirement, dist, prefix = partner
    try:
        newest = newest_version(dist, prefix)
    except RuntimeError as e:
        return [str(e)]
    with tempfile.TemporaryDirectory(prefix="kiln-resolve-") as tmp:
        report = Path(tmp) / "report.json"
        scratch = Path(tmp) / "pip-tmp"
        scratch.mkdir()
        out = subprocess.run(
            [
                sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed",
                "--no-cache-dir", "--quiet", "--report", str(report), str(wheel), requirement,
            ],
            capture_output=True,
            text=True,
            env={**os.environ, "TMPDIR": str(scratch)},
        )
        if out.returncode != 0:
            return [f"pip could not resolve kiln with {requirement}: {out.stderr.strip()[-1500:]}"]
        installed = {
            norm(i["metadata"]["name"]): i["metadata"]["version"]
            for i in json.loads(report.read_text())["install"]
        }
    problems = []
    got = installed.get(norm(dist))
    if got != newest:
        problems.append(f"{dist} resolved to {got}, not the newest {newest} (kiln holds it back)")
    cu12 = sorted(n for n in installed if CUDA12.search(n))
    if cu12:
        problems.append(f"a second CUDA major next to CUDA 13 kiln: {', '.join(cu12)}")
    chosen = []
    for name, lib in sorted(runtime.items()):
        v = installed.get(norm(lib["wheel"]))
        if v is None:
            problems.append(f"{lib['wheel']} (runtime.{name}) is not in the resolved set")
        elif not in_range(v, lib["requires"]):
            problems.append(f"{lib['wheel']} {v} is outside runtime.{name}.requires {lib['requires']}")
        else:
            chosen.append(f"{lib['wheel']} {v}")
    print(f"  {label}: {dist} {got} (newest {newest}); {'; '.join(chosen)}", flush=True)
    return problems


def requires_dist_names(wheel: Path) -> set[str]:
    with zipfile.ZipFile(wheel) as z:
        meta = next(n for n in z.namelist() if re.fullmatch(r"[^/]+\.dist-info/METADATA", n))
        text = z.read(meta).decode()
    headers = text.split("\n\n", 1)[0]
    return {
        norm(re.match(r"[A-Za-z0-9._-]+", v.strip()).group(0))
        for k, v in (line.split(":", 1) for line in headers.splitlines() if ":" in line)
        if k.strip().lower() == "requires-dist"
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("wheel", type=Path)
    ap.add_argument("--pins", type=Path, default=Path("Cargo.toml"))
    args = ap.parse_args()
    if not args.wheel.is_file():
        print(f"error: no wheel at {args.wheel}", file=sys.stderr)
        return 1
    if tomllib is None:
        print("error: Python 3.11+ (tomllib) is needed to read the pins", file=sys.stderr)
        return 1
    runtime = tomllib.loads(args.pins.read_text())["workspace"]["metadata"]["kiln"]["runtime"]
    # Only the runtime wheels this wheel declares (the pins list more than a build may reach).
    declared = requires_dist_names(args.wheel)
    runtime = {k: v for k, v in runtime.items() if norm(v["wheel"]) in declared}
    if not runtime:
        print("error: the wheel's Requires-Dist names none of the pinned runtime wheels", file=sys.stderr)
        return 1
    url = index_url()
    why = index_reachable(url)
    if why is not None:
        print(f"SKIP: the package index {url} is unreachable ({why}); nothing was resolved")
        return 0
    free_gib = shutil.disk_usage(tempfile.gettempdir()).free / 2**30
    if free_gib < MIN_FREE_GIB:
        print(
            f"error: {free_gib:.1f} GiB free in {tempfile.gettempdir()}, but a resolve may download "
            f"~4 GB of wheels there (this index serves no PEP 658 metadata); free at least "
            f"{MIN_FREE_GIB} GiB or point TMPDIR elsewhere",
            file=sys.stderr,
        )
        return 1
    # One at a time: each resolve's downloads are deleted before the next starts.
    results = [(p[0], resolve(args.wheel, runtime, p)) for p in PARTNERS]
    failed = False
    for label, problems in results:
        for p in problems:
            print(f"  FAIL {label}: {p}")
            failed = True
        if not problems:
            print(f"  ok   {label}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
