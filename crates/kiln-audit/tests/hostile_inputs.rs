//! Hostile inputs built in code: each must give an error value or a finding, never a panic,
//! an out-of-bounds read, or an unbounded allocation. Fuzz crashes are added here as cases.

use std::io::Write;
use std::path::Path;

use kiln_audit::{NoProgress, Options, Policy};

fn zip(members: &[(&str, &[u8])]) -> Vec<u8> {
    let mut out = std::io::Cursor::new(Vec::new());
    let mut w = zip::ZipWriter::new(&mut out);
    for (name, data) in members {
        w.start_file(
            *name,
            zip::write::SimpleFileOptions::default()
                .compression_method(zip::CompressionMethod::Deflated),
        )
        .unwrap();
        w.write_all(data).unwrap();
    }
    w.finish().unwrap();
    out.into_inner()
}

fn read_wheel(bytes: &[u8], opts: &Options) -> Result<kiln_audit::Report, kiln_audit::AuditError> {
    let path = Path::new("x-1.0-py3-none-manylinux_2_17_x86_64.whl");
    kiln_audit::read::wheel(path, bytes, opts, &NoProgress)
        .map(|a| kiln_audit::evaluate(path, a, &Policy::default()))
}

fn rules(r: &kiln_audit::Report) -> Vec<&str> {
    r.findings.iter().map(|f| f.rule.as_str()).collect()
}

#[test]
fn member_over_the_size_limit_is_not_inflated() {
    let big = vec![0u8; 1 << 20]; // deflates to ~1 KiB
    let bytes = zip(&[
        ("x/big.bin", &big),
        ("x-1.0.dist-info/WHEEL", b"Tag: py3-none-any\n"),
    ]);
    let opts = Options {
        max_member_size: 64 << 10,
        ..Options::default()
    };
    let r = read_wheel(&bytes, &opts).unwrap();
    assert!(
        rules(&r).contains(&"wheel/member-too-large"),
        "{:?}",
        rules(&r)
    );
}

#[test]
fn unsafe_member_paths_are_findings_and_never_read() {
    let bytes = zip(&[
        ("../../etc/evil", b"x"),
        ("/abs/path", b"y"),
        ("x-1.0.dist-info/WHEEL", b"Tag: py3-none-any\n"),
    ]);
    let r = read_wheel(&bytes, &Options::default()).unwrap();
    let unsafe_paths: Vec<&str> = r
        .findings
        .iter()
        .filter(|f| f.rule == "wheel/unsafe-path")
        .map(|f| f.file.as_str())
        .collect();
    assert_eq!(unsafe_paths.len(), 2, "{:?}", r.findings);
}

#[test]
fn record_mismatches_are_named() {
    let so = b"not an elf";
    let record = "x/a.txt,sha256=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA,10\nx-1.0.dist-info/RECORD,,\nx/gone.txt,sha256=abc,1\n";
    let bytes = zip(&[
        ("x/a.txt", so),
        ("x/unlisted.txt", b"u"),
        ("x-1.0.dist-info/WHEEL", b"Tag: py3-none-any\n"),
        ("x-1.0.dist-info/RECORD", record.as_bytes()),
    ]);
    let r = read_wheel(&bytes, &Options::default()).unwrap();
    let msgs: Vec<String> = r
        .findings
        .iter()
        .map(|f| format!("{} {} {}", f.rule, f.file, f.message))
        .collect();
    assert!(
        msgs.iter()
            .any(|m| m.starts_with("wheel/record-mismatch x/a.txt sha256 mismatch")),
        "{msgs:#?}"
    );
    assert!(
        msgs.iter()
            .any(|m| m.starts_with("wheel/record-missing x/unlisted.txt")),
        "{msgs:#?}"
    );
    assert!(
        msgs.iter().any(|m| m.contains("lists x/gone.txt")),
        "{msgs:#?}"
    );
    assert!(
        msgs.iter()
            .any(|m| m.starts_with("wheel/record-missing x-1.0.dist-info/WHEEL")),
        "{msgs:#?}"
    );
}

#[test]
fn elf_whose_sections_run_past_the_file_is_an_error() {
    // This test binary is a real ELF; point every section of a copy past the end of the file.
    let mut exe = std::fs::read(std::env::current_exe().unwrap()).unwrap();
    let shoff = u64::from_le_bytes(exe[0x28..0x30].try_into().unwrap()) as usize;
    let shentsize = u16::from_le_bytes(exe[0x3a..0x3c].try_into().unwrap()) as usize;
    let shnum = u16::from_le_bytes(exe[0x3c..0x3e].try_into().unwrap()) as usize;
    for i in 1..shnum {
        // sh_offset at +24, sh_size at +32
        let h = shoff + i * shentsize;
        exe[h + 24..h + 32].copy_from_slice(&(u64::MAX - 4).to_le_bytes());
        exe[h + 32..h + 40].copy_from_slice(&u64::MAX.to_le_bytes());
    }
    let b = kiln_audit::read::binary("x.so", &exe, &Options::default());
    assert!(
        b.elf_error.is_some(),
        "sections past EOF read as {:?}",
        b.elf
    );
}

#[test]
fn fatbin_with_lying_sizes_is_an_error_value() {
    let mut c = Vec::new();
    c.extend_from_slice(&0xBA55_ED50u32.to_le_bytes());
    c.extend_from_slice(&1u16.to_le_bytes());
    c.extend_from_slice(&16u16.to_le_bytes());
    c.extend_from_slice(&u64::MAX.to_le_bytes());
    assert!(kiln_audit::read::device_code(&c, true).is_err());
    // entry header size 0 (would loop forever if trusted)
    let mut c2 = c.clone();
    c2[8..16].copy_from_slice(&64u64.to_le_bytes());
    c2.extend_from_slice(&[2, 0, 1, 1, 0, 0, 0, 0]);
    c2.extend_from_slice(&[0; 56]);
    assert!(kiln_audit::read::device_code(&c2, true).is_err());
}

/// Fuzz regression (fatbin target, oom-d50629237f): a zstd entry whose header claims a huge
/// decompressed size made the reader reserve it up front. Now rejected from the sizes alone.
#[test]
fn zstd_entry_claiming_a_huge_size_is_rejected_before_allocating() {
    let payload = zstd::bulk::compress(b".version 9.0\n.target sm_80\n", 3).unwrap();
    let mut entry = vec![0u8; 64];
    entry[0..2].copy_from_slice(&1u16.to_le_bytes()); // PTX
    entry[4..8].copy_from_slice(&64u32.to_le_bytes());
    entry[8..16].copy_from_slice(&(payload.len() as u64).to_le_bytes());
    entry[16..20].copy_from_slice(&(payload.len() as u32).to_le_bytes());
    entry[28..32].copy_from_slice(&80u32.to_le_bytes());
    entry[40..48].copy_from_slice(&0x8000u64.to_le_bytes()); // compressed
    entry[56..64].copy_from_slice(&(200u64 << 20).to_le_bytes()); // claims 200 MiB
    entry.extend_from_slice(&payload);
    let mut c = Vec::new();
    c.extend_from_slice(&0xBA55_ED50u32.to_le_bytes());
    c.extend_from_slice(&1u16.to_le_bytes());
    c.extend_from_slice(&16u16.to_le_bytes());
    c.extend_from_slice(&(entry.len() as u64).to_le_bytes());
    c.extend_from_slice(&entry);
    let d = kiln_audit::read::device_code(&c, true).unwrap();
    let err = d.entries[0].error.as_deref().unwrap_or("");
    assert!(err.contains("zstd header claims"), "{err:?}");
}

/// Truncates the input when the audit starts reading members: after the central directory was
/// read, before any member is inflated — the file shrinks under a running audit.
struct TruncateOnBegin<'a> {
    path: &'a Path,
    keep: u64,
}

impl kiln_audit::Progress for TruncateOnBegin<'_> {
    fn begin(&self, _: u64, _: &str) {
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(self.path)
            .unwrap();
        f.set_len(self.keep).unwrap();
    }
    fn advance(&self, _: u64) {}
    fn end(&self) {}
}

#[test]
fn a_wheel_truncated_while_it_is_read_is_an_error_not_a_crash_nor_a_pass() {
    // Incompressible bytes, so the member's data spans most of the file.
    let mut noise = Vec::with_capacity(1 << 20);
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    while noise.len() < 1 << 20 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        noise.extend_from_slice(&x.to_le_bytes());
    }
    let bytes = zip(&[
        ("x/__init__.py", b""),
        ("x/data.bin", &noise),
        (
            "x-1.0.dist-info/WHEEL",
            b"Wheel-Version: 1.0\nTag: py3-none-any\n",
        ),
        (
            "x-1.0.dist-info/METADATA",
            b"Metadata-Version: 2.1\nName: x\nVersion: 1.0\n",
        ),
    ]);
    let dir = tempfile::tempdir().unwrap();
    for keep in [0, 100, bytes.len() as u64 / 2, bytes.len() as u64 - 200] {
        let path = dir.path().join("x-1.0-py3-none-any.whl");
        std::fs::write(&path, &bytes).unwrap();
        let progress = TruncateOnBegin { path: &path, keep };
        match kiln_audit::audit(&path, &Policy::default(), &Options::default(), &progress) {
            Err(e) => assert!(!e.to_string().is_empty()),
            Ok(r) => assert!(
                r.findings
                    .iter()
                    .any(|f| f.severity == kiln_audit::Severity::Error
                        && f.rule != "wheel/record-missing"),
                "kept {keep} of {} bytes: no error from the truncation, findings {:?}",
                bytes.len(),
                rules(&r)
            ),
        }
    }
    // Untouched, the same wheel lacks only its RECORD: the errors above come from the truncation.
    let path = dir.path().join("x-1.0-py3-none-any.whl");
    std::fs::write(&path, &bytes).unwrap();
    let r = kiln_audit::audit(&path, &Policy::default(), &Options::default(), &NoProgress).unwrap();
    assert_eq!(rules(&r), ["wheel/record-missing"]);
}

/// A fatbin: one PTX entry (uncompressed) naming `kernels` kernels.
fn ptx_fatbin(kernels: usize) -> Vec<u8> {
    let mut text = String::from(".version 8.0\n.target sm_80\n.address_size 64\n");
    for i in 0..kernels {
        text += &format!(".visible .entry kernel_{i}()\n{{\nret;\n}}\n");
    }
    let mut entry = vec![0u8; 64];
    entry[0..2].copy_from_slice(&1u16.to_le_bytes());
    entry[4..8].copy_from_slice(&64u32.to_le_bytes());
    entry[8..16].copy_from_slice(&(text.len() as u64).to_le_bytes());
    entry[26..28].copy_from_slice(&8u16.to_le_bytes());
    entry[28..32].copy_from_slice(&80u32.to_le_bytes());
    entry.extend_from_slice(text.as_bytes());
    let mut out = kiln_fatbin::container::MAGIC.to_le_bytes().to_vec();
    out.extend_from_slice(&1u16.to_le_bytes());
    out.extend_from_slice(&16u16.to_le_bytes());
    out.extend_from_slice(&(entry.len() as u64).to_le_bytes());
    out.extend_from_slice(&entry);
    out
}

#[test]
fn the_json_report_stays_within_its_budget_and_says_what_it_left_out() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("k.fatbin");
    std::fs::write(&path, ptx_fatbin(50_000)).unwrap();
    let r = kiln_audit::audit(&path, &Policy::default(), &Options::default(), &NoProgress).unwrap();
    let listed = |json: &serde_json::Value| {
        json["binaries"][0]["device"]["entries"][0]["kernels"]
            .as_array()
            .map_or(0, Vec::len)
    };
    // Unbounded: every kernel, nothing omitted.
    let mut full = Vec::new();
    let omitted = kiln_audit::json::write(&mut full, &r, usize::MAX).unwrap();
    assert!(omitted.is_empty(), "{omitted:?}");
    let v: serde_json::Value = serde_json::from_slice(&full).unwrap();
    assert_eq!(listed(&v), 50_000);
    assert!(full.len() > 1 << 20, "{}", full.len());
    // 64 KiB: cut short, still JSON, the counts exact, and the left-out kernels counted.
    let mut small = Vec::new();
    let omitted = kiln_audit::json::write(&mut small, &r, 64 << 10).unwrap();
    assert!(small.len() <= 64 << 10, "{} bytes", small.len());
    let v: serde_json::Value = serde_json::from_slice(&small).unwrap();
    let left = v["omitted"]["binaries[].device.entries[].kernels"]
        .as_u64()
        .unwrap();
    assert_eq!(left, omitted["binaries[].device.entries[].kernels"] as u64);
    assert_eq!(listed(&v) as u64 + left, 50_000);
    assert_eq!(v["counts"]["kernels"], 50_000);
}
