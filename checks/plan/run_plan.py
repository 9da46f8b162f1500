#!/usr/bin/env python3
"""A minimal external executor for `cargo xtask kernels --emit-plan` / `KernelBuild::plan`.

Runs every `compile` job, then every `link` job, each into a scratch file renamed onto its
`output` (the plan's cache directory), N at a time. A later kiln-build with that cache directory
finds every job done and only combines the fatbin. Usage: run_plan.py PLAN.json [-j N]
"""
import argparse
import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor


def run(job):
    out = job["output"]
    tmp = f"{out}.runner.{os.getpid()}"
    cmd = [tmp if a == out else a for a in job["command"]]
    os.makedirs(os.path.dirname(out), exist_ok=True)
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0 or not os.path.isfile(tmp):
        return f"{job['id']} failed ({r.returncode}):\n{r.stderr}"
    os.replace(tmp, out)
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("plan")
    ap.add_argument("-j", type=int, default=os.cpu_count() or 1)
    a = ap.parse_args()
    with open(a.plan) as f:
        plan = json.load(f)
    if plan.get("format") != 1:
        sys.exit(f"unknown plan format {plan.get('format')!r}")
    ran = 0
    for stage in ("compile", "link"):
        jobs = [j for j in plan["jobs"] if j["stage"] == stage]
        with ThreadPoolExecutor(a.j) as pool:
            errors = [e for e in pool.map(run, jobs) if e]
        if errors:
            sys.exit("\n".join(errors))
        ran += len(jobs)
    print(f"ran {ran} jobs")


if __name__ == "__main__":
    main()
