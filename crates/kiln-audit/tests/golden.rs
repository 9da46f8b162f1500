//! Golden tests: kiln-audit's view of fatbins agrees with `cuobjdump` from the bootstrap, on
//! fixtures compiled here by nvcc and on kiln's own fatbin linked into this test binary.
//!
//! Known cuobjdump error, documented and checked: `--list-elf` prints `sm_100` for an `sm_100f`
//! cubin (family variants lose their suffix; `a` variants keep it). kiln reports `sm_100f`, and
//! `cuobjdump --dump-resource-usage` (which keeps the suffix) confirms it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use kiln_audit::{NoProgress, Options, Policy};
use kiln_test_support::cuobjdump;
use kiln_test_support::nvcc;
use kiln_test_support::repo_root as repo;

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

const FIXTURE: &str = r#"
extern "C" __global__ void g_add(float *a, const float *b, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) a[i] += b[i]; }
template <typename T> __global__ void g_scale(T *a, T s, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) a[i] *= s; }
template __global__ void g_scale<float>(float *, float, int);
template __global__ void g_scale<double>(double *, double, int);
"#;

/// SASS for 8.0, 9.0a, 10.0f, 12.0 and PTX for 12.0: plain, `a` and `f` variants together.
const GENCODES: &[&str] = &[
    "arch=compute_80,code=sm_80",
    "arch=compute_90a,code=sm_90a",
    "arch=compute_100f,code=sm_100f",
    "arch=compute_120,code=[sm_120,compute_120]",
];

fn compile(dir: &Path, out: &str, extra: &[&str]) -> PathBuf {
    let src = dir.join("fixture.cu");
    std::fs::write(&src, FIXTURE).unwrap();
    let path = dir.join(out);
    let mut cmd = Command::new(nvcc());
    cmd.args(extra).arg("-o").arg(&path).arg(&src);
    for g in GENCODES {
        cmd.arg("-gencode").arg(g);
    }
    run(&mut cmd);
    path
}

/// (kind, target) per entry as cuobjdump --list-elf --list-ptx names them.
fn cuobjdump_list(path: &Path) -> Vec<(String, String)> {
    let text = run(Command::new(cuobjdump())
        .args(["--list-elf", "--list-ptx"])
        .arg(path));
    let mut out: Vec<(String, String)> = text
        .lines()
        .filter_map(|l| {
            let kind = if l.starts_with("ELF file") {
                "cubin"
            } else if l.starts_with("PTX file") {
                "ptx"
            } else {
                return None;
            };
            // "ELF file    1: name.1.sm_90a.cubin" -> "sm_90a"
            let arch = l.rsplit('.').nth(1)?.to_string();
            Some((kind.to_string(), arch))
        })
        .collect();
    out.sort();
    out
}

/// arch (with suffix) -> kernel names, from cuobjdump --dump-resource-usage.
fn cuobjdump_kernels(path: &Path) -> BTreeMap<String, Vec<String>> {
    let text = run(Command::new(cuobjdump())
        .arg("--dump-resource-usage")
        .arg(path));
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut arch = String::new();
    for line in text.lines() {
        if let Some(a) = line.strip_prefix("arch = ") {
            arch = a.trim().to_string();
            out.entry(arch.clone()).or_default();
        } else if let Some(f) = line.trim().strip_prefix("Function ") {
            out.entry(arch.clone())
                .or_default()
                .push(f.trim_end_matches(':').to_string());
        }
    }
    for v in out.values_mut() {
        v.sort();
    }
    out
}

fn audit(path: &Path) -> kiln_audit::Report {
    kiln_audit::audit(path, &Policy::default(), &Options::default(), &NoProgress).unwrap()
}

/// Checks a report's device code against cuobjdump's listing of the same file.
fn assert_matches_cuobjdump(path: &Path, expect_compression: Option<(&str, &str)>) {
    let report = audit(path);
    let entries: Vec<&kiln_audit::facts::EntryFacts> = report
        .binaries
        .iter()
        .filter_map(|b| b.device.as_ref())
        .flat_map(|d| &d.entries)
        .collect();
    assert!(
        !entries.is_empty(),
        "no device code found in {}",
        path.display()
    );
    for e in &entries {
        assert!(e.error.is_none(), "{}: {:?}", e.target, e.error);
        if let Some((cubin, ptx)) = expect_compression {
            let want = if e.kind.as_str() == "cubin" {
                cubin
            } else {
                ptx
            };
            assert_eq!(
                e.compression.as_str(),
                want,
                "{} {} compression in {}",
                e.kind,
                e.target,
                path.display()
            );
        }
    }
    // Entry list: identical to cuobjdump's, after applying cuobjdump's known `f` suffix loss.
    let mut ours: Vec<(String, String)> = entries
        .iter()
        .map(|e| {
            let name = if e.kind.as_str() == "ptx" {
                format!("sm_{}{}", e.sm, e.variant.suffix())
            } else {
                e.target.to_string()
            };
            let cuobjdump_spelling = name.strip_suffix('f').map(String::from).unwrap_or(name);
            (e.kind.to_string(), cuobjdump_spelling)
        })
        .collect();
    ours.sort();
    assert_eq!(ours, cuobjdump_list(path), "entries of {}", path.display());
    // The `f` variant is reported exactly (cuobjdump --list-elf drops it).
    let targets: Vec<String> = entries.iter().map(|e| e.target.to_string()).collect();
    if path
        .file_name()
        .is_some_and(|n| n.to_string_lossy().contains("fixture"))
    {
        for t in ["sm_80", "sm_90a", "sm_100f", "sm_120", "compute_120"] {
            assert!(
                targets.iter().any(|x| x == t),
                "{t} missing from {targets:?}"
            );
        }
    }
    // Kernels per cubin: identical to cuobjdump's resource-usage listing (which keeps suffixes).
    let mut ours: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for e in entries.iter().filter(|e| e.kind.as_str() == "cubin") {
        ours.entry(e.target.to_string())
            .or_default()
            .extend(e.kernels.iter().cloned());
    }
    for v in ours.values_mut() {
        v.sort();
    }
    // resource-usage also lists non-kernel device functions: the `__cuda_sm*` math/sync helpers
    // nvcc links in. Those are not launchable and kiln rightly leaves them out.
    let mut theirs = cuobjdump_kernels(path);
    for v in theirs.values_mut() {
        v.retain(|f| !f.starts_with("__cuda_sm"));
        v.dedup();
    }
    assert_eq!(ours, theirs, "kernels of {}", path.display());
    // PTX: ISA of the pinned nvcc, and the PTX's own kernels.
    for e in entries.iter().filter(|e| e.kind.as_str() == "ptx") {
        assert_eq!(
            e.ptx_isa.as_deref(),
            Some("9.0"),
            "nvcc 13.0 writes PTX ISA 9.0"
        );
        let cubin = format!("sm_{}{}", e.sm, e.variant.suffix());
        assert_eq!(
            Some(&e.kernels),
            ours.get(&cubin),
            "PTX {} kernels vs the {cubin} cubin's",
            e.target
        );
    }
}

#[test]
fn fatbin_files_in_every_compression_mode_match_cuobjdump() {
    let dir = tempfile::tempdir().unwrap();
    // (nvcc flags, cubin compression, PTX compression) as CUDA 13 writes them.
    let modes: &[(&str, &[&str], (&str, &str))] = &[
        ("none", &["--compress-mode=none"], ("none", "none")),
        ("balance", &["--compress-mode=balance"], ("none", "zstd")),
        ("speed", &["--compress-mode=speed"], ("none", "lz4")),
        ("size", &["--compress-mode=size"], ("zstd", "zstd")),
        (
            "speed-all",
            &["--compress-mode=speed", "-Xfatbin=-compress-all"],
            ("lz4", "lz4"),
        ),
    ];
    for (name, flags, compression) in modes {
        let mut args = vec!["-fatbin"];
        args.extend_from_slice(flags);
        let f = compile(dir.path(), &format!("fixture-{name}.fatbin"), &args);
        assert_matches_cuobjdump(&f, Some(*compression));
    }
}

#[test]
fn shared_library_matches_cuobjdump() {
    let dir = tempfile::tempdir().unwrap();
    let lib = format!(
        "-L{}",
        nvcc()
            .parent()
            .unwrap()
            .parent()
            .unwrap()
            .join("lib")
            .display()
    );
    let so = compile(
        dir.path(),
        "libfixture.so",
        &["-shared", "-Xcompiler", "-fPIC", &lib],
    );
    assert_matches_cuobjdump(&so, None);
    let report = audit(&so);
    let elf = report.binaries[0].elf.as_ref().unwrap();
    assert!(
        elf.needed.iter().any(|n| n == "libc.so.6"),
        "{:?}",
        elf.needed
    );
}

#[test]
fn kiln_kernels_fatbin_in_a_linked_binary_matches_cuobjdump_and_the_manifest() {
    // Referencing the fatbin links kiln-kernels' `.nv_fatbin` static into this test binary.
    assert!(!kiln_kernels::fatbin().is_empty());
    let exe = std::env::current_exe().unwrap();
    assert_matches_cuobjdump(&exe, None);
    // Every kernel of the manifest is present for every SASS target of the pinned matrix.
    let pins = kiln_pins::Pins::discover(&repo()).unwrap();
    let report = kiln_audit::audit(
        &exe,
        &Policy::from_pins(&pins),
        &Options::default(),
        &NoProgress,
    )
    .unwrap();
    assert!(
        report
            .findings
            .iter()
            .all(|f| f.severity != kiln_audit::Severity::Error),
        "{:#?}",
        report.findings
    );
    let cov = &report.coverage[0];
    assert_eq!(
        cov.rows.len(),
        1,
        "every kernel has the same targets: {cov:?}"
    );
    assert_eq!(cov.targets.len(), pins.matrix.targets().len());
}

#[test]
fn truncated_fatbin_is_an_error_value_at_every_length() {
    let dir = tempfile::tempdir().unwrap();
    let f = compile(
        dir.path(),
        "fixture-size.fatbin",
        &["-fatbin", "--compress-mode=size"],
    );
    let bytes = std::fs::read(&f).unwrap();
    for cut in (1..bytes.len()).step_by(7) {
        let r = kiln_audit::read::device_code(&bytes[..cut], true);
        let broken = match r {
            Err(_) => true,
            Ok(d) => d.entries.iter().any(|e| e.error.is_some()),
        };
        assert!(
            broken,
            "cut at {cut} of {} read as a clean fatbin",
            bytes.len()
        );
    }
}
