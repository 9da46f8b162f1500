#!/usr/bin/env python3
"""kiln's memory-bound ops against a device-to-device copy and against torch, in one run.

    python3 bench_torch.py --out RESULT.json [--table TABLE.md] [--quick]

For each op, dtype and size: the achieved bandwidth (bytes the op must read + write, over its
time) as a fraction of a device-to-device copy moving the same number of bytes, measured in the
same run (torch's `dst.copy_(src)`; target >= 0.85 at the large size), and kiln's time over
torch's time for the same op (target <= 1.0).

Timing: CUDA events around `reps` back-to-back calls, after `torch.cuda._sleep` has filled the
queue so that Python's launch overhead does not show as GPU idle time (it still shows when it
exceeds the GPU time); warm-up first; the median of `trials`. kiln and torch both run on the
legacy default stream. Every call allocates its output, in kiln and in torch alike.

Then the decode-size section (bench_decode.py): 1-token shapes, 1-64 embedding ids and the
small size, kiln vs torch per call, eager and inside CUDA graphs, plus the host-side
breakdown of one call (target kiln/torch <= 1.0 in both modes; --decode-only runs just that).

torch baselines: the way a model written in torch does the op (vecadd: a + b; axpby:
torch.add(x * alpha, y, alpha=beta); silu_mul: F.silu(g) * u; rmsnorm: F.rms_norm; softmax:
torch.softmax; rope: HF Llama's x * cos + rotate_half(x) * sin with cos/sin precomputed outside
the timed region; embedding: F.embedding).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import traceback

BW_TARGET = 0.85
TORCH_TARGET = 1.0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--table")
    ap.add_argument("--quick", action="store_true", help="one size, fewer trials")
    ap.add_argument("--elements", type=int, help="one size of this many elements (a multiple of 4096; smoke runs)")
    ap.add_argument("--decode-only", action="store_true", help="only the decode-size section (bench_decode.py)")
    args = ap.parse_args()
    doc = {"targets": {"fraction_of_copy_at_large": BW_TARGET, "kiln_over_torch": TORCH_TARGET}}
    try:
        import torch

        if not torch.cuda.is_available():
            raise RuntimeError("torch sees no CUDA device")
        import kiln
    except Exception as e:
        doc.update(status="skipped", reason=f"{type(e).__name__}: {e}")
        print(f"skipped: {doc['reason']}")
        json.dump(doc, open(args.out, "w"), indent=1)
        return 2

    F = torch.nn.functional
    dev = torch.device("cuda", 0)
    doc["environment"] = {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__, "kiln": kiln.__version__}
    tdt = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
    trials = 5 if args.quick else 9
    sizes = [("large", 1 << 26)] if args.quick else [("small", 1 << 20), ("medium", 1 << 24), ("large", 1 << 26)]
    if args.elements:
        sizes = [("custom", args.elements)]

    def timed(fn, reps):
        """Median milliseconds per call."""
        for _ in range(3):
            fn()
        torch.cuda.synchronize()
        times = []
        for _ in range(trials):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            torch.cuda._sleep(200_000 * reps)  # ~0.1 ms per call of queued GPU work to hide launches
            start.record()
            for _ in range(reps):
                fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) / reps)
        return statistics.median(times)

    def cases(dtype, n):
        """(op, shape, bytes moved, kiln fn, torch fn) for n elements of the main operand."""
        dt = tdt[dtype]
        es = torch.empty(0, dtype=dt).element_size()
        g = torch.Generator(device=dev)
        g.manual_seed(7)
        rnd = lambda *s: torch.randn(*s, generator=g, device=dev, dtype=torch.float32).to(dt)  # noqa: E731
        a, b = rnd(n), rnd(n)
        cols = 4096
        rows = n // cols
        x2 = a.view(rows, cols)
        w = rnd(cols)
        heads, hd = 32, 128
        tokens = n // (heads * hd)
        x3 = a.view(tokens, heads, hd)
        inv = 1.0 / (10000.0 ** (torch.arange(0, hd, 2, device=dev, dtype=torch.float32) / hd))
        freqs = torch.arange(tokens, device=dev, dtype=torch.float32)[:, None] * inv[None, :]
        emb = torch.cat([freqs, freqs], dim=-1)
        cos, sin = emb.cos()[:, None, :].to(dt), emb.sin()[:, None, :].to(dt)

        def torch_rope():
            x1, x2_ = x3[..., : hd // 2], x3[..., hd // 2:]
            return x3 * cos + torch.cat([-x2_, x1], dim=-1) * sin

        vocab, dim = 32000, 4096
        table = rnd(vocab, dim)
        n_ids = n // dim
        ids = torch.randint(0, vocab, (n_ids,), generator=g, device=dev, dtype=torch.int64)
        return [
            ("vecadd", [n], 3 * n * es, lambda: kiln.vecadd(a, b), lambda: a + b),
            ("axpby", [n], 3 * n * es, lambda: kiln.axpby(a, b, 0.5, 2.0), lambda: torch.add(a * 0.5, b, alpha=2.0)),
            ("silu_mul", [n], 3 * n * es, lambda: kiln.silu_mul(a, b), lambda: F.silu(a) * b),
            ("rmsnorm", [rows, cols], (2 * rows * cols + cols) * es, lambda: kiln.rmsnorm(x2, w, 1e-6),
             lambda: F.rms_norm(x2, (cols,), w, 1e-6)),
            # The kernels written in Rust (kernels/rust), against the same torch baselines.
            ("rs.vecadd", [n], 3 * n * es, lambda: kiln.rs.vecadd(a, b), lambda: a + b),
            ("rs.silu_mul", [n], 3 * n * es, lambda: kiln.rs.silu_mul(a, b), lambda: F.silu(a) * b),
            ("rs.rmsnorm", [rows, cols], (2 * rows * cols + cols) * es, lambda: kiln.rs.rmsnorm(x2, w, 1e-6),
             lambda: F.rms_norm(x2, (cols,), w, 1e-6)),
            ("softmax", [rows, cols], 2 * rows * cols * es, lambda: kiln.softmax(x2), lambda: torch.softmax(x2, -1)),
            ("rs.softmax", [rows, cols], 2 * rows * cols * es, lambda: kiln.rs.softmax(x2), lambda: torch.softmax(x2, -1)),
            ("rope", [tokens, heads, hd], 2 * n * es, lambda: kiln.rope(x3, offset=0), torch_rope),
            ("embedding", [n_ids, dim], 2 * n_ids * dim * es + n_ids * 8, lambda: kiln.embedding(table, ids),
             lambda: F.embedding(ids, table)),
        ]

    rows_out = []
    copy_cache = {}

    def copy_ms(nbytes, reps):
        """A D2D copy moving nbytes in total (nbytes/2 read, nbytes/2 written)."""
        key = nbytes // 2
        if key not in copy_cache:
            src = torch.empty(key, dtype=torch.uint8, device=dev)
            dst = torch.empty_like(src)
            copy_cache[key] = timed(lambda: dst.copy_(src), reps)
            del src, dst
        return copy_cache[key]

    t0 = time.time()
    if args.decode_only:
        sizes = []
    for label, n in sizes:
        reps = 50 if n <= (1 << 20) else 20
        for dtype in ("float32", "float16", "bfloat16"):
            try:
                ops = cases(dtype, n)
            except Exception as e:
                rows_out.append({"op": "setup", "dtype": dtype, "size": label, "error": f"{type(e).__name__}: {e}"})
                continue
            for op, shape, nbytes, kfn, tfn in ops:
                row = {"op": op, "dtype": dtype, "size": label, "shape": shape, "bytes": nbytes}
                try:
                    k = timed(kfn, reps)
                    t = timed(tfn, reps)
                    c = copy_ms(nbytes, reps)
                    row.update(kiln_ms=k, torch_ms=t, copy_ms=c, kiln_GBps=nbytes / k / 1e6, torch_GBps=nbytes / t / 1e6,
                               copy_GBps=nbytes / c / 1e6, fraction_of_copy=c / k, kiln_over_torch=k / t)
                    if label == "large":
                        row["meets_bandwidth_target"] = c / k >= BW_TARGET
                        row["meets_torch_target"] = k / t <= TORCH_TARGET
                except Exception as e:
                    row["error"] = f"{type(e).__name__}: {e}"
                    row["traceback"] = traceback.format_exc()[-1500:]
                rows_out.append(row)
                print(_line(row), flush=True)
            del ops
            torch.cuda.empty_cache()

    # Decode sizes: per-call cost, eager and in CUDA graphs (bench_decode.py).
    import bench_decode

    decode_all = bench_decode.run(torch, kiln) if not args.elements else []
    # The launch-floor rows (kernels that do nothing) are the scale the ops are read against,
    # not cases with a target.
    floor = [r for r in decode_all if r["op"] == "launch floor"]
    decode = [r for r in decode_all if r["op"] != "launch floor"]
    doc["decode_breakdown_host_us"] = bench_decode.breakdown(torch, kiln) if not args.elements else {}
    decode_ok = [r for r in decode if "error" not in r]

    # Compute-bound extras, reported for completeness (not memory-bound, no copy fraction).
    extras = []
    for name, make in ([] if args.decode_only else [
        ("matmul bf16 8192^3", lambda: _matmul_case(torch, kiln, dev, torch.bfloat16, 8192)),
        ("matmul f16 4096^3", lambda: _matmul_case(torch, kiln, dev, torch.float16, 4096)),
        ("cudnn_softmax f32 16384x4096", lambda: _cudnn_case(torch, kiln, dev)),
    ]):
        try:
            kfn, tfn, flops = make()
            k, t = timed(kfn, 5), timed(tfn, 5)
            extras.append({"case": name, "kiln_ms": k, "torch_ms": t, "kiln_over_torch": k / t,
                           **({"kiln_TFLOPs": flops / k / 1e9, "torch_TFLOPs": flops / t / 1e9} if flops else {})})
        except Exception as e:
            extras.append({"case": name, "error": f"{type(e).__name__}: {e}"})
        print(f"  {extras[-1]}", flush=True)

    large = [r for r in rows_out if r.get("size") == "large" and "kiln_ms" in r]
    errors = [r for r in rows_out if "error" in r]
    decode_met = all(r["meets_target"] for r in decode_ok) and len(decode_ok) == len(decode)
    if args.elements:  # a smoke run: no targets at a custom size
        status = "failed" if errors else "smoke"
    elif args.decode_only:
        status = "passed" if decode and decode_met else "failed"
    elif not large:
        status = "error"
    else:
        status = "passed" if all(r["meets_bandwidth_target"] and r["meets_torch_target"] for r in large) and decode_met else "failed"
    doc.update(
        status=status,
        seconds=time.time() - t0,
        copy_roof_GBps=max((r["copy_GBps"] for r in rows_out if "copy_GBps" in r), default=None),
        rows=rows_out,
        decode_rows=decode,
        launch_floor=floor,
        decode_summary={"cases": len(decode), "meet_target": sum(r.get("meets_target", False) for r in decode),
                        "errors": len(decode) - len(decode_ok)},
        extras=extras,
        large_summary={
            "cases": len(large),
            "meet_bandwidth_target": sum(r["meets_bandwidth_target"] for r in large),
            "meet_torch_target": sum(r["meets_torch_target"] for r in large),
            "errors": sum(1 for r in rows_out if "error" in r),
        },
    )
    table = _table(rows_out, extras, doc) + (bench_decode.table(decode_all) if decode else "")
    print(table)
    json.dump(doc, open(args.out, "w"), indent=1)
    if args.table:
        open(args.table, "w").write(table)
    return 0 if doc["status"] in ("passed", "smoke") else 1


def _matmul_case(torch, kiln, dev, dt, n):
    a = torch.randn(n, n, device=dev, dtype=dt)
    b = torch.randn(n, n, device=dev, dtype=dt)
    return (lambda: kiln.matmul(a, b)), (lambda: a @ b), 2.0 * n ** 3


def _cudnn_case(torch, kiln, dev):
    x = torch.randn(16384, 4096, device=dev)
    return (lambda: kiln.cudnn_softmax(x)), (lambda: torch.softmax(x, -1)), None


def _line(r):
    if "error" in r:
        return f"  {r['op']:<10} {r['dtype']:<9} {r['size']:<7} ERROR {r['error']}"
    return (f"  {r['op']:<10} {r['dtype']:<9} {r['size']:<7} kiln {r['kiln_ms'] * 1e3:8.1f} us  "
            f"{r['kiln_GBps']:7.0f} GB/s = {r['fraction_of_copy']:.2f} of copy   torch {r['torch_ms'] * 1e3:8.1f} us  "
            f"kiln/torch {r['kiln_over_torch']:.2f}")


def _rust_table(rows):
    """The Rust kernels (rs.OP) against their C++ twins (OP), same dtype and size, same harness."""
    by = {(r["op"], r["dtype"], r["size"]): r for r in rows if "kiln_ms" in r}
    out = ["Rust kernels vs their C++ twins (target: Rust/C++ time ≤ 1.05; fractions of D2D copy):", "",
           "| op | dtype | size | C++ µs | Rust µs | Rust/C++ | C++ frac | Rust frac |",
           "|---|---|---|---:|---:|---:|---:|---:|"]
    for (op, dt, size), rr in by.items():
        if not op.startswith("rs.") or (op[3:], dt, size) not in by:
            continue
        cr = by[(op[3:], dt, size)]
        ratio = rr["kiln_ms"] / cr["kiln_ms"]
        flag = "" if ratio <= 1.05 else " ✗"
        out.append(f"| {op[3:]} | {dt} | {size} | {cr['kiln_ms'] * 1e3:.1f} | {rr['kiln_ms'] * 1e3:.1f} | "
                   f"{ratio:.3f}{flag} | {cr['fraction_of_copy']:.2f} | {rr['fraction_of_copy']:.2f} |")
    return out + [""]


def _table(rows, extras, doc):
    out = [f"GPU: {doc['environment']['gpu']}, torch {doc['environment']['torch']}, kiln {doc['environment']['kiln']}",
           f"D2D copy roof (torch copy_, best size): {doc.get('copy_roof_GBps') or 0:.0f} GB/s",
           "",
           "| op | dtype | size | shape | kiln µs | kiln GB/s | fraction of D2D copy | torch µs | kiln/torch |",
           "|---|---|---|---|---:|---:|---:|---:|---:|"]
    for r in rows:
        if "kiln_ms" not in r:
            out.append(f"| {r['op']} | {r['dtype']} | {r.get('size')} | | error: {r.get('error')} | | | | |")
            continue
        flag_bw = "" if r.get("meets_bandwidth_target", True) else " ✗"
        flag_t = "" if r.get("meets_torch_target", True) else " ✗"
        out.append(f"| {r['op']} | {r['dtype']} | {r['size']} | {'x'.join(map(str, r['shape']))} | "
                   f"{r['kiln_ms'] * 1e3:.1f} | {r['kiln_GBps']:.0f} | {r['fraction_of_copy']:.2f}{flag_bw} | "
                   f"{r['torch_ms'] * 1e3:.1f} | {r['kiln_over_torch']:.2f}{flag_t} |")
    out += ["", f"Targets at the large size: fraction ≥ {BW_TARGET}, kiln/torch ≤ {TORCH_TARGET} (✗ = missed).", ""]
    out += _rust_table(rows)
    for e in extras:
        out.append(f"- {e}")
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    sys.exit(main())
