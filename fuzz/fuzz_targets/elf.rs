//! Any bytes as an ELF file: dynamic section, versions, notes, and the `.nv_fatbin` it points to,
//! then every rule over the result.
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
    let binary = kiln_audit::read::binary("lib/x.so", data, &opts);
    let artifact = kiln_audit::Artifact {
        files: ["lib/x.so".to_string()].into(),
        binaries: vec![binary],
        wheel: Some(Default::default()),
        ..kiln_audit::Artifact::empty(kiln_audit::InputKind::Wheel)
    };
    let policy = kiln_audit::Policy {
        expect_sass: Some(kiln_audit::parse_arch_list("80,90a,100f").unwrap()),
        expect_ptx: Some(kiln_audit::parse_arch_list("120").unwrap()),
        min_driver: Some(580),
        platform: Some("manylinux_2_28_x86_64".into()),
        runtime: Default::default(),
        require_gpus: Some(kiln_audit::parse_gpu_list("8.0,9.0,12.0").unwrap()),
    };
    let report = kiln_audit::evaluate(std::path::Path::new("x.whl"), artifact, &policy);
    oracle.check(Some(&report));
});
