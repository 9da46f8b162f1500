#!/usr/bin/env python3
"""What Python and the dynamic loader make of kiln-hostile's generated inputs (the reference side
of tools/kiln-hostile/tests/differential.rs).

  pip_view.py wheels OUT.json WHEEL...   for each wheel: zipfile's members and their content
                                         (or why it refuses), and what `pip install --no-deps
                                         --no-index --target` installs (or why it refuses)
  pip_view.py load OUT.json LIB...       for each library: does ctypes.CDLL load it (in a child
                                         process: a corrupt ELF can crash the loader), and what
                                         `ld.so --list` prints

Hashes are RECORD's form (sha256=urlsafe-base64, no padding) so they compare with the audit's.
"""
import base64
import concurrent.futures
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import zipfile


def record_hash(data):
    d = hashlib.sha256(data).digest()
    return "sha256=" + base64.urlsafe_b64encode(d).rstrip(b"=").decode()


def zipfile_view(path):
    try:
        with zipfile.ZipFile(path) as z:
            members = {}
            for info in z.infolist():
                if info.is_dir():
                    continue
                with z.open(info) as f:
                    members[info.filename] = record_hash(f.read())
            return {"members": members}
    except Exception as e:  # every refusal counts, whatever its class
        return {"error": f"{type(e).__name__}: {e}"}


def pip_view(path):
    with tempfile.TemporaryDirectory() as target:
        r = subprocess.run(
            [sys.executable, "-m", "pip", "install", "--no-deps", "--no-index",
             "--no-compile", "--disable-pip-version-check", "--no-cache-dir", "-q",
             "--target", target, path],
            capture_output=True, text=True, env={**os.environ, "PIP_NO_INPUT": "1"},
        )
        if r.returncode != 0:
            return {"error": (r.stderr or r.stdout).strip()[-400:]}
        files = {}
        for root, _, names in os.walk(target):
            for n in names:
                p = os.path.join(root, n)
                rel = os.path.relpath(p, target)
                if os.path.islink(p):
                    files[rel] = "symlink"
                    continue
                with open(p, "rb") as f:
                    files[rel] = record_hash(f.read())
        return {"files": files}


def load_view(path):
    out = {}
    # In a child: a corrupt ELF can crash the loader, and with it the process that dlopens it.
    r = subprocess.run(
        [sys.executable, "-c", "import ctypes, sys; ctypes.CDLL(sys.argv[1])", path],
        capture_output=True, text=True,
    )
    if r.returncode == 0:
        out["ctypes"] = "ok"
    elif r.returncode < 0:
        out["ctypes"] = f"error: the loader died with signal {-r.returncode}"
    else:
        out["ctypes"] = "error: " + r.stderr.strip().splitlines()[-1][-300:] if r.stderr.strip() else "error"
    ld = "/lib64/ld-linux-x86-64.so.2"
    if os.path.exists(ld):
        r = subprocess.run([ld, "--list", path], capture_output=True, text=True)
        out["ld_list"] = {"rc": r.returncode, "text": (r.stdout + r.stderr)[-2000:]}
    return out


def main():
    mode, out_path, paths = sys.argv[1], sys.argv[2], sys.argv[3:]
    if mode == "wheels":
        # pip is a process per wheel; four at a time keep two cores busy.
        with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
            pips = dict(zip(paths, pool.map(pip_view, paths)))
        result = {p: {"zipfile": zipfile_view(p), "pip": pips[p]} for p in paths}
    elif mode == "load":
        result = {p: load_view(p) for p in paths}
    else:
        sys.exit(f"unknown mode {mode!r}")
    with open(out_path, "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    main()
