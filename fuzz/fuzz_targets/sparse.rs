//! Differential: any bytes as a cubin, zstd-compressed, read sparse (kiln_fatbin::sparse)
//! keeping a prefix the input chooses. Whenever the sparse read reports no miss, its answer (SM,
//! toolkit target, kernels, or the error) must be the whole cubin's.
#![no_main]
use kiln_fatbin::{cubin, sparse::SparseCubin};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&p, elf)) = data.split_first() else {
        return;
    };
    let prefix = 64 + usize::from(p) * 16;
    let z = zstd::bulk::compress(elf, 1).expect("zstd compresses any bytes");
    // None: the stream is not one frame of exactly these bytes, or the tables would need more
    // than the sparse reader keeps; the audit then decodes the whole cubin.
    let Some(s) = SparseCubin::from_zstd_keeping(&z, elf.len() as u64, prefix) else {
        return;
    };
    let sparse = (
        cubin::sm(&s),
        cubin::toolkit_target(&s),
        cubin::kernels(&s),
    );
    if s.missed() {
        return;
    }
    let whole = (
        cubin::sm(elf),
        cubin::toolkit_target(elf),
        cubin::kernels(elf),
    );
    assert_eq!(sparse, whole, "prefix {prefix}");
});
