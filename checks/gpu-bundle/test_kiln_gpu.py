#!/usr/bin/env python3
"""kiln on a GPU, from Python: every op against a float64 CPU reference (numpy) and against
torch, on >= 20 shapes each (odd sizes, sizes that are not multiples of any block or vector
width, empty tensors) and every dtype (float32, float16, bfloat16); plus the DLPack contract
(zero-copy both ways, byte offsets, host arrays, streams, lifetimes) and the error classes.

    python3 test_kiln_gpu.py --out RESULT.json [--quick]

Tolerances (stated, per dtype; an output passes when |kiln - ref| <= atol + rtol * |ref|
elementwise, ref computed in float64 from the same, already rounded, inputs):
    TOL[op][dtype] below. kiln computes in float32 and rounds once to the output type, so
    rtol is about one ulp of the output type (f16 2^-10, bf16 2^-7 ... doubled for headroom);
    rope's angle is formed in float32 as in torch's Llama and its tolerance adds
    ROPE_ANGLE_SLACK * pos * |pair| (angle ulps). embedding is a gather: exact.
    matmul (per output element ij, k the inner dimension, S_ij = sum_k |a_ik| |b_kj|):
        atol_ij = atol_per_k * k + MATMUL_SPLIT_SLACK * u_out * S_ij / sqrt(k)
    The first term is float32 accumulation. The second: cuBLAS (COMPUTE_32F, default math
    mode) may split k and reduce the partial sums in the output type (reduced-precision
    reduction, allowed for f16/bf16); each such rounding is relative to a partial sum's
    magnitude, not to the (possibly cancelled) result, and partial sums of random-sign
    products grow like S/sqrt(k) (u_out: unit roundoff of the output type, f32 2^-24,
    f16 2^-11, bf16 2^-8). A wrong kernel is off by O(|dot|) ~ S/sqrt(k) itself, far above it.
    Multi-GPU (>= 2 visible devices): every op's DLPack import must work for inputs on any
    device, whatever torch's current device is, and must leave the current device as it was.
Agreement with torch: |kiln - torch| <= 2 * (atol + rtol * |ref|) elementwise, unless torch
itself is outside the tolerance (then it is recorded as torch's deviation, not kiln's).

Exit status: 0 all passed, 1 any failure, 2 could not run (no GPU / no torch / no kiln).
Runs without pytest; with pytest, `pytest test_kiln_gpu.py` collects test_all().
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import sys
import time
import traceback

import numpy as np

import check_streams

F32, F16, BF16 = "float32", "float16", "bfloat16"
DTYPES = (F32, F16, BF16)


def _tol(f32, f16, bf16):
    return {F32: f32, F16: f16, BF16: bf16}


ELEMENTWISE_TOL = _tol((1e-6, 1e-6), (2e-3, 1e-5), (1.6e-2, 1e-4))
TOL = {
    "vecadd": ELEMENTWISE_TOL,
    "axpby": _tol((2e-6, 1e-6), (2e-3, 1e-5), (1.6e-2, 1e-4)),
    # exp in float32 (fast exp: a few ulps more for large |gate|)
    "silu_mul": _tol((1e-5, 1e-6), (2e-3, 1e-5), (1.6e-2, 1e-4)),
    # float32 sums over up to 100003 columns
    "rmsnorm": _tol((2e-5, 1e-6), (2e-3, 1e-5), (1.6e-2, 1e-4)),
    "softmax": _tol((2e-5, 1e-7), (2e-3, 1e-6), (1.6e-2, 1e-5)),
    "cudnn_softmax": _tol((2e-5, 1e-7), (2e-3, 1e-6), (1.6e-2, 1e-5)),
    # plus ROPE_ANGLE_SLACK * position * |(x_i, x_i+d/2)| per element (see ref_rope)
    "rope": _tol((1e-5, 1e-6), (2e-3, 1e-5), (1.6e-2, 1e-4)),
    "embedding": _tol((0.0, 0.0), (0.0, 0.0), (0.0, 0.0)),
    # atol per unit of k: float32 accumulation over k products of N(0,1) numbers.
    "matmul": _tol((1e-5, 2e-6), (2e-3, 2e-6), (1.6e-2, 2e-6)),
}

ELEMENTWISE_SHAPES = [
    (1,), (2,), (3,), (7,), (31,), (32,), (33,), (127,), (255,), (256,), (257,), (1000,), (1023,),
    (1025,), (4097,), (65535,), (65537,), (1000003,), (3, 5, 7), (17, 129), (2, 3, 4, 5), (0,), (4, 0, 3),
]
ROW_SHAPES = [
    (1, 1), (1, 2), (1, 7), (3, 31), (2, 32), (5, 33), (7, 127), (3, 255), (4, 256), (9, 257), (2, 1000),
    (3, 1023), (1, 1024), (5, 1025), (2, 4095), (3, 4096), (4, 4097), (1, 8193), (2, 16385), (37, 3),
    (129, 130), (1000, 17), (2, 3, 65), (16, 12288), (3, 100003), (0, 8),
]
# (tokens, heads, head_dim); positions alternate: offset, int32 ids, int64 ids.
ROPE_SHAPES = [
    (1, 1, 2), (1, 1, 4), (3, 1, 6), (5, 3, 8), (7, 2, 10), (2, 5, 14), (9, 4, 30), (17, 8, 32), (1, 32, 64),
    (33, 7, 64), (5, 2, 66), (3, 3, 96), (31, 4, 128), (64, 32, 128), (129, 8, 128), (2, 1, 256), (7, 5, 126),
    (13, 3, 130), (100, 2, 80), (1000, 4, 64), (3, 2, 1000), (11, 1, 2050), (0, 2, 8),
]
# (vocab, dim, ids shape)
EMBEDDING_SHAPES = [
    (1, 1, (1,)), (2, 3, (5,)), (7, 7, (3, 4)), (100, 31, (17,)), (1000, 32, (8, 8)), (1000, 33, (255,)),
    (50, 127, (1,)), (3, 256, (1000,)), (9, 257, (3,)), (30000, 1024, (77,)), (17, 1025, (2, 5)),
    (5, 4097, (9,)), (128, 2, (1000,)), (10, 1, (10,)), (65537, 16, (513,)), (4, 8192, (3,)),
    (1000, 100, (0,)), (12, 12, (2, 3, 4)), (256, 4096, (129,)), (32000, 8, (2049,)),
]
MATMUL_SHAPES = [
    (1, 1, 1), (1, 7, 1), (3, 5, 7), (17, 33, 9), (31, 64, 17), (64, 64, 64), (65, 129, 33), (127, 255, 63),
    (128, 128, 128), (200, 300, 100), (1, 1024, 1), (257, 513, 129), (512, 1000, 333), (7, 4096, 11),
    (1000, 17, 1000), (2, 2, 2), (33, 1, 33), (1024, 1024, 1024), (5, 0, 5), (0, 5, 5), (3, 2049, 5),
]


# ---- float64 CPU references (numpy) -------------------------------------------------------

def ref_vecadd(a, b):
    return a + b


def ref_axpby(x, y, alpha, beta):
    return alpha * x + beta * y


def ref_silu_mul(g, u):
    return g / (1.0 + np.exp(-g)) * u


def ref_rmsnorm(x, w, eps):
    ms = np.mean(x * x, axis=-1, keepdims=True) if x.shape[-1] else np.zeros(x.shape[:-1] + (1,))
    return x / np.sqrt(ms + eps) * w


def ref_softmax(x):
    if x.size == 0:
        return x.copy()
    m = np.max(x, axis=-1, keepdims=True)
    e = np.exp(x - m)
    return e / np.sum(e, axis=-1, keepdims=True)


# The rotation angle pos * theta^(-2i/d) is formed in float32, as torch's Llama does (and as
# kiln-runtime's reference does); the rotation itself in float64. An angle off by a few float32
# ulps (pow/exp2 and product rounding differ between implementations) moves an output by
# ~ angle_error * |pair|, so rope's tolerance adds ROPE_ANGLE_SLACK * pos * |pair|
# (4 ulps of 2^-23 relative: at pos 4095, 2e-3 rad).
ROPE_ANGLE_SLACK = 2.0 ** -21


def ref_rope(x, pos, theta):
    """x [T, H, D] float64, pos [T] ints: rotate-half (HF Llama) layout."""
    t, h, d = x.shape
    half = d // 2
    inv = (np.float32(1.0) / np.power(np.float32(theta), np.arange(0, d, 2, dtype=np.float32) / np.float32(d))).astype(np.float32)
    ang = (pos.astype(np.float32)[:, None] * inv[None, :]).astype(np.float64)  # [T, half], float32-formed
    c, s = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
    x1, x2 = x[..., :half], x[..., half:]
    return np.concatenate([x1 * c - x2 * s, x2 * c + x1 * s], axis=-1)


def ref_embedding(table, ids):
    return table[ids]


def ref_matmul(a, b):
    return a @ b


# Unit roundoff of each output type, and the multiple of u_out * S/sqrt(k) matmul allows for
# reductions of split-k partial sums in the output type (see the module docstring).
U_OUT = {F32: 2.0 ** -24, F16: 2.0 ** -11, BF16: 2.0 ** -8}
MATMUL_SPLIT_SLACK = 4.0


def matmul_atol(a64, b64, dtype):
    """Per-element atol for a64 @ b64 (float64 copies of the rounded inputs)."""
    k = max(a64.shape[1], 1)
    _, atol_per_k = TOL["matmul"][dtype]
    s = np.abs(a64) @ np.abs(b64)
    return atol_per_k * k + MATMUL_SPLIT_SLACK * U_OUT[dtype] * s / math.sqrt(k)


# ---- helpers ------------------------------------------------------------------------------

class Ctx:
    def __init__(self, torch, kiln, device=0, seed=1234):
        self.torch, self.kiln = torch, kiln
        self.dev = torch.device("cuda", device)
        self.gen = torch.Generator(device=self.dev)
        self.gen.manual_seed(seed)
        self.tdtype = {F32: torch.float32, F16: torch.float16, BF16: torch.bfloat16}

    def randn(self, shape, dtype, scale=1.0):
        t = self.torch.randn(shape, generator=self.gen, device=self.dev, dtype=self.torch.float32) * scale
        return t.to(self.tdtype[dtype])

    def randint(self, high, shape, dtype):
        return self.torch.randint(0, max(high, 1), shape, generator=self.gen, device=self.dev, dtype=dtype)


def f64(t):
    """torch tensor (any float dtype, any device) -> float64 numpy."""
    return t.detach().double().cpu().numpy()


def from_kiln(torch, arr):
    return torch.from_dlpack(arr)


def compare(got, ref, rtol, atol):
    """(ok, max_abs_err, worst excess over the tolerance, nonfinite count)."""
    if got.shape != ref.shape:
        return False, math.inf, math.inf, 0
    if got.size == 0:
        return True, 0.0, 0.0, 0
    nonfinite = int(np.sum(~np.isfinite(got)))
    err = np.abs(got - ref)
    excess = err - (atol + rtol * np.abs(ref))
    worst = float(np.nanmax(excess)) if nonfinite == 0 else math.inf
    return bool(nonfinite == 0 and worst <= 0), float(np.nanmax(err)), worst, nonfinite


class Results:
    def __init__(self):
        self.cases = []
        self.failures = []

    def record(self, case):
        self.cases.append(case)
        if not case["ok"]:
            self.failures.append(case)


def run_case(res, op, dtype, shape, fn):
    """fn() -> (kiln64, torch64, ref64, rtol, atol[, extra])"""
    case = {"op": op, "dtype": dtype, "shape": list(shape) if isinstance(shape, tuple) else shape}
    try:
        kiln64, torch64, ref64, rtol, atol = fn()
        ok, err, worst, nonfinite = compare(kiln64, ref64, rtol, atol)
        atol_out = float(np.max(atol)) if np.size(atol) else 0.0
        case.update(rtol=rtol, atol=atol_out, max_abs_err_vs_ref=err, tol_excess=worst, nonfinite=nonfinite)
        if torch64 is not None:
            t_ok, t_err, _, _ = compare(torch64, ref64, rtol, atol)
            kt_ok, kt_err, _, _ = compare(kiln64, torch64, 0.0, 0.0)
            bound = 2 * (atol + rtol * np.abs(ref64)) if ref64.size else 0
            agree = bool(ref64.size == 0 or np.all(np.abs(kiln64 - torch64) <= bound))
            case.update(max_abs_diff_vs_torch=kt_err, torch_max_abs_err_vs_ref=t_err, torch_within_tol=t_ok,
                        agrees_with_torch=agree)
            # Disagreement only counts against kiln when torch itself is within tolerance.
            if not agree and t_ok:
                ok = False
        case["ok"] = ok
    except Exception as e:  # one broken case never stops the run
        case.update(ok=False, error=f"{type(e).__name__}: {e}", traceback=traceback.format_exc()[-2000:])
    res.record(case)


# ---- the op tests -------------------------------------------------------------------------

def check_elementwise(ctx, res, shapes):
    torch, kiln = ctx.torch, ctx.kiln
    F = torch.nn.functional
    for dtype in DTYPES:
        for shape in shapes:
            def vecadd(shape=shape, dtype=dtype):
                a, b = ctx.randn(shape, dtype), ctx.randn(shape, dtype)
                out = from_kiln(torch, kiln.vecadd(a, b))
                return f64(out), f64(a + b), ref_vecadd(f64(a), f64(b)), *TOL["vecadd"][dtype]
            run_case(res, "vecadd", dtype, shape, vecadd)

            def axpby(shape=shape, dtype=dtype):
                x, y = ctx.randn(shape, dtype), ctx.randn(shape, dtype)
                alpha, beta = 0.75, -1.25
                out = from_kiln(torch, kiln.axpby(x, y, alpha, beta))
                t = torch.add(x * alpha, y, alpha=beta)
                return f64(out), f64(t), ref_axpby(f64(x), f64(y), alpha, beta), *TOL["axpby"][dtype]
            run_case(res, "axpby", dtype, shape, axpby)

            def silu_mul(shape=shape, dtype=dtype):
                g, u = ctx.randn(shape, dtype, 3.0), ctx.randn(shape, dtype)
                out = from_kiln(torch, kiln.silu_mul(g, u))
                return f64(out), f64(F.silu(g) * u), ref_silu_mul(f64(g), f64(u)), *TOL["silu_mul"][dtype]
            run_case(res, "silu_mul", dtype, shape, silu_mul)


def check_rows(ctx, res, shapes):
    torch, kiln = ctx.torch, ctx.kiln
    F = torch.nn.functional
    for dtype in DTYPES:
        for i, shape in enumerate(shapes):
            def rmsnorm(shape=shape, dtype=dtype):
                x, w = ctx.randn(shape, dtype), ctx.randn(shape[-1:], dtype)
                eps = 1e-6
                out = from_kiln(torch, kiln.rmsnorm(x, w, eps))
                t = F.rms_norm(x, shape[-1:], w, eps) if hasattr(F, "rms_norm") else None
                return f64(out), None if t is None else f64(t), ref_rmsnorm(f64(x), f64(w), eps), *TOL["rmsnorm"][dtype]
            run_case(res, "rmsnorm", dtype, shape, rmsnorm)

            # Every third shape gets large logits: the max subtraction must keep it finite.
            scale = 40.0 if i % 3 == 2 else 1.0
            for op, fn in (("softmax", kiln.softmax), ("cudnn_softmax", getattr(kiln, "cudnn_softmax", None))):
                if fn is None:
                    continue

                def softmax(shape=shape, dtype=dtype, fn=fn, op=op):
                    x = ctx.randn(shape, dtype, scale)
                    out = from_kiln(torch, fn(x))
                    return f64(out), f64(torch.softmax(x, dim=-1)), ref_softmax(f64(x)), *TOL[op][dtype]
                run_case(res, op, dtype, shape, softmax)


def check_rust_kernels(ctx, res, elem_shapes, row_shapes):
    """kiln.rs.* (the kernels written in Rust, kernels/rust) vs the float64 reference with the
    C++ ops' tolerances; the second operand of each comparison is the C++ twin's output (so
    `agrees_with_torch` reads "agrees with the C++ twin" for these rows)."""
    torch, kiln = ctx.torch, ctx.kiln
    for dtype in DTYPES:
        for shape in elem_shapes:
            def vecadd(shape=shape, dtype=dtype):
                a, b = ctx.randn(shape, dtype), ctx.randn(shape, dtype)
                out = from_kiln(torch, kiln.rs.vecadd(a, b))
                twin = from_kiln(torch, kiln.vecadd(a, b))
                return f64(out), f64(twin), ref_vecadd(f64(a), f64(b)), *TOL["vecadd"][dtype]
            run_case(res, "rs.vecadd", dtype, shape, vecadd)

            def silu_mul(shape=shape, dtype=dtype):
                g, u = ctx.randn(shape, dtype, 3.0), ctx.randn(shape, dtype)
                out = from_kiln(torch, kiln.rs.silu_mul(g, u))
                twin = from_kiln(torch, kiln.silu_mul(g, u))
                return f64(out), f64(twin), ref_silu_mul(f64(g), f64(u)), *TOL["silu_mul"][dtype]
            run_case(res, "rs.silu_mul", dtype, shape, silu_mul)
        for i, shape in enumerate(row_shapes):
            def rmsnorm(shape=shape, dtype=dtype):
                x, w = ctx.randn(shape, dtype), ctx.randn(shape[-1:], dtype)
                out = from_kiln(torch, kiln.rs.rmsnorm(x, w, 1e-6))
                twin = from_kiln(torch, kiln.rmsnorm(x, w, 1e-6))
                return f64(out), f64(twin), ref_rmsnorm(f64(x), f64(w), 1e-6), *TOL["rmsnorm"][dtype]
            run_case(res, "rs.rmsnorm", dtype, shape, rmsnorm)

            # As for the C++ softmax: every third shape gets large logits.
            def softmax(shape=shape, dtype=dtype, scale=40.0 if i % 3 == 2 else 1.0):
                x = ctx.randn(shape, dtype, scale)
                out = from_kiln(torch, kiln.rs.softmax(x))
                twin = from_kiln(torch, kiln.softmax(x))
                return f64(out), f64(twin), ref_softmax(f64(x)), *TOL["softmax"][dtype]
            run_case(res, "rs.softmax", dtype, shape, softmax)


def torch_rope(torch, x, pos, theta):
    """HF transformers' Llama rotary embedding (cos/sin in float32, applied in x's dtype)."""
    d = x.shape[-1]
    inv = 1.0 / (theta ** (torch.arange(0, d, 2, device=x.device, dtype=torch.float32) / d))
    freqs = pos.to(torch.float32)[:, None] * inv[None, :]
    emb = torch.cat([freqs, freqs], dim=-1)
    cos, sin = emb.cos()[:, None, :].to(x.dtype), emb.sin()[:, None, :].to(x.dtype)
    x1, x2 = x[..., : d // 2], x[..., d // 2:]
    rot = torch.cat([-x2, x1], dim=-1)
    return x * cos + rot * sin


def check_rope(ctx, res, shapes):
    torch, kiln = ctx.torch, ctx.kiln
    theta = 10000.0
    for dtype in DTYPES:
        for i, shape in enumerate(shapes):
            mode = ("offset", "int32", "int64")[i % 3]

            def rope(shape=shape, dtype=dtype, mode=mode):
                x = ctx.randn(shape, dtype)
                t = shape[0]
                if mode == "offset":
                    offset = 17 * (1 + shape[0] % 5)
                    pos = torch.arange(offset, offset + t, device=ctx.dev, dtype=torch.int64)
                    out = kiln.rope(x, offset=offset, theta=theta)
                else:
                    pos = ctx.randint(4096, (t,), torch.int32 if mode == "int32" else torch.int64)
                    out = kiln.rope(x, pos, theta=theta)
                out = from_kiln(torch, out)
                x64, p64 = f64(x), pos.cpu().numpy().astype(np.float64)
                ref = ref_rope(x64, pos.cpu().numpy(), theta)
                half = shape[2] // 2
                pair = np.sqrt(x64[..., :half] ** 2 + x64[..., half:] ** 2)
                rtol, atol = TOL["rope"][dtype]
                atol = atol + ROPE_ANGLE_SLACK * p64[:, None, None] * np.concatenate([pair, pair], axis=-1)
                return f64(out), f64(torch_rope(torch, x, pos, theta)), ref, rtol, atol
            run_case(res, "rope", dtype, list(shape) + [mode], rope)


def check_embedding(ctx, res, shapes):
    torch, kiln = ctx.torch, ctx.kiln
    for dtype in DTYPES:
        for i, (vocab, dim, ids_shape) in enumerate(shapes):
            idt = torch.int32 if i % 2 else torch.int64

            def embedding(vocab=vocab, dim=dim, ids_shape=ids_shape, dtype=dtype, idt=idt):
                table = ctx.randn((vocab, dim), dtype)
                ids = ctx.randint(vocab, ids_shape, idt)
                out = from_kiln(torch, kiln.embedding(table, ids))
                t = torch.nn.functional.embedding(ids.long(), table)
                return f64(out), f64(t), ref_embedding(f64(table), ids.cpu().numpy()), *TOL["embedding"][dtype]
            run_case(res, "embedding", dtype, [vocab, dim, list(ids_shape), str(idt).split(".")[-1]], embedding)


def check_matmul(ctx, res, shapes):
    torch, kiln = ctx.torch, ctx.kiln
    if not hasattr(kiln, "matmul"):
        return
    for dtype in DTYPES:
        for m, k, n in shapes:
            def matmul(m=m, k=k, n=n, dtype=dtype):
                a, b = ctx.randn((m, k), dtype), ctx.randn((k, n), dtype)
                out = from_kiln(torch, kiln.matmul(a, b))
                rtol, _ = TOL["matmul"][dtype]
                a64, b64 = f64(a), f64(b)
                return f64(out), f64(a @ b), ref_matmul(a64, b64), rtol, matmul_atol(a64, b64, dtype)
            run_case(res, "matmul", dtype, [m, k, n], matmul)


def check_all_reduce(ctx, res):
    """NCCL all-reduce over every visible GPU (one GPU: the one-rank path). With several GPUs
    it runs once with cuda:0 current and once with the last device current: the inputs on the
    other devices are imported through DLPack whatever the current device is."""
    torch, kiln = ctx.torch, ctx.kiln
    if not hasattr(kiln, "all_reduce_sum"):
        return
    n = torch.cuda.device_count()
    currents = [0] if n == 1 else [0, n - 1]
    for current in currents:
        for dtype in DTYPES:
            for shape in [(1,), (7,), (1000,), (4097,), (3, 5, 7), (1 << 20,), (0,)]:
                def all_reduce(shape=shape, dtype=dtype, current=current):
                    with torch.cuda.device(current):
                        return _all_reduce_case(ctx, n, shape, dtype, current)
                label = f"all_reduce_sum[{n} GPU]" if n == 1 else f"all_reduce_sum[{n} GPU, current cuda:{current}]"
                run_case(res, label, dtype, shape, all_reduce)


def _all_reduce_case(ctx, n, shape, dtype, current):
    torch, kiln = ctx.torch, ctx.kiln
    xs = []
    for d in range(n):
        g = torch.Generator(device=f"cuda:{d}")
        g.manual_seed(100 + d)
        xs.append(torch.randn(shape, generator=g, device=f"cuda:{d}").to(ctx.tdtype[dtype]))
    outs = kiln.all_reduce_sum(xs)
    assert torch.cuda.current_device() == current, \
        f"kiln left cuda:{torch.cuda.current_device()} current (was cuda:{current})"
    assert len(outs) == n, f"{len(outs)} outputs for {n} GPUs"
    ref = sum(f64(x) for x in xs)
    got = [f64(torch.from_dlpack(o)) for o in outs]
    for d, o in enumerate(outs):
        # torch tensors in: torch tensors out (o.device a torch.device); else kiln.Arrays (int)
        where = o.device.index if isinstance(o, torch.Tensor) else o.device
        assert where == d, f"output {d} is on cuda:{where}"
    # All ranks must hold the identical sum; compare rank 0 with the reference.
    for g in got[1:]:
        assert np.array_equal(g, got[0]), "ranks disagree"
    rtol, atol = ELEMENTWISE_TOL[dtype]
    return got[0], None, ref, rtol * n, atol * n


def check_multi_gpu(ctx, res):
    """Single-device ops on every device, with another device current: kiln imports the
    inputs where they live (DLPack with the array's own device made current for the export),
    computes on that device, returns the result there, and leaves torch's current device
    alone. Needs >= 2 GPUs (else nothing is recorded)."""
    torch, kiln = ctx.torch, ctx.kiln
    n = torch.cuda.device_count()
    if n < 2:
        return
    for d in range(n):
        for current in sorted({0, n - 1} - {d}) or [0]:
            def case(d=d, current=current):
                with torch.cuda.device(current):
                    dev = torch.device(f"cuda:{d}")
                    g = torch.Generator(device=dev)
                    g.manual_seed(7 + d)
                    a = torch.randn((4097,), generator=g, device=dev)
                    b = torch.randn((4097,), generator=g, device=dev)
                    out = kiln.vecadd(a, b)
                    assert torch.cuda.current_device() == current, \
                        f"kiln left cuda:{torch.cuda.current_device()} current (was cuda:{current})"
                    # torch tensors in: a torch tensor out (torch.device), else a kiln.Array (int)
                    where = out.device.index if isinstance(out, torch.Tensor) else out.device
                    assert where == d, f"result on cuda:{where}, inputs on cuda:{d}"
                    t = torch.from_dlpack(out)
                    assert t.device == dev, f"torch sees the result on {t.device}"
                    assert torch.equal(t, a + b), "wrong sum"
                    m = ctx.randn((33, 65), F32).to(dev)
                    mm = from_kiln(torch, kiln.matmul(m, m.t().contiguous())) if hasattr(kiln, "matmul") else None
                    if mm is not None:
                        ref = f64(m) @ f64(m).T
                        assert np.allclose(f64(mm), ref, rtol=1e-4, atol=1e-3), "matmul on another device"
                    h = torch.from_dlpack(kiln.vecadd(np.ones(5, np.float32), np.ones(5, np.float32)))
                    assert h.device == torch.device("cuda:0")  # host inputs go to device 0
                    assert torch.cuda.current_device() == current
            label = f"inputs on cuda:{d}, current cuda:{current}"
            c = {"op": "multi_gpu", "dtype": F32, "shape": label}
            try:
                case()
                c["ok"] = True
            except Exception as e:  # noqa: BLE001
                c.update(ok=False, error=f"{type(e).__name__}: {e}", traceback=traceback.format_exc()[-2000:])
            res.record(c)


def check_contract(ctx, res):
    """DLPack in and out, host arrays, streams, lifetimes, the error classes."""
    torch, kiln = ctx.torch, ctx.kiln

    def check(name, fn):
        case = {"op": "contract", "dtype": "-", "shape": name}
        try:
            fn()
            case["ok"] = True
        except Exception as e:
            case.update(ok=False, error=f"{type(e).__name__}: {e}", traceback=traceback.format_exc()[-2000:])
        res.record(case)

    # kiln.Array's own contract: the extension's functions return one for any input
    # (kiln.<op> returns torch tensors for torch inputs: test_torch_native.py).
    raw = kiln._kiln

    def zero_copy_out():
        a = ctx.randn((1000,), F32)
        out = raw.vecadd(a, a)
        t = torch.from_dlpack(out)
        assert t.data_ptr() == out.data_ptr, "torch.from_dlpack copied kiln's result"
        assert t.device == ctx.dev and t.dtype == torch.float32 and tuple(t.shape) == out.shape
        assert torch.equal(t, a + a)
    check("torch.from_dlpack(kiln.Array) is zero-copy", zero_copy_out)

    def zero_copy_in():
        # kiln reads the producer's memory in place: a view with a storage offset must work.
        big = ctx.randn((1001,), F32)
        out = torch.from_dlpack(kiln.vecadd(big[1:], big[:-1]))
        assert torch.equal(out, big[1:] + big[:-1])
    check("device inputs used in place (byte offset honoured)", zero_copy_in)

    def lifetime():
        a = ctx.randn((1 << 16,), F16)
        out = raw.vecadd(a, a)
        t = torch.from_dlpack(out)
        del out
        gc.collect()
        junk = [torch.empty(1 << 20, device=ctx.dev).fill_(7) for _ in range(8)]
        assert torch.equal(t, a + a), "result changed after the kiln.Array was dropped"
        del junk
    check("torch tensor keeps kiln's memory alive", lifetime)

    def host_inputs():
        x = np.arange(37, dtype=np.float32)
        out = kiln.vecadd(x, x)
        assert out.device == 0
        assert np.array_equal(out.numpy(), x + x)
        assert np.array_equal(np.asarray(out), x + x)
        b = kiln.asarray(ctx.randn((5, 3), BF16))
        assert b.dtype == "bfloat16" and b.numpy().dtype == np.float32
    check("numpy inputs are copied; .numpy()/np.asarray copy back (bf16 as float32)", host_inputs)

    def other_stream():
        a = ctx.randn((1 << 20,), F32)
        out = raw.vecadd(a, a)
        s = torch.cuda.Stream(device=ctx.dev)
        with torch.cuda.stream(s):
            t = torch.from_dlpack(out)  # passes s: kiln makes s wait for its stream
            r = t * 1.0
        s.synchronize()
        assert torch.equal(r, a + a)
    check("__dlpack__(stream=<other stream>) orders kiln's work first", other_stream)

    def cupy_interop():
        try:
            import cupy as cp
        except Exception as e:  # noqa: BLE001
            print(f"  (cupy interop skipped: {e})")
            return
        with cp.cuda.Device(ctx.dev.index):
            x = cp.arange(1001, dtype=cp.float32)
            out = cp.from_dlpack(kiln.vecadd(x, x))
            assert bool(cp.all(out == 2 * x))
    check("cupy arrays in and out", cupy_interop)

    def errors():
        a, b = ctx.randn((4,), F32), ctx.randn((5,), F32)
        for call, cls, builtin in [
            (lambda: kiln.vecadd(a, b), kiln.ShapeError, ValueError),
            (lambda: kiln.vecadd(a, ctx.randn((4,), F16)), kiln.DTypeError, TypeError),
            (lambda: kiln.embedding_checked(ctx.randn((10, 4), F32), torch.tensor([3, 10], device=ctx.dev)),
             kiln.IdOutOfRangeError, IndexError),
            (lambda: kiln.softmax(ctx.randn((4, 6), F32).t()), ValueError, ValueError),
            (lambda: kiln.vecadd([1.0], [2.0]), TypeError, TypeError),
            (lambda: kiln.vecadd(torch.ones(3, dtype=torch.float64, device=ctx.dev),
                                 torch.ones(3, dtype=torch.float64, device=ctx.dev)), TypeError, TypeError),
        ]:
            try:
                call()
            except cls as e:
                assert isinstance(e, builtin), f"{type(e).__name__} is not a {builtin.__name__}"
            else:
                raise AssertionError(f"expected {cls.__name__}")
    check("errors: ShapeError, DTypeError, IdOutOfRangeError, non-contiguous, non-DLPack, float64", errors)

    def libraries():
        libs = kiln.runtime_libraries()
        bad = {k: v for k, v in libs.items() if v["status"] not in ("loaded", "already loaded")}
        assert not bad, f"NVIDIA libraries not preloaded: {bad}"
    check("NVIDIA libraries preloaded (site-packages/nvidia/*/lib)", libraries)

    def loaded_versions():
        # Issue 18: the versions actually in the process (torch imported first, so its copies
        # are the ones kiln adopts), each inside kiln's declared range, one copy per soname.
        loaded = kiln.build_info()["loaded_libraries"]
        bad = {k: v for k, v in loaded.items() if "error" in v}
        assert not bad, f"runtime libraries unusable: {bad}"
        with open("/proc/self/maps") as f:
            mapped = {line.split()[-1] for line in f if line.rstrip().endswith(tuple(loaded))}
        for soname, lib in loaded.items():
            files = sorted({os.path.realpath(m) for m in mapped if os.path.basename(m) == soname})
            assert len(files) == 1, f"{soname}: {len(files)} copies mapped: {files}"
            assert os.path.realpath(lib["path"]) == files[0], (soname, lib["path"], files)
        print("    loaded: " + "; ".join(
            f"{k} {v['version']} ({'already loaded' if v['already_loaded'] else 'loaded by kiln'}, {v['path']}, declared {v['requires']})"
            for k, v in sorted(loaded.items())), flush=True)
    check("build_info()['loaded_libraries']: cuBLAS/cuDNN/NCCL versions in range, one copy each", loaded_versions)


def test_all():
    """pytest entry point: every check, full shapes."""
    torch, kiln = _imports()
    res = _run(torch, kiln, quick=False)
    assert not res.failures, json.dumps(res.failures[:5], indent=1)


def _imports():
    import torch

    if not torch.cuda.is_available():
        raise RuntimeError("torch sees no CUDA device")
    import kiln

    return torch, kiln


def _run(torch, kiln, quick, only=None):
    ctx = Ctx(torch, kiln)
    res = Results()
    pick = (lambda s: s[::3]) if quick else (lambda s: s)
    t0 = time.time()
    for name, fn in [
        ("contract", lambda: check_contract(ctx, res)),
        ("elementwise", lambda: check_elementwise(ctx, res, pick(ELEMENTWISE_SHAPES))),
        ("rows", lambda: check_rows(ctx, res, pick(ROW_SHAPES))),
        ("rust", lambda: check_rust_kernels(ctx, res, pick(ELEMENTWISE_SHAPES), pick(ROW_SHAPES))),
        ("rope", lambda: check_rope(ctx, res, pick(ROPE_SHAPES))),
        ("embedding", lambda: check_embedding(ctx, res, pick(EMBEDDING_SHAPES))),
        ("matmul", lambda: check_matmul(ctx, res, pick(MATMUL_SHAPES))),
        ("streams", lambda: check_streams.run(ctx, res)),
        ("multi_gpu", lambda: check_multi_gpu(ctx, res)),
        ("all_reduce", lambda: check_all_reduce(ctx, res)),
    ]:
        if only and name not in only:
            continue
        before = len(res.cases)
        fails_before = len(res.failures)
        t = time.time()
        try:
            fn()
        except Exception as e:  # a whole group failing to run is itself a failure
            res.record({"op": name, "dtype": "-", "shape": "-", "ok": False, "error": f"{type(e).__name__}: {e}",
                        "traceback": traceback.format_exc()[-2000:]})
        print(f"  {name:<12} {len(res.cases) - before:4d} cases, {len(res.failures) - fails_before} failed "
              f"({time.time() - t:.1f} s)", flush=True)
    print(f"  total {len(res.cases)} cases, {len(res.failures)} failed ({time.time() - t0:.1f} s)")
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--quick", action="store_true", help="every third shape only")
    ap.add_argument("--only", help="comma-separated groups (contract, elementwise, rows, rope, embedding, "
                    "matmul, streams, multi_gpu, all_reduce)")
    args = ap.parse_args()
    doc = {"tolerances": {op: {d: {"rtol": r, "atol": a} for d, (r, a) in t.items()} for op, t in TOL.items()},
           "tolerance_rule": "|kiln - ref64| <= atol + rtol*|ref64|; matmul atol is per unit of k; "
                             "agreement with torch: |kiln - torch| <= 2*(atol + rtol*|ref64|)"}
    try:
        torch, kiln = _imports()
    except Exception as e:
        doc.update(status="skipped", reason=f"{type(e).__name__}: {e}")
        print(f"skipped: {doc['reason']}")
        json.dump(doc, open(args.out, "w"), indent=1)
        return 2
    doc["environment"] = {"torch": torch.__version__, "kiln": kiln.__version__, "gpu": torch.cuda.get_device_name(0),
                          "gpus": torch.cuda.device_count(), "runtime_libraries": kiln.runtime_libraries()}
    res = _run(torch, kiln, args.quick, set(args.only.split(",")) if args.only else None)
    by_op = {}
    for c in res.cases:
        key = f"{c['op']}/{c['dtype']}"
        s = by_op.setdefault(key, {"cases": 0, "failed": 0, "max_abs_err_vs_ref": 0.0, "max_abs_diff_vs_torch": 0.0})
        s["cases"] += 1
        s["failed"] += 0 if c["ok"] else 1
        for k in ("max_abs_err_vs_ref", "max_abs_diff_vs_torch"):
            if isinstance(c.get(k), float) and math.isfinite(c[k]):
                s[k] = max(s[k], c[k])
    doc.update(status="passed" if not res.failures else "failed", cases=len(res.cases), failed=len(res.failures),
               by_op=by_op, failures=res.failures[:200], all_cases=res.cases)
    json.dump(doc, open(args.out, "w"), indent=1, default=str)
    for f in res.failures[:20]:
        print(f"  FAIL {f['op']} {f['dtype']} {f['shape']}: {f.get('error') or f.get('tol_excess')}")
    return 0 if not res.failures else 1


if __name__ == "__main__":
    sys.exit(main())
