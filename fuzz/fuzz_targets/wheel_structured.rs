//! Structure-aware wheels: the fuzzer's bytes choose members (names from a dictionary of the
//! paths that matter, or its own), contents (steered towards ELF and dist-info text), storage
//! (stored, deflated, a deflate stream split after a few bytes), local-header names, Unix modes
//! (symlinks), flags (encryption), lying sizes, an appended second archive and truncation; the
//! archive is written by kiln-hostile's lying zip writer and audited, under the resource oracle.
#![no_main]
use kiln_hostile::zipw::{self, Body, Member};
use libfuzzer_sys::arbitrary::{self, Arbitrary, Unstructured};
use libfuzzer_sys::fuzz_target;

#[path = "oracle.rs"]
mod oracle;

const NAMES: &[&str] = &[
    "demo/__init__.py",
    "demo/libx.so",
    "demo/libkilnmissing.so.1",
    "demo-1.0.dist-info/WHEEL",
    "demo-1.0.dist-info/METADATA",
    "demo-1.0.dist-info/RECORD",
    "other-2.0.dist-info/WHEEL",
    "demo/",
    "../evil",
    "/abs/x.so",
    "demo/\u{1b}[2Jx.so",
];
const TEXTS: &[&str] = &[
    "Wheel-Version: 1.0\nTag: py3-none-manylinux_2_17_x86_64\n",
    "Metadata-Version: 2.1\nName: demo\nVersion: 1.0\nRequires-Dist: x; (python_version > '3')\n",
    "demo/__init__.py,sha256=47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU,0\n",
];

#[derive(Arbitrary, Debug)]
struct Spec {
    name: (u8, Option<String>),
    elf: bool,
    text: Option<u8>,
    data: Vec<u8>,
    store: u8,
    local_name: Option<String>,
    mode: u8,
    encrypted: bool,
    declared: Option<u32>,
}

#[derive(Arbitrary, Debug)]
struct WheelSpec {
    members: Vec<Spec>,
    second_archive: bool,
    cut: Option<u16>,
}

fn member(s: &Spec) -> Member {
    let name = match &s.name {
        (_, Some(own)) => own.clone(),
        (i, None) => NAMES[*i as usize % NAMES.len()].to_string(),
    };
    let mut data = Vec::new();
    if s.elf {
        data.extend_from_slice(b"\x7fELF\x02\x01\x01\x00");
    }
    if let Some(t) = s.text {
        data.extend_from_slice(TEXTS[t as usize % TEXTS.len()].as_bytes());
    }
    data.extend_from_slice(&s.data[..s.data.len().min(64 << 10)]);
    let body = match s.store % 3 {
        0 => Body::Stored,
        1 => Body::Deflated,
        n => Body::RawDeflate(zipw::deflate_split(&data, n as usize + (s.store as usize >> 4))),
    };
    Member {
        body,
        local_name: s.local_name.as_ref().map(|n| n.as_bytes().to_vec()),
        unix_mode: [0o100644, 0o100755, 0o120777][s.mode as usize % 3],
        flags: if s.encrypted { 0x801 } else { 0x800 },
        declared_size: s.declared,
        ..Member::file(&name, &data)
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(spec) = WheelSpec::arbitrary(&mut Unstructured::new(data)) else {
        return;
    };
    let members: Vec<Member> = spec.members.iter().take(64).map(member).collect();
    let mut bytes = zipw::write(&members).bytes;
    if spec.second_archive && !members.is_empty() {
        let again = zipw::write(&members[..members.len() / 2]).bytes;
        bytes.extend_from_slice(&again);
    }
    if let Some(cut) = spec.cut {
        bytes.truncate(bytes.len().saturating_sub(cut as usize % 64));
    }
    let oracle = oracle::Oracle::start(bytes.len());
    let opts = kiln_audit::Options {
        max_member_size: 64 << 20,
        max_total_size: 256 << 20,
        ..Default::default()
    };
    let path = std::path::Path::new("demo-1.0-py3-none-manylinux_2_17_x86_64.whl");
    let report = kiln_audit::read::wheel(path, &bytes, &opts, &kiln_audit::NoProgress)
        .ok()
        .map(|a| kiln_audit::evaluate(path, a, &kiln_audit::Policy::default()));
    oracle.check(report.as_ref());
});
