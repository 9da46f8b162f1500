"""kiln on the caller's streams and inside CUDA graphs (test_kiln_gpu.py runs these as the
"streams" group; each check is one recorded case).

- pending producer: every op x dtype on a non-default torch stream whose inputs are still being
  written by a slow producer kernel (torch.cuda._sleep, then the real data) on that stream
  (default rule: torch's current stream) and on another stream (explicit stream=, kiln fences
  after torch's current stream); and kiln's output read by torch on a third stream while
  kiln's stream is still busy (DLPack export ordering).
- overlap: long single-block kiln ops on two streams; CUDA-event timeline: the concurrent span
  is well under the sum of the two streams' times alone.
- graphs: every op x dtype captured with torch.cuda.graph (allocating form and out= form),
  replayed on fresh inputs, bit-identical to eager on those inputs; a chained decode step too.
- capture-unsafe: embedding_checked, synchronize, Array.numpy, host inputs raise
  kiln.CaptureError under capture, and the capture still completes and replays.
- no host sync: with a ~0.1 s kernel queued on the stream, every op's call returns in < 20 ms
  and the stream is still busy afterwards.
"""

from __future__ import annotations

import time
import traceback

F32, F16, BF16 = "float32", "float16", "bfloat16"
DTYPES = (F32, F16, BF16)

# torch.cuda._sleep spins this many GPU cycles (H200 ~1.98 GHz): ~50 ms, ~1 s.
SLOW_CYCLES = 20_000_000
LONG_CYCLES = 200_000_000


def _cases(ctx, dtype):
    """(op name, make inputs -> dict, kiln call(inputs, **kw), torch reference(inputs))."""
    torch, kiln = ctx.torch, ctx.kiln
    F = torch.nn.functional

    def x2():
        return {"a": ctx.randn((3, 4096), dtype), "b": ctx.randn((3, 4096), dtype), "w": ctx.randn((4096,), dtype)}

    def rope_in():
        return {"x": ctx.randn((2, 32, 128), dtype)}

    def emb_in():
        return {"t": ctx.randn((1000, 256), dtype), "i": ctx.randint(1000, (64,), torch.int64)}

    def torch_rope(x, offset=5, theta=10000.0):
        d = x.shape[-1]
        inv = 1.0 / (theta ** (torch.arange(0, d, 2, device=x.device, dtype=torch.float32) / d))
        pos = torch.arange(offset, offset + x.shape[0], device=x.device, dtype=torch.float32)
        f = pos[:, None] * inv[None, :]
        emb = torch.cat([f, f], -1)[:, None, :]
        xf = x.float()
        rot = torch.cat([-xf[..., d // 2:], xf[..., : d // 2]], -1)
        return (xf * emb.cos() + rot * emb.sin()).to(x.dtype)

    return [
        ("vecadd", x2, lambda v, **k: kiln.vecadd(v["a"], v["b"], **k), lambda v: v["a"] + v["b"]),
        ("axpby", x2, lambda v, **k: kiln.axpby(v["a"], v["b"], 0.5, -2.0, **k),
         lambda v: (0.5 * v["a"].float() - 2.0 * v["b"].float()).to(v["a"].dtype)),
        ("silu_mul", x2, lambda v, **k: kiln.silu_mul(v["a"], v["b"], **k),
         lambda v: (F.silu(v["a"].float()) * v["b"].float()).to(v["a"].dtype)),
        ("rmsnorm", x2, lambda v, **k: kiln.rmsnorm(v["a"], v["w"], 1e-6, **k),
         lambda v: F.rms_norm(v["a"].float(), (4096,), v["w"].float(), 1e-6).to(v["a"].dtype)),
        ("softmax", x2, lambda v, **k: kiln.softmax(v["a"], **k), lambda v: torch.softmax(v["a"].float(), -1).to(v["a"].dtype)),
        ("rope", rope_in, lambda v, **k: kiln.rope(v["x"], offset=5, **k), lambda v: torch_rope(v["x"])),
        ("embedding", emb_in, lambda v, **k: kiln.embedding(v["t"], v["i"], **k), lambda v: F.embedding(v["i"], v["t"])),
    ]


def _close(torch, got, want, dtype):
    tol = {F32: (1e-4, 1e-5), F16: (4e-3, 1e-3), BF16: (3e-2, 1e-2)}[dtype]
    return bool(torch.allclose(got.float(), want.float(), rtol=tol[0], atol=tol[1]))


def _record(res, op, dtype, shape, fn):
    case = {"op": op, "dtype": dtype, "shape": shape}
    try:
        detail = fn()
        case["ok"] = True
        if detail:
            case["detail"] = detail
    except Exception as e:  # noqa: BLE001 - one broken check never stops the others
        case.update(ok=False, error=f"{type(e).__name__}: {e}", traceback=traceback.format_exc()[-2000:])
    res.record(case)


def _slow_fill(torch, dst, src):
    """On the current stream: a long kernel, then dst <- src (the data arrives late)."""
    torch.cuda._sleep(SLOW_CYCLES)
    dst.copy_(src)


def check_pending_producer(ctx, res):
    torch, kiln = ctx.torch, ctx.kiln
    dev = ctx.dev
    for dtype in DTYPES:
        for op, make, call, ref in _cases(ctx, dtype):
            def same_stream(make=make, call=call, ref=ref, dtype=dtype):
                v = make()
                torch.cuda.synchronize()
                s = torch.cuda.Stream(device=dev)
                late = {k: torch.zeros_like(t) for k, t in v.items()}
                torch.cuda.synchronize()
                with torch.cuda.stream(s):
                    for k in v:
                        _slow_fill(torch, late[k], v[k])
                    out = torch.from_dlpack(call(late))  # default: torch's current stream = s
                    assert not s.query(), "the producer finished before kiln was called: not a pending-producer test"
                    got = out.clone()
                s.synchronize()
                want = ref(v)
                assert _close(torch, got, want, dtype), f"max diff {(got.float() - want.float()).abs().max().item()}"
            _record(res, f"stream:{op}", dtype, "torch stream, pending producer, default stream rule", same_stream)

            def other_stream(make=make, call=call, ref=ref, dtype=dtype):
                v = make()
                torch.cuda.synchronize()
                s1, s2 = torch.cuda.Stream(device=dev), torch.cuda.Stream(device=dev)
                late = {k: torch.zeros_like(t) for k, t in v.items()}
                torch.cuda.synchronize()
                with torch.cuda.stream(s1):
                    for k in v:
                        _slow_fill(torch, late[k], v[k])
                    # kiln runs on s2 and must wait for s1 (torch's current stream) on the GPU.
                    arr = call(late, stream=s2)
                # torch tensors in give a torch tensor out (no .stream): s2, fresh, has work
                # pending right after the call only if kiln enqueued there (behind s1's fill).
                assert not s2.query(), "nothing pending on s2: kiln did not run there"
                with torch.cuda.stream(s2):
                    got = torch.from_dlpack(arr).clone()
                s2.synchronize()
                want = ref(v)
                assert _close(torch, got, want, dtype), f"max diff {(got.float() - want.float()).abs().max().item()}"
            _record(res, f"stream:{op}", dtype, "explicit stream=s2, producer pending on s1", other_stream)

    def export_order():
        a = ctx.randn((1 << 20,), F32)
        torch.cuda.synchronize()
        s1, s3 = torch.cuda.Stream(device=dev), torch.cuda.Stream(device=dev)
        with kiln.stream(s1):
            with torch.cuda.stream(s1):
                torch.cuda._sleep(SLOW_CYCLES)  # kiln's stream is busy for ~50 ms
            out = kiln._kiln.vecadd(a, a)  # a kiln.Array: its __dlpack__ is what is tested
        with torch.cuda.stream(s3):
            t = torch.from_dlpack(out)  # torch passes s3: kiln must make s3 wait for s1
            r = t * 1.0
        assert not s1.query(), "s1 finished too early for the check to mean anything"
        s3.synchronize()
        assert torch.equal(r, a + a), "torch on s3 read kiln's output before kiln's stream wrote it"
    _record(res, "stream:dlpack-export", F32, "__dlpack__(stream=s3) while kiln's stream s1 is busy", export_order)

    def kiln_stream_scope():
        # The extension's functions (kiln.Array out, with .stream) for torch inputs too.
        kiln = ctx.kiln._kiln
        a = ctx.randn((4096,), F32)
        s = torch.cuda.Stream(device=dev)
        with kiln.stream(s) as scope:
            assert kiln.current_stream() == s.cuda_stream == scope.handle
            arr = kiln.vecadd(a, a)
            inner = kiln.vecadd(a, a, stream=0)
        assert kiln.current_stream() is None
        assert arr.stream == s.cuda_stream and inner.stream == 0
        torch.cuda.synchronize()
        assert torch.equal(torch.from_dlpack(arr), a + a)
        proto = type("P", (), {"__cuda_stream__": lambda self: (0, s.cuda_stream)})()
        assert kiln.vecadd(a, a, stream=proto).stream == s.cuda_stream
        for bad in (-5, "x", 1.5):
            try:
                kiln.vecadd(a, a, stream=bad)
            except (TypeError, ValueError):
                pass
            else:
                raise AssertionError(f"stream={bad!r} accepted")
    _record(res, "stream:api", F32, "kiln.stream(s), stream= int / __cuda_stream__, bad values", kiln_stream_scope)


def check_overlap(ctx, res):
    torch, kiln = ctx.torch, ctx.kiln
    dev = ctx.dev

    def overlap():
        # One row of 4M elements: rmsnorm runs one block for a long time, leaving the rest of
        # the GPU free, so two streams' kernels can run side by side.
        x = ctx.randn((1, 1 << 22), F32)
        w = ctx.randn((1 << 22,), F32)
        reps = 4
        s1, s2 = torch.cuda.Stream(device=dev), torch.cuda.Stream(device=dev)

        def run(streams):
            torch.cuda.synchronize()
            ev = {s: (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for s in streams}
            for s in streams:
                ev[s][0].record(s)
            for _ in range(reps):
                for s in streams:
                    kiln.rmsnorm(x, w, 1e-6, stream=s)
            for s in streams:
                ev[s][1].record(s)
            torch.cuda.synchronize()
            # span: from the first stream's start (recorded before any kernel) to the last end
            return max(ev[streams[0]][0].elapsed_time(ev[s][1]) for s in streams)

        run([s1])  # warm-up
        alone1, alone2 = run([s1]), run([s2])
        both = run([s1, s2])
        ratio = both / (alone1 + alone2)
        assert ratio < 0.75, f"no overlap: both {both:.3f} ms vs alone {alone1:.3f} + {alone2:.3f} ms"
        return {"alone_s1_ms": alone1, "alone_s2_ms": alone2, "both_ms": both, "both_over_sum": ratio}
    _record(res, "stream:overlap", F32, "two streams, 4 x rmsnorm(1 x 4M) each, events", overlap)


def check_graphs(ctx, res):
    torch, kiln = ctx.torch, ctx.kiln
    for dtype in DTYPES:
        for op, make, call, _ref in _cases(ctx, dtype):
            for form in ("alloc", "out"):
                def graph(make=make, call=call, form=form):
                    v = make()
                    eager0 = torch.from_dlpack(call(v))
                    static_out = torch.empty_like(eager0) if form == "out" else None
                    kw = {"out": static_out} if form == "out" else {}
                    # warm-up on a side stream, as torch's docs ask before capture
                    s = torch.cuda.Stream(device=ctx.dev)
                    s.wait_stream(torch.cuda.current_stream())
                    with torch.cuda.stream(s):
                        call(v, **kw)
                    torch.cuda.current_stream().wait_stream(s)
                    torch.cuda.synchronize()
                    g = torch.cuda.CUDAGraph()
                    with torch.cuda.graph(g):
                        r = call(v, **kw)
                    captured = static_out if form == "out" else torch.from_dlpack(r)
                    if form == "out":
                        assert r is static_out, "out= must return the out array itself"
                    for _ in range(2):
                        fresh = make()
                        for k in v:
                            v[k].copy_(fresh[k])
                        g.replay()
                        eager = torch.from_dlpack(call(v))
                        torch.cuda.synchronize()
                        assert torch.equal(captured, eager), "graph replay differs from eager"
                _record(res, f"graph:{op}", dtype, f"torch.cuda.graph, {form} form, 2 replays on fresh inputs", graph)

        def chain(dtype=dtype):
            # One decode step's worth of kiln ops in one graph.
            x, w = ctx.randn((1, 4096), dtype), ctx.randn((4096,), dtype)
            q = ctx.randn((1, 32, 128), dtype)
            table, ids = ctx.randn((32000, 4096), dtype), ctx.randint(32000, (1,), torch.int64)

            def step():
                e = kiln.embedding(table, ids)
                h = kiln.vecadd(e, x)
                n = kiln.rmsnorm(h, w, 1e-6)
                m = kiln.silu_mul(n, h)
                r = kiln.rope(q, offset=7)
                p = kiln.softmax(kiln.axpby(m, n, 0.5, 0.25))
                return [torch.from_dlpack(t) for t in (e, h, n, m, r, p)]

            step()
            torch.cuda.synchronize()
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                captured = step()
            for seed in range(2):
                x.copy_(ctx.randn((1, 4096), dtype))
                ids.copy_(ctx.randint(32000, (1,), torch.int64))
                g.replay()
                eager = step()
                torch.cuda.synchronize()
                for a, b in zip(captured, eager):
                    assert torch.equal(a, b), "chained graph replay differs from eager"
        _record(res, "graph:decode-chain", dtype, "embedding+vecadd+rmsnorm+silu_mul+rope+axpby+softmax", chain)


def check_capture_unsafe(ctx, res):
    torch, kiln = ctx.torch, ctx.kiln
    import numpy as np

    def unsafe():
        table = ctx.randn((10, 4), F32)
        ids = torch.tensor([1, 3], device=ctx.dev)
        ready = kiln._kiln.vecadd(table, table)  # a kiln.Array, for .numpy()
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        raised = {}
        with torch.cuda.graph(g):
            ok = kiln.embedding(table, ids)
            for name, fn in [
                ("embedding_checked", lambda: kiln.embedding_checked(table, ids)),
                ("synchronize", lambda: kiln.synchronize()),
                ("Array.numpy", lambda: ready.numpy()),
                ("host input", lambda: kiln.vecadd(np.ones(3, np.float32), np.ones(3, np.float32))),
                ("matmul", lambda: kiln.matmul(table, table.t().contiguous())),
            ]:
                try:
                    fn()
                except kiln.CaptureError as e:
                    raised[name] = str(e)
                else:
                    raised[name] = None
        missing = [k for k, v in raised.items() if v is None]
        assert not missing, f"no CaptureError from {missing}"
        assert isinstance(kiln.CaptureError("x"), kiln.KilnError)
        g.replay()  # the capture survived the refused calls
        torch.cuda.synchronize()
        assert torch.equal(torch.from_dlpack(ok), torch.nn.functional.embedding(ids, table))
        return {k: v[:160] for k, v in raised.items()}
    _record(res, "graph:capture-unsafe", F32, "CaptureError, capture still valid", unsafe)


def check_no_host_sync(ctx, res):
    torch = ctx.torch
    for op, make, call, _ref in _cases(ctx, BF16):
        def nosync(make=make, call=call):
            v = make()
            call(v)  # warm: module, handles, pool
            torch.cuda.synchronize()
            s = torch.cuda.current_stream()
            torch.cuda._sleep(LONG_CYCLES)  # ~0.1 s of GPU work ahead of kiln's call
            t = time.perf_counter()
            call(v)
            dt = time.perf_counter() - t
            busy = not s.query()
            torch.cuda.synchronize()
            assert busy, "the long kernel had finished: the call waited for it"
            assert dt < 0.02, f"the call took {dt * 1e3:.1f} ms with a ~0.1 s kernel queued: it waited"
            return {"call_ms": dt * 1e3}
        _record(res, f"nosync:{op}", BF16, "returns while a ~0.1 s kernel runs", nosync)


def run(ctx, res):
    for name, fn in [
        ("pending-producer", check_pending_producer),
        ("overlap", check_overlap),
        ("graphs", check_graphs),
        ("capture-unsafe", check_capture_unsafe),
        ("no-host-sync", check_no_host_sync),
    ]:
        try:
            fn(ctx, res)
        except Exception as e:  # noqa: BLE001
            res.record({"op": f"streams:{name}", "dtype": "-", "shape": "-", "ok": False,
                        "error": f"{type(e).__name__}: {e}", "traceback": traceback.format_exc()[-2000:]})
