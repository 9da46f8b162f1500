#!/usr/bin/env python3
"""checks/kernel-library's kernels, as kiln-build built them, run on this GPU through the driver
API (ctypes, libcuda.so.1 only: no torch, no numpy), against a reference computed here.

    python3 test_kernel_library.py DIR --out RESULT.json

DIR (the bundle's kernel-library/) holds what `cargo xtask gpu-bundle` built:
  per-source/modules/<stem>.fatbin   one module per source file (the fixture's declared layout)
  per-source/kernels.manifest.json   its manifest (gates: the fp8 kernels exist from sm_89 on)
  per-source/ptx/<stem>.<target>.ptx each module's PTX alone, loaded by the driver's JIT
  one-module/kernels.fatbin          the same sources linked into one module per target (-ewp)
  per-source/libkernel_library_host_test.so   the static library of host-launched kernels
                                     (launch.cu) linked with the static CUDA runtime

Every image that holds a kernel for this GPU is loaded and every kernel it should hold is run:
per-source SASS, one-module SASS and PTX JIT. A gated kernel is checked to be absent exactly
where the manifest's gate says (cuModuleGetFunction -> CUDA_ERROR_NOT_FOUND) and present
elsewhere. Exit 0 all passed, 1 a failure, 2 could not run (no driver/GPU; the reason in --out).
"""

from __future__ import annotations

import argparse
import ctypes
import json
import math
import struct
import sys
from pathlib import Path

N = 4099  # not a multiple of the block size: the grid-stride tail is exercised
CUDA_ERROR_NOT_FOUND = 500

# e4m3 values that are exact (the cast round trip must give them back bit for bit).
FP8_EXACT = [0.0, 0.5, 1.0, -2.0, 3.5, 448.0, -448.0, 0.015625, 96.0, -0.25]


class Driver:
    def __init__(self):
        self.cu = ctypes.CDLL("libcuda.so.1")
        self.check(self.cu.cuInit(0), "cuInit")
        dev = ctypes.c_int()
        self.check(self.cu.cuDeviceGet(ctypes.byref(dev), 0), "cuDeviceGet")
        major, minor = ctypes.c_int(), ctypes.c_int()
        self.check(self.cu.cuDeviceGetAttribute(ctypes.byref(major), 75, dev), "compute capability major")
        self.check(self.cu.cuDeviceGetAttribute(ctypes.byref(minor), 76, dev), "compute capability minor")
        self.capability = major.value * 10 + minor.value
        self.ctx = ctypes.c_void_p()
        self.check(self.cu.cuDevicePrimaryCtxRetain(ctypes.byref(self.ctx), dev), "cuDevicePrimaryCtxRetain")
        self.check(self.cu.cuCtxSetCurrent(self.ctx), "cuCtxSetCurrent")

    @staticmethod
    def check(rc, what):
        if rc != 0:
            raise RuntimeError(f"{what}: CUresult {rc}")

    def load(self, image: bytes):
        mod = ctypes.c_void_p()
        self.check(self.cu.cuModuleLoadData(ctypes.byref(mod), ctypes.c_char_p(image)), "cuModuleLoadData")
        return mod

    def function(self, mod, name: str):
        f = ctypes.c_void_p()
        rc = self.cu.cuModuleGetFunction(ctypes.byref(f), mod, name.encode())
        return f if rc == 0 else rc

    def alloc(self, data: bytes):
        p = ctypes.c_uint64()
        self.check(self.cu.cuMemAlloc_v2(ctypes.byref(p), max(len(data), 1)), "cuMemAlloc")
        self.check(self.cu.cuMemcpyHtoD_v2(p, data, len(data)), "cuMemcpyHtoD")
        return p

    def read(self, p, n: int) -> bytes:
        buf = ctypes.create_string_buffer(n)
        self.check(self.cu.cuMemcpyDtoH_v2(buf, p, n), "cuMemcpyDtoH")
        return buf.raw

    def free(self, *ps):
        for p in ps:
            self.cu.cuMemFree_v2(p)

    def launch(self, f, params: list):
        """params: ctypes scalars (c_uint64 for pointers and size_t, c_float)."""
        arr = (ctypes.c_void_p * len(params))(*[ctypes.cast(ctypes.pointer(p), ctypes.c_void_p) for p in params])
        self.check(self.cu.cuLaunchKernel(f, 8, 1, 1, 128, 1, 1, 0, None, arr, None), "cuLaunchKernel")
        self.check(self.cu.cuCtxSynchronize(), "cuCtxSynchronize")


def floats(xs) -> bytes:
    return struct.pack(f"<{len(xs)}f", *xs)


def unfloats(b: bytes) -> list:
    return list(struct.unpack(f"<{len(b) // 4}f", b))


def close(a, b) -> bool:
    return all(math.isclose(x, y, rel_tol=1e-6, abs_tol=1e-6) for x, y in zip(a, b)) and len(a) == len(b)


def case_affine(d: Driver, f):
    x = [(i % 97) * 0.25 - 7.0 for i in range(N)]
    inp, out = d.alloc(floats(x)), d.alloc(bytes(4 * N))
    d.launch(f, [ctypes.c_uint64(N), ctypes.c_uint64(1), ctypes.c_uint64(0), inp, out, ctypes.c_float(1.5), ctypes.c_float(-2.0)])
    got = unfloats(d.read(out, 4 * N))
    want = [struct.unpack("<f", struct.pack("<f", v * 1.5 - 2.0))[0] for v in x]
    # Strided: a 2-D [rows, cols] view of a transposed buffer (info = dims then strides).
    rows, cols = 33, 31
    src = [float(i) for i in range(rows * cols)]
    info = struct.pack("<4Q", rows, cols, 1, rows)
    dinfo, sinp, sout = d.alloc(info), d.alloc(floats(src)), d.alloc(bytes(4 * rows * cols))
    d.launch(f, [ctypes.c_uint64(rows * cols), ctypes.c_uint64(2), dinfo, sinp, sout, ctypes.c_float(1.0), ctypes.c_float(0.0)])
    strided = unfloats(d.read(sout, 4 * rows * cols))
    want_strided = [src[(i // cols) * 1 + (i % cols) * rows] for i in range(rows * cols)]
    d.free(inp, out, dinfo, sinp, sout)
    return close(got, want) and strided == want_strided


def case_uneg(d: Driver, f):
    x = [(i % 13) - 6.5 for i in range(N)]
    inp, out = d.alloc(floats(x)), d.alloc(bytes(4 * N))
    d.launch(f, [ctypes.c_uint64(N), ctypes.c_uint64(1), ctypes.c_uint64(0), inp, out])
    got = unfloats(d.read(out, 4 * N))
    d.free(inp, out)
    return got == [-v for v in x]


def case_usqr(d: Driver, f):
    x = [(i % 11) * 0.5 for i in range(N)]
    inp, out = d.alloc(floats(x)), d.alloc(bytes(4 * N))
    d.launch(f, [ctypes.c_uint64(N), inp, out])
    got = unfloats(d.read(out, 4 * N))
    d.free(inp, out)
    return got == [v * v for v in x]


def case_fp8_round_trip(d: Driver, to8, from8):
    x = (FP8_EXACT * (N // len(FP8_EXACT) + 1))[:N]
    inp, mid, out = d.alloc(floats(x)), d.alloc(bytes(N)), d.alloc(bytes(4 * N))
    d.launch(to8, [ctypes.c_uint64(N), inp, mid])
    d.launch(from8, [ctypes.c_uint64(N), ctypes.c_uint64(1), ctypes.c_uint64(0), mid, out])
    got = unfloats(d.read(out, 4 * N))
    d.free(inp, mid, out)
    return got == x


def case_host_launch(d: Driver, so: Path) -> bool:
    """The host-launched kernel through its extern "C" entry point (the CUDA runtime inside the
    library uses the primary context this driver made current)."""
    lib = ctypes.CDLL(str(so))
    fn = lib.kernel_library_scale_add
    fn.restype = ctypes.c_int
    fn.argtypes = [ctypes.c_size_t, ctypes.c_uint64, ctypes.c_uint64, ctypes.c_uint64, ctypes.c_float, ctypes.c_void_p]
    x = [(i % 7) * 1.0 for i in range(N)]
    y = [(i % 5) * 0.5 for i in range(N)]
    px, py, po = d.alloc(floats(x)), d.alloc(floats(y)), d.alloc(bytes(4 * N))
    rc = fn(N, px.value, py.value, po.value, 3.0, None)
    d.check(d.cu.cuCtxSynchronize(), "cuCtxSynchronize")
    got = unfloats(d.read(po, 4 * N))
    d.free(px, py, po)
    return rc == 0 and got == [3.0 * a + b for a, b in zip(x, y)]


CASES = {
    "affine_f32": case_affine,
    "uneg_f32": case_uneg,
    "usqr_f32": case_usqr,
}


def run_image(d: Driver, label: str, image: bytes, expected: set, gated: dict, target: str, results: list):
    """Loads `image` and checks every kernel of `expected` (those the manifest says this image's
    target holds); gated kernels denied for `target` must be absent."""
    try:
        mod = d.load(image)
    except RuntimeError as e:
        results.append({"image": label, "kernel": "*", "passed": False, "error": str(e)})
        return
    for name, fn in CASES.items():
        if name in expected:
            f = d.function(mod, name)
            ok = not isinstance(f, int) and fn(d, f)
            results.append({"image": label, "kernel": name, "passed": bool(ok)})
    fp8 = ["cast_f32_fp8", "cast_fp8_f32"]
    for name in fp8:
        allowed = gated.get(name)
        if allowed is not None and target not in allowed:
            f = d.function(mod, name)
            results.append({"image": label, "kernel": name, "gate": "absent", "passed": f == CUDA_ERROR_NOT_FOUND})
    if all(k in expected for k in fp8):
        to8, from8 = d.function(mod, fp8[0]), d.function(mod, fp8[1])
        ok = not isinstance(to8, int) and not isinstance(from8, int) and case_fp8_round_trip(d, to8, from8)
        results.append({"image": label, "kernel": "cast_f32_fp8+cast_fp8_f32", "passed": bool(ok)})
    d.cu.cuModuleUnload(mod)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("dir", type=Path)
    ap.add_argument("--out", type=Path, required=True)
    a = ap.parse_args()
    try:
        d = Driver()
    except (OSError, RuntimeError) as e:
        a.out.write_text(json.dumps({"reason": f"no usable GPU: {e}"}))
        print(f"skipped: no usable GPU: {e}")
        return 2
    per = a.dir / "per-source"
    manifest = json.loads((per / "kernels.manifest.json").read_text())
    gated = manifest.get("gates", {})
    sm = f"sm_{d.capability}"
    results: list = []
    # The SASS this GPU runs (same major.minor; the fixture has no a/f variants).
    for module in manifest["modules"]:
        t = next((t for t in module["targets"] if t["target"] == sm), None)
        if t is None:
            continue
        image = (per / "modules" / f"{module['name']}.fatbin").read_bytes()
        run_image(d, f"per-source/{module['name']} ({sm})", image, set(t["kernels"]), gated, sm, results)
        for ptx in sorted((per / "ptx").glob(f"{module['name']}.compute_*.ptx")):
            target = ptx.name.split(".")[1]
            p = next(x for x in module["targets"] if x["target"] == target)
            run_image(d, f"per-source/{ptx.name} (JIT)", ptx.read_bytes() + b"\0", set(p["kernels"]), gated, target, results)
    one = json.loads((a.dir / "one-module" / "kernels.manifest.json").read_text())
    t = next((t for t in one["targets"] if t["target"] == sm), None)
    if t is not None:
        run_image(d, f"one-module ({sm})", (a.dir / "one-module" / "kernels.fatbin").read_bytes(),
                  set(t["kernels"]), one.get("gates", {}), sm, results)
    host = per / "libkernel_library_host_test.so"
    if host.is_file():
        results.append({"image": "static library (host launch)", "kernel": "kernel_library_scale_add",
                        "passed": case_host_launch(d, host)})
    failed = [r for r in results if not r["passed"]]
    doc = {"gpu_capability": sm, "cases": len(results), "failed": len(failed), "results": results}
    a.out.write_text(json.dumps(doc, indent=1))
    for r in results:
        print(f"{'ok  ' if r['passed'] else 'FAIL'} {r['image']}: {r['kernel']}{' ' + r.get('error', '') if 'error' in r else ''}")
    if not results:
        print(f"no image holds code for {sm}")
        return 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
