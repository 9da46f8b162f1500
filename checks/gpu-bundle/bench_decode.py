"""The decode-size section of bench_torch.py: per-call cost of kiln vs torch where LLM token
generation lives (1-token shapes, a few embedding ids, and the existing small size), eager and
inside CUDA graphs.

For every (op, dtype, shape), microseconds per call of:
  eager   GPU time per call with the launch queue kept full (torch.cuda._sleep first, as in
          bench_torch.py): what back-to-back calls cost on the GPU timeline, host hidden.
  graph   the same call captured 20 times into one torch.cuda.graph, replayed; time per call.
  host    wall-clock time of the Python call itself (no sleep; the GPU keeps up), i.e. the
          launch overhead a decode loop pays when the GPU is idle waiting for it.
each for kiln (result allocated per call), kiln with out= (no allocation) and torch (the way a
torch model writes the op; its caching allocator serves outputs). Targets: kiln/torch <= 1.0 in
eager and graph mode. The "floor" rows (1 element: one block, one thread doing one add) are the
launch floor of each side on this GPU, against which the decode sizes are read.
"""

from __future__ import annotations

import statistics
import time

GRAPH_CALLS = 20
DECODE_DTYPES = ("bfloat16", "float16", "float32")


def cases(torch, kiln, dev, dtype):
    """(op, size label, shape, kiln fn, kiln out= fn, torch fn)."""
    F = torch.nn.functional
    g = torch.Generator(device=dev)
    g.manual_seed(11)

    def rnd(*s):
        return torch.randn(*s, generator=g, device=dev, dtype=torch.float32).to(dtype)

    out = []

    def elementwise(label, n):
        a, b = rnd(n), rnd(n)
        o = torch.empty_like(a)
        out.extend([
            ("vecadd", label, [n], lambda: kiln.vecadd(a, b), lambda: kiln.vecadd(a, b, out=o), lambda: a + b),
            ("axpby", label, [n], lambda: kiln.axpby(a, b, 0.5, 2.0), lambda: kiln.axpby(a, b, 0.5, 2.0, out=o),
             lambda: torch.add(a * 0.5, b, alpha=2.0)),
            ("silu_mul", label, [n], lambda: kiln.silu_mul(a, b), lambda: kiln.silu_mul(a, b, out=o),
             lambda: F.silu(a) * b),
        ])

    def rows(label, r, c):
        x, w = rnd(r, c), rnd(c)
        o = torch.empty_like(x)
        out.extend([
            ("rmsnorm", label, [r, c], lambda: kiln.rmsnorm(x, w, 1e-6), lambda: kiln.rmsnorm(x, w, 1e-6, out=o),
             lambda: F.rms_norm(x, (c,), w, 1e-6)),
            ("softmax", label, [r, c], lambda: kiln.softmax(x), lambda: kiln.softmax(x, out=o),
             lambda: torch.softmax(x, -1)),
        ])

    def rope(label, tokens, heads=32, hd=128):
        x = rnd(tokens, heads, hd)
        o = torch.empty_like(x)
        inv = 1.0 / (10000.0 ** (torch.arange(0, hd, 2, device=dev, dtype=torch.float32) / hd))
        f = torch.arange(tokens, device=dev, dtype=torch.float32)[:, None] * inv[None, :]
        emb = torch.cat([f, f], -1)
        cos, sin = emb.cos()[:, None, :].to(dtype), emb.sin()[:, None, :].to(dtype)

        def torch_rope():
            x1, x2 = x[..., : hd // 2], x[..., hd // 2:]
            return x * cos + torch.cat([-x2, x1], dim=-1) * sin

        out.append(("rope", label, [tokens, heads, hd], lambda: kiln.rope(x, offset=0),
                    lambda: kiln.rope(x, offset=0, out=o), torch_rope))

    table = rnd(32000, 4096)

    def embedding(label, n):
        ids = torch.randint(0, 32000, (n,), generator=g, device=dev, dtype=torch.int64)
        o = torch.empty(n, 4096, device=dev, dtype=dtype)
        out.append(("embedding", label, [n, 4096], lambda: kiln.embedding(table, ids),
                    lambda: kiln.embedding(table, ids, out=o), lambda: F.embedding(ids, table)))

    # The floor: one element, one block of one busy thread — what a launch costs on this GPU
    # (kiln's and torch's) when the kernel does nothing; a decode-size call at its own side's
    # floor cannot get cheaper by launch configuration. Then 1-token shapes (hidden 4096, 32
    # heads x 128), then the existing small size (1 M elements).
    elementwise("floor", 1)
    elementwise("1-token", 4096)
    rows("1-token", 1, 4096)
    rope("1-token", 1)
    for n in (1, 8, 64):
        embedding(f"{n} ids", n)
    elementwise("small", 1 << 20)
    rows("small", 256, 4096)
    rope("small", 256)
    embedding("small", 256)
    return out


# The launch floor below any op: kernels that do nothing (or move one word), launched through
# the driver on torch's current stream and timed like the ops. PTX text, JIT-compiled by the
# driver for whatever GPU this is (ISA 7.0 / sm_80: what every kiln target's driver accepts).
FLOOR_PTX = b"""
.version 7.0
.target sm_80
.address_size 64
.visible .entry kiln_floor_empty() { ret; }
.visible .entry kiln_floor_copy1(.param .u64 src, .param .u64 dst) {
  .reg .b64 %rd<3>;
  .reg .b32 %r<2>;
  ld.param.u64 %rd1, [src];
  ld.param.u64 %rd2, [dst];
  ld.global.b32 %r1, [%rd1];
  st.global.b32 [%rd2], %r1;
  ret;
}
"""

# (label, kernel, grid, block): the empty kernel at the geometries the decode-size calls
# launch (one block; 4 blocks of 128, vecadd's flat kernel at 4096 16-bit elements; 512 and
# 1024 blocks, the flat kernels at 1 M elements), and one word copied by one thread.
FLOOR_LAUNCHES = [
    ("empty kernel", "kiln_floor_empty", 1, 1),
    ("empty kernel", "kiln_floor_empty", 4, 128),
    ("empty kernel", "kiln_floor_empty", 64, 512),
    ("empty kernel", "kiln_floor_empty", 512, 256),
    ("empty kernel", "kiln_floor_empty", 1024, 256),
    ("one word copied", "kiln_floor_copy1", 1, 1),
]


def floor_launchers(torch):
    """[(label, grid, block, fn)] launching FLOOR_PTX's kernels through libcuda (ctypes) on
    torch's current stream; [] (with the reason printed) where that is not possible."""
    import ctypes

    try:
        cu = ctypes.CDLL("libcuda.so.1")
    except OSError as e:
        print(f"  launch floor: no libcuda.so.1 ({e})", flush=True)
        return []
    torch.zeros(1, device="cuda")  # the primary context, current on this thread
    mod = ctypes.c_void_p()
    if cu.cuModuleLoadData(ctypes.byref(mod), ctypes.c_char_p(FLOOR_PTX)) != 0:
        print("  launch floor: cuModuleLoadData failed", flush=True)
        return []
    src = torch.ones(1, device="cuda")
    dst = torch.empty(1, device="cuda")
    ptrs = [ctypes.c_uint64(src.data_ptr()), ctypes.c_uint64(dst.data_ptr())]
    out = []
    for label, name, grid, block in FLOOR_LAUNCHES:
        f = ctypes.c_void_p()
        if cu.cuModuleGetFunction(ctypes.byref(f), mod, name.encode()) != 0:
            print(f"  launch floor: no {name}", flush=True)
            return []
        params = ptrs if name == "kiln_floor_copy1" else []
        arr = (ctypes.c_void_p * max(len(params), 1))(*[ctypes.cast(ctypes.pointer(p), ctypes.c_void_p) for p in params])

        def go(f=f, grid=grid, block=block, arr=arr):
            r = cu.cuLaunchKernel(f, grid, 1, 1, block, 1, 1, 0,
                                  ctypes.c_void_p(torch.cuda.current_stream().cuda_stream), arr, None)
            if r != 0:
                raise RuntimeError(f"cuLaunchKernel: CUresult {r}")
        go._keep = (mod, src, dst, ptrs, arr)
        out.append((label, grid, block, go))
    return out


def run(torch, kiln, trials=7, reps=50):
    dev = torch.device("cuda", 0)

    def eager(fn):
        """GPU time per call, launch queue kept full (median over trials)."""
        for _ in range(3):
            fn()
        torch.cuda.synchronize()
        times = []
        for _ in range(trials):
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            torch.cuda._sleep(200_000 * reps)
            s.record()
            for _ in range(reps):
                fn()
            e.record()
            e.synchronize()
            times.append(s.elapsed_time(e) / reps)
        return statistics.median(times) * 1e3

    def graphed(fn):
        """Time per call inside a CUDA graph of GRAPH_CALLS calls, replayed."""
        side = torch.cuda.Stream(device=dev)
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                fn()
        torch.cuda.current_stream().wait_stream(side)
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            keep = [fn() for _ in range(GRAPH_CALLS)]
        del keep
        graph.replay()
        torch.cuda.synchronize()
        times = []
        for _ in range(trials):
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            torch.cuda._sleep(2_000_000)
            s.record()
            for _ in range(10):
                graph.replay()
            e.record()
            e.synchronize()
            times.append(s.elapsed_time(e) / (10 * GRAPH_CALLS))
        del graph
        return statistics.median(times) * 1e3

    def host(fn, n=300):
        """Wall-clock microseconds of the Python call (median of batches)."""
        for _ in range(20):
            fn()
        torch.cuda.synchronize()
        times = []
        for _ in range(trials):
            t = time.perf_counter()
            for _ in range(n):
                fn()
            times.append((time.perf_counter() - t) / n)
            torch.cuda.synchronize()
        return statistics.median(times) * 1e6

    rows = []
    for label, grid, block, fn in floor_launchers(torch):
        row = {"op": "launch floor", "kernel": label, "grid": grid, "block": block}
        try:
            row["eager_us"], row["graph_us"] = eager(fn), graphed(fn)
        except Exception as e:  # noqa: BLE001
            row["error"] = f"{type(e).__name__}: {e}"
        rows.append(row)
        print(f"  decode launch floor {label} <<<{grid},{block}>>> " + (
            row["error"] if "error" in row else f"eager {row['eager_us']:6.2f} graph {row['graph_us']:6.2f} us"),
            flush=True)
    for dname in DECODE_DTYPES:
        dtype = getattr(torch, dname)
        for op, label, shape, kfn, kout, tfn in cases(torch, kiln, dev, dtype):
            row = {"op": op, "dtype": dname, "size": label, "shape": shape}
            try:
                for key, fn in (("kiln", kfn), ("kiln_out", kout), ("torch", tfn)):
                    row[f"{key}_eager_us"] = eager(fn)
                    row[f"{key}_graph_us"] = graphed(fn)
                    row[f"{key}_host_us"] = host(fn)
                for mode in ("eager", "graph", "host"):
                    row[f"kiln_over_torch_{mode}"] = row[f"kiln_{mode}_us"] / row[f"torch_{mode}_us"]
                    row[f"kiln_out_over_torch_{mode}"] = row[f"kiln_out_{mode}_us"] / row[f"torch_{mode}_us"]
                row["meets_target"] = row["kiln_over_torch_eager"] <= 1.0 and row["kiln_over_torch_graph"] <= 1.0
            except Exception as e:  # noqa: BLE001 - one broken case never stops the table
                row["error"] = f"{type(e).__name__}: {e}"
            rows.append(row)
            print(line(row), flush=True)
    return rows


def line(r):
    if "error" in r:
        return f"  decode {r['op']:<10} {r['dtype']:<9} {r['size']:<8} ERROR {r['error']}"
    return (f"  decode {r['op']:<10} {r['dtype']:<9} {r['size']:<8} eager kiln {r['kiln_eager_us']:6.2f} "
            f"out= {r['kiln_out_eager_us']:6.2f} torch {r['torch_eager_us']:6.2f} us | graph kiln "
            f"{r['kiln_graph_us']:6.2f} out= {r['kiln_out_graph_us']:6.2f} torch {r['torch_graph_us']:6.2f} us | "
            f"host kiln {r['kiln_host_us']:6.2f} torch {r['torch_host_us']:6.2f} us")


def table(rows):
    out = ["", "Decode sizes: µs per call (eager: GPU time with the launch queue full; graph: inside a "
           f"CUDA graph of {GRAPH_CALLS} calls; host: the Python call's wall time). kiln = result allocated "
           "per call, out= = into a preallocated buffer.", "",
           "| op | dtype | size | shape | eager kiln | eager out= | eager torch | eager kiln/torch | graph kiln | "
           "graph out= | graph torch | graph kiln/torch | host kiln | host torch |",
           "|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    floor = [r for r in rows if r["op"] == "launch floor"]
    rows = [r for r in rows if r["op"] != "launch floor"]
    for r in rows:
        if "error" in r:
            out.append(f"| {r['op']} | {r['dtype']} | {r['size']} | | error: {r['error']} |||||||||")
            continue
        fe = "" if r["kiln_over_torch_eager"] <= 1.0 else " ✗"
        fg = "" if r["kiln_over_torch_graph"] <= 1.0 else " ✗"
        out.append(
            f"| {r['op']} | {r['dtype']} | {r['size']} | {'x'.join(map(str, r['shape']))} | "
            f"{r['kiln_eager_us']:.2f} | {r['kiln_out_eager_us']:.2f} | {r['torch_eager_us']:.2f} | "
            f"{r['kiln_over_torch_eager']:.2f}{fe} | {r['kiln_graph_us']:.2f} | {r['kiln_out_graph_us']:.2f} | "
            f"{r['torch_graph_us']:.2f} | {r['kiln_over_torch_graph']:.2f}{fg} | {r['kiln_host_us']:.2f} | "
            f"{r['torch_host_us']:.2f} |")
    ok = [r for r in rows if "error" not in r]
    met = sum(r["meets_target"] for r in ok)
    out += ["", f"Decode target kiln/torch ≤ 1.0 in eager and graph mode: {met}/{len(ok)} cases (✗ = missed)."]
    if floor:
        out += ["", "Launch floor on this GPU: a kernel that does nothing, or copies one word, launched through "
                "the driver on torch's stream and timed as above (µs per launch).", "",
                "| kernel | grid × block | eager | graph |", "|---|---|---:|---:|"]
        for r in floor:
            cells = (f"error: {r['error']} |" if "error" in r else f"{r['eager_us']:.2f} | {r['graph_us']:.2f} |")
            out.append(f"| {r['kernel']} | {r['grid']} × {r['block']} | {cells}")
    return "\n".join(out) + "\n"


def breakdown(torch, kiln, n=2000, trials=7):
    """Host microseconds of the pieces of one decode-sized call (4096 bf16 vecadd) and of the
    whole call in its variants: where a kiln call's time goes on the Python side. The Rust
    side (driver calls) is `kiln-gpu-bench --percall`."""
    dev = torch.device("cuda", 0)
    a = torch.randn(4096, device=dev, dtype=torch.bfloat16)
    b = torch.randn(4096, device=dev, dtype=torch.bfloat16)
    o = torch.empty_like(a)
    ka, kb = kiln.asarray(a), kiln.asarray(b)
    ko = kiln.vecadd(ka, kb)
    to_dlpack = torch._C._to_dlpack
    raw_stream = torch._C._cuda_getCurrentRawStream

    def t(fn):
        for _ in range(50):
            fn()
        torch.cuda.synchronize()
        v = []
        for _ in range(trials):
            s = time.perf_counter()
            for _ in range(n):
                fn()
            v.append((time.perf_counter() - s) / n * 1e6)
            torch.cuda.synchronize()
        return statistics.median(v)

    pieces = {
        "python call of a no-op kiln function (kiln.current_stream())": lambda: kiln.current_stream(),
        "torch._C._to_dlpack(t) (+ capsule freed)": lambda: to_dlpack(a),
        "torch._C._cuda_getCurrentRawStream(0)": lambda: raw_stream(0),
        "t.__dlpack__(stream=1) (the standard path, + capsule freed)": lambda: a.__dlpack__(stream=1),
        "with torch.cuda.device(0): (what the standard path needed per input)": lambda: _enter_exit(torch.cuda.device(0)),
        "torch: a + b": lambda: a + b,
        "torch: torch.add(a, b, out=o)": lambda: torch.add(a, b, out=o),
        "kiln.vecadd(torch a, torch b)": lambda: kiln.vecadd(a, b),
        "kiln.vecadd(torch a, torch b, out=o)": lambda: kiln.vecadd(a, b, out=o),
        "kiln.vecadd(kiln a, kiln b)": lambda: kiln.vecadd(ka, kb),
        "kiln.vecadd(kiln a, kiln b, out=kiln o)": lambda: kiln.vecadd(ka, kb, out=ko),
        "kiln.vecadd(torch a, torch b, stream=other) (+ event fence)": None,
    }
    side = torch.cuda.Stream(device=dev)
    pieces["kiln.vecadd(torch a, torch b, stream=other) (+ event fence)"] = lambda: kiln.vecadd(a, b, stream=side)
    out = {}
    for name, fn in pieces.items():
        try:
            out[name] = t(fn)
        except Exception as e:  # noqa: BLE001
            out[name] = f"{type(e).__name__}: {e}"
        print(f"  host {out[name] if isinstance(out[name], str) else f'{out[name]:7.3f} us'}  {name}", flush=True)
    return out


def _enter_exit(cm):
    cm.__enter__()
    cm.__exit__(None, None, None)
