//! Any bytes as a wheel: zip structure, member paths, RECORD, WHEEL, METADATA, members' ELFs.
#![no_main]
use libfuzzer_sys::fuzz_target;

#[path = "oracle.rs"]
mod oracle;

fuzz_target!(|data: &[u8]| {
    let oracle = oracle::Oracle::start(data.len());
    let opts = kiln_audit::Options {
        max_member_size: 64 << 20,
        max_total_size: 256 << 20,
        ..Default::default()
    };
    let path = std::path::Path::new("pkg-1.0-cp39-abi3-manylinux_2_17_x86_64.whl");
    let report = kiln_audit::read::wheel(path, data, &opts, &kiln_audit::NoProgress)
        .ok()
        .map(|a| kiln_audit::evaluate(path, a, &kiln_audit::Policy::default()));
    oracle.check(report.as_ref());
});
