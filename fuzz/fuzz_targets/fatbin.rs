//! Any bytes as a `.nv_fatbin` section: containers, entries, LZ4/zstd payloads, cubins, PTX.
#![no_main]
use libfuzzer_sys::fuzz_target;

#[path = "oracle.rs"]
mod oracle;

fuzz_target!(|data: &[u8]| {
    let oracle = oracle::Oracle::start(data.len());
    if let Ok(code) = kiln_audit::read::device_code(data, true) {
        for e in &code.entries {
            let _ = (&e.target, e.kernels.len(), &e.ptx_isa);
        }
    }
    oracle.check(None);
});
