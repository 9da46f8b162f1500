//! kiln ops on the caller's stream and inside CUDA graphs, from Rust (cudarc's stream and
//! graph API): a captured sequence of every op replays bit-identical to eager execution on
//! fresh inputs, ops on a stream are ordered after another stream's pending work through
//! `order_after`, and a capture-unsafe op is refused with `Error::Capture` leaving the capture
//! valid. Needs a GPU; skips (saying so) without one.

use std::sync::Arc;

use cudarc::driver::{result, sys, CudaStream};
use kiln_runtime::{DType, Error, Gpu, Positions, Stream, Tensor};
use support::gpu;

#[macro_use]
mod support;

/// Deterministic pseudo-random values of `dtype` (xorshift), in [-2, 2).
fn values(n: usize, dtype: DType, seed: u64) -> Vec<u8> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut out = Vec::with_capacity(n * dtype.size());
    for _ in 0..n {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        let x = (s >> 11) as f64 / (1u64 << 53) as f64 * 4.0 - 2.0;
        match dtype {
            DType::F32 => out.extend((x as f32).to_ne_bytes()),
            DType::F16 => out.extend(half::f16::from_f64(x).to_ne_bytes()),
            DType::BF16 => out.extend(half::bf16::from_f64(x).to_ne_bytes()),
            _ => unreachable!(),
        }
    }
    out
}

fn ids(n: usize, vocab: usize, seed: u64) -> Vec<u8> {
    (0..n as u64)
        .flat_map(|i| ((i * 7919 + seed * 31) % vocab as u64).to_ne_bytes())
        .collect()
}

/// Overwrites a tensor's bytes in place (synchronously), so a graph that captured its
/// address sees new inputs.
fn write(t: &Tensor, bytes: &[u8]) {
    assert_eq!(t.nbytes(), bytes.len());
    // SAFETY: t.nbytes() bytes of device memory at t.ptr().
    unsafe { result::memcpy_htod_sync(t.ptr(), bytes) }.expect("cuMemcpyHtoD");
}

const COLS: usize = 4096;
const HEADS: usize = 32;
const HEAD_DIM: usize = 128;
const VOCAB: usize = 1000;
const IDS: usize = 16;

struct Inputs {
    x: Tensor,
    w: Tensor,
    x3: Tensor,
    table: Tensor,
    ids: Tensor,
}

impl Inputs {
    fn new(g: &Gpu, dtype: DType, seed: u64) -> Inputs {
        let t = |b: Vec<u8>, dt, shape| Tensor::from_host(g, &b, dt, shape).expect("upload");
        Inputs {
            x: t(values(2 * COLS, dtype, seed), dtype, vec![2, COLS]),
            w: t(values(COLS, dtype, seed + 1), dtype, vec![COLS]),
            x3: t(
                values(HEADS * HEAD_DIM, dtype, seed + 2),
                dtype,
                vec![1, HEADS, HEAD_DIM],
            ),
            table: t(values(VOCAB * 64, dtype, seed + 3), dtype, vec![VOCAB, 64]),
            ids: t(ids(IDS, VOCAB, seed), DType::I64, vec![IDS]),
        }
    }

    fn refill(&self, dtype: DType, seed: u64) {
        write(&self.x, &values(2 * COLS, dtype, seed));
        write(&self.w, &values(COLS, dtype, seed + 1));
        write(&self.x3, &values(HEADS * HEAD_DIM, dtype, seed + 2));
        write(&self.table, &values(VOCAB * 64, dtype, seed + 3));
        write(&self.ids, &ids(IDS, VOCAB, seed));
    }
}

/// Every op once, a decode-step-like chain: each op's result into `outs` (caller-owned
/// buffers, the `_into` forms) and one allocating op whose result is returned.
fn sequence(g: &Gpu, i: &Inputs, outs: &[Tensor]) -> Result<Tensor, Error> {
    let (x, w) = (i.x.view(), i.w.view());
    g.rmsnorm_into(&x, &w, 1e-6, &outs[0].view())?;
    g.silu_mul_into(&outs[0].view(), &x, &outs[1].view())?;
    g.vecadd_into(&outs[1].view(), &x, &outs[2].view())?;
    g.axpby_into(&outs[2].view(), &x, 0.5, -2.0, &outs[3].view())?;
    g.softmax_into(&outs[3].view(), &outs[4].view())?;
    g.rope_into(
        &i.x3.view(),
        Positions::Offset(17),
        10000.0,
        &outs[5].view(),
    )?;
    g.embedding_into(&i.table.view(), &i.ids.view(), &outs[6].view())?;
    // An allocating op: under capture its output is the graph's allocation.
    g.vecadd(&outs[4].view(), &outs[3].view())
}

fn out_buffers(g: &Gpu, dtype: DType) -> Vec<Tensor> {
    let shapes: [Vec<usize>; 7] = [
        vec![2, COLS],
        vec![2, COLS],
        vec![2, COLS],
        vec![2, COLS],
        vec![2, COLS],
        vec![1, HEADS, HEAD_DIM],
        vec![IDS, 64],
    ];
    shapes
        .into_iter()
        .map(|s| {
            let n: usize = s.iter().product();
            Tensor::from_host(g, &vec![0u8; n * dtype.size()], dtype, s).expect("out")
        })
        .collect()
}

fn host(ts: &[Tensor], last: &Tensor) -> Vec<Vec<u8>> {
    ts.iter()
        .chain(std::iter::once(last))
        .map(|t| t.to_host().expect("read back"))
        .collect()
}

fn new_stream(g: &Gpu) -> Arc<CudaStream> {
    g.context().new_stream().expect("cuStreamCreate")
}

#[test]
fn captured_sequence_replays_like_eager() {
    let Some(g) = gpu() else { return };
    let s = new_stream(&g);
    let on = g.on(Stream::of(&s));
    for dtype in DType::FLOATS {
        let inputs = Inputs::new(&on, dtype, 1);
        let outs = out_buffers(&on, dtype);
        s.synchronize().unwrap();

        // Capture (global mode, as torch.cuda.graph does) on a non-blocking stream.
        s.begin_capture(sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_GLOBAL)
            .unwrap();
        assert_eq!(Stream::of(&s).capture(), kiln_runtime::Capture::Active);
        let captured = sequence(&on, &inputs, &outs).expect("ops under capture");
        assert!(captured.is_graph_allocation());
        let graph = s
            .end_capture(
                sys::CUgraphInstantiate_flags::CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH,
            )
            .expect("capture ended with an error: a kiln op broke it")
            .expect("empty graph");

        for seed in [2u64, 3] {
            inputs.refill(dtype, seed);
            graph.launch().unwrap();
            s.synchronize().unwrap();
            let replayed = host(&outs, &captured);
            // Eager on the same inputs, into fresh buffers.
            let eager_outs = out_buffers(&on, dtype);
            let last = sequence(&on, &inputs, &eager_outs).unwrap();
            let eager = host(&eager_outs, &last);
            for (k, (a, b)) in replayed.iter().zip(&eager).enumerate() {
                assert!(
                    a == b,
                    "{dtype}: op {k} differs between graph replay and eager (seed {seed})"
                );
            }
            assert!(eager[6].iter().any(|&b| b != 0), "embedding wrote nothing");
        }
        drop(captured);
        drop(graph);
    }
}

#[test]
fn capture_unsafe_op_is_refused_and_capture_survives() {
    let Some(g) = gpu() else { return };
    let s = new_stream(&g);
    let on = g.on(Stream::of(&s));
    let table =
        Tensor::from_host(&on, &values(10 * 4, DType::F32, 5), DType::F32, vec![10, 4]).unwrap();
    let ids_t = Tensor::from_host(&on, &ids(3, 10, 1), DType::I64, vec![3]).unwrap();
    let host_bytes = values(8, DType::F32, 9);
    s.synchronize().unwrap();
    s.begin_capture(sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_GLOBAL)
        .unwrap();
    let ok = on
        .embedding(&table.view(), &ids_t.view())
        .expect("embedding is capture-safe");
    let refused = on.embedding_checked(&table.view(), &ids_t.view());
    assert!(matches!(refused, Err(Error::Capture(_))), "{refused:?}");
    let upload = Tensor::from_host(&on, &host_bytes, DType::F32, vec![8]);
    assert!(matches!(upload, Err(Error::Capture(_))), "{upload:?}");
    let read = ok.to_host();
    assert!(matches!(read, Err(Error::Capture(_))), "{read:?}");
    let graph = s
        .end_capture(sys::CUgraphInstantiate_flags::CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH)
        .expect("the refused calls must leave the capture valid")
        .expect("graph");
    graph.launch().unwrap();
    s.synchronize().unwrap();
    let eager = on.embedding(&table.view(), &ids_t.view()).unwrap();
    assert_eq!(ok.to_host().unwrap(), eager.to_host().unwrap());
    if let Err(Error::Capture(m)) = refused {
        assert!(
            m.contains("embedding_checked") && m.contains("capturing"),
            "{m}"
        );
    }
}

#[test]
fn order_after_waits_for_the_other_stream() {
    let Some(g) = gpu() else { return };
    let (s1, s2) = (new_stream(&g), new_stream(&g));
    let (on1, on2) = (g.on(Stream::of(&s1)), g.on(Stream::of(&s2)));
    let n = 1 << 24;
    let a = Tensor::from_host(&on1, &values(n, DType::F32, 3), DType::F32, vec![n]).unwrap();
    s1.synchronize().unwrap();
    // A producer with a lot of pending work on s1 (a chain of adds), then a consumer on s2.
    let mut x = on1.vecadd(&a.view(), &a.view()).unwrap();
    for _ in 0..50 {
        x = on1.vecadd(&x.view(), &a.view()).unwrap();
    }
    on2.order_after(Stream::of(&s1)).unwrap();
    let y = on2.copy(&x.view()).unwrap();
    let got = y.to_host().unwrap();
    let want = x.to_host().unwrap();
    assert!(got == want, "s2 read x before s1 finished writing it");
}

#[test]
fn dropped_outputs_are_reused_on_their_stream_only() {
    let Some(g) = gpu() else { return };
    let (s1, s2) = (new_stream(&g), new_stream(&g));
    let (on1, on2) = (g.on(Stream::of(&s1)), g.on(Stream::of(&s2)));
    let a = Tensor::from_host(&on1, &values(4096, DType::F32, 4), DType::F32, vec![4096]).unwrap();
    let x = on1.vecadd(&a.view(), &a.view()).unwrap();
    let (ptr, before) = (x.ptr(), on1.cached_bytes());
    drop(x);
    assert!(
        on1.cached_bytes() >= before + 4096 * 4,
        "the block was not kept"
    );
    s1.synchronize().unwrap();
    let elsewhere = on2.vecadd(&a.view(), &a.view()).unwrap();
    assert_ne!(
        elsewhere.ptr(),
        ptr,
        "a block of s1 was given to s2 without ordering"
    );
    let again = on1.vecadd(&a.view(), &a.view()).unwrap();
    assert_eq!(
        again.ptr(),
        ptr,
        "s1's next output of that size did not reuse its block"
    );
    let want: Vec<u8> = values(4096, DType::F32, 4)
        .chunks_exact(4)
        .flat_map(|c| (2.0 * f32::from_ne_bytes(c.try_into().unwrap())).to_ne_bytes())
        .collect();
    assert_eq!(again.to_host().unwrap(), want);
    assert_eq!(elsewhere.to_host().unwrap(), want);
}
