#!/usr/bin/env python3
"""A minimal external executor for `cargo xtask kernels --emit-plan` / `KernelBuild::plan`.

Runs the stages in order (compile — nvcc and the Rust crate's cargo —, assemble, link, merge,
combine), each job into a scratch file renamed onto its `output`, N at a time. The combine job
writes the fatbin itself; a later kiln-build with the plan's cache directory finds every job
done and writes the same bytes. With --prebuilt DIR, each job's output is also filed as a
prebuilt entry, DIR/<id with ':' as '/'>/{output,key} (the job's planned input key), which a
kiln-build given KILN_PREBUILT_KERNELS=DIR takes instead of running the job — after checking
the key against its own plan. Usage: run_plan.py PLAN.json [-j N] [--prebuilt DIR]
"""
import argparse
import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor


# The outer cargo's variables belong to its build, not to the Rust kernel job (as kiln-build).
KEEP = ("CARGO_HOME", "CARGO_NET_OFFLINE")


def job_env(job):
    if not job.get("env"):
        return None
    env = {
        k: v
        for k, v in os.environ.items()
        if not (
            (k.startswith("CARGO_") and k not in KEEP)
            or k.startswith("RUSTC")
            or k in ("RUSTFLAGS", "RUSTDOCFLAGS", "TARGET", "HOST", "OUT_DIR")
        )
    }
    env.update(job["env"])
    return env


def lines(text):
    """Rust's str::lines: split on \\n, no last empty line, a trailing \\r dropped."""
    parts = text.split("\n")
    if parts and parts[-1] == "":
        parts.pop()
    return [p[:-1] if p.endswith("\r") else p for p in parts]


def ptx_merge(cxx_path, rust_path, out):
    """The builtin `ptx-merge` (kiln_build::rust::merge_ptx_text)."""
    with open(cxx_path) as f:
        cxx = f.read()
    with open(rust_path) as f:
        rust = f.read()
    header = (".version", ".target", ".address_size")
    body = "".join(
        line + "\n" for line in lines(rust) if not line.lstrip().startswith(header)
    )
    text = (
        cxx.rstrip()
        + "\n\n// Rust kernels (kernels/rust, sm_80 PTX from the kernel rustc), appended by kiln-build\n"
        + body
    )
    with open(out, "w") as f:
        f.write(text)


def swap(arg, out, tmp):
    if arg == out:
        return tmp
    if arg.endswith("=" + out):
        return arg[: -len(out)] + tmp
    return arg


def run(job):
    out = job["output"]
    tmp = f"{out}.runner.{os.getpid()}"
    cmd = [swap(a, out, tmp) for a in job["command"]]
    os.makedirs(os.path.dirname(out), exist_ok=True)
    builtin = job.get("builtin")
    if builtin == "ptx-merge":
        ptx_merge(job["inputs"][0], job["inputs"][1], tmp)
    elif builtin:
        return f"{job['id']}: unknown builtin {builtin!r}"
    r = subprocess.run(cmd, capture_output=True, text=True, env=job_env(job))
    if builtin == "ptx-merge" and "-o" in cmd:
        check = cmd[cmd.index("-o") + 1]
        if os.path.exists(check):
            os.remove(check)
    if r.returncode != 0 or not os.path.isfile(tmp):
        return f"{job['id']} failed ({r.returncode}):\n{r.stderr}"
    os.replace(tmp, out)
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("plan")
    ap.add_argument("-j", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--prebuilt", help="also file every job's output as a prebuilt entry here")
    a = ap.parse_args()
    with open(a.plan) as f:
        plan = json.load(f)
    if plan.get("format") not in (2, 3):
        sys.exit(f"unknown plan format {plan.get('format')!r}")
    ran = 0
    for stage in ("compile", "assemble", "link", "merge", "combine"):
        jobs = [j for j in plan["jobs"] if j["stage"] == stage]
        with ThreadPoolExecutor(a.j) as pool:
            errors = [e for e in pool.map(run, jobs) if e]
        if errors:
            sys.exit("\n".join(errors))
        ran += len(jobs)
        if a.prebuilt:
            for j in jobs:
                if j.get("key"):
                    entry = os.path.join(a.prebuilt, *j["id"].split(":"))
                    os.makedirs(entry, exist_ok=True)
                    with open(j["output"], "rb") as src, open(os.path.join(entry, "output"), "wb") as dst:
                        dst.write(src.read())
                    with open(os.path.join(entry, "key"), "w") as f:
                        f.write(j["key"] + "\n")
    print(f"ran {ran} jobs")


if __name__ == "__main__":
    main()
