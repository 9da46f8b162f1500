//! The embedded fatbin, checked against the pins by an independent reader: cuobjdump from
//! `cargo xtask bootstrap`. Every matrix target present, PTX exactly where `+PTX` says, and
//! every kernel for every target.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

use kiln_pins::{Pins, TargetKind};
use kiln_test_support::cuobjdump;
use kiln_test_support::repo_root;

fn pins() -> Pins {
    Pins::load(&repo_root().join("Cargo.toml")).unwrap()
}

/// `cuobjdump ARGS FILE` stdout.
fn cuobjdump_on(args: &[&str], file: &Path) -> String {
    let out = Command::new(cuobjdump())
        .args(args)
        .arg(file)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "cuobjdump failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// "ELF file    1: kernels.1.sm_80.cubin" -> "sm_80"; "PTX file 1: x.sm_120.ptx" -> "compute_120".
fn listed_targets(listing: &str) -> BTreeSet<String> {
    listing
        .lines()
        .filter_map(|l| {
            let name = l.split(':').nth(1)?.trim();
            let arch = name.split('.').find(|p| p.starts_with("sm_"))?;
            Some(if l.starts_with("PTX") {
                arch.replace("sm_", "compute_")
            } else {
                arch.to_string()
            })
        })
        .collect()
}

fn expected_targets() -> BTreeSet<String> {
    // cuobjdump prints `f` variants without their suffix (shared/FACTS.md); the default matrix has none.
    pins().matrix.targets().iter().map(|t| t.name()).collect()
}

#[test]
fn fatbin_holds_every_target_of_the_matrix() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("kernels.fatbin");
    std::fs::write(&file, kiln_kernels::fatbin()).unwrap();
    let listing = cuobjdump_on(&["--list-elf", "--list-ptx"], &file);
    assert_eq!(
        listed_targets(&listing),
        expected_targets(),
        "cuobjdump says:\n{listing}"
    );
    // The default matrix, as the foundation issue states it.
    let names: BTreeSet<String> = expected_targets();
    for t in [
        "sm_80",
        "sm_86",
        "sm_89",
        "sm_90",
        "sm_100",
        "sm_120",
        "compute_120",
    ] {
        assert!(names.contains(t), "{t} missing from the pinned matrix");
    }
}

#[test]
fn this_test_binary_carries_the_fatbin_in_nv_fatbin() {
    // cuobjdump finds device code in an ELF only in `.nv_fatbin`: this proves the section.
    let exe = std::env::current_exe().unwrap();
    let listing = cuobjdump_on(&["--list-elf", "--list-ptx"], &exe);
    assert_eq!(listed_targets(&listing), expected_targets(), "{listing}");
    assert_eq!(
        kiln_kernels::fatbin().as_ptr() as usize % 8,
        0,
        "fatbin must be 8-byte aligned"
    );
}

#[test]
fn every_kernel_is_present_for_every_target() {
    let manifest = kiln_kernels::manifest();
    assert!(manifest.gaps().is_empty(), "{:?}", manifest.gaps());
    let all = manifest.all_kernels();
    for required in [
        "vecadd_f32",
        "vecadd_flat_bf16",
        "axpby_f32",
        "axpby_f16",
        "axpby_bf16",
        "embedding_flat_f16",
    ] {
        assert!(all.contains(required), "{required} missing: {all:?}");
    }
    // Cross-check the manifest against cuobjdump's own per-cubin symbol dump (--dump-elf-symbols).
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("kernels.fatbin");
    std::fs::write(&file, kiln_kernels::fatbin()).unwrap();
    let symbols = cuobjdump_on(&["--dump-elf-symbols"], &file);
    for t in &manifest.targets {
        if t.kind == kiln_pins::TargetKind::Sass {
            for k in &t.kernels {
                assert!(
                    symbols.contains(k.as_str()),
                    "cuobjdump does not see {k} ({})",
                    t.target
                );
            }
        }
    }
    let pins = pins();
    let ptx: Vec<_> = pins
        .matrix
        .targets()
        .into_iter()
        .filter(|t| t.kind == TargetKind::Ptx)
        .collect();
    for t in ptx {
        let entry = manifest
            .targets
            .iter()
            .find(|m| m.target == t)
            .expect("PTX target in manifest");
        let isa = entry.ptx_isa.as_deref().unwrap();
        let (max_major, max_minor) = pins.max_ptx_isa();
        let (maj, min) = isa
            .split_once('.')
            .map(|(a, b)| (a.parse::<u32>().unwrap(), b.parse::<u32>().unwrap()))
            .unwrap();
        assert!(
            (maj, min) <= (max_major, max_minor),
            "PTX ISA {isa} is newer than driver {} can JIT",
            pins.min_driver
        );
    }
}

/// cuobjdump, independently of kiln's own readers: every Rust kernel (kernels/rust) is an entry
/// of every SASS target's cubin (`--dump-elf-symbols`, per `arch =` block) and of every PTX
/// target's PTX (`--dump-ptx`), and the manifest records them as "rust" with the rustc.
#[test]
fn every_rust_kernel_is_in_every_target_per_cuobjdump() {
    let manifest = kiln_kernels::manifest();
    let rust: Vec<&str> = manifest.kernels_in("rust");
    let mut want = Vec::new();
    for op in ["vecadd", "vecadd_flat", "silu_mul", "rmsnorm", "softmax"] {
        for dtype in ["f32", "f16", "bf16"] {
            want.push(format!("rs_{op}_{dtype}"));
        }
    }
    let mut sorted = want.clone();
    sorted.sort();
    assert_eq!(rust, sorted, "the manifest's Rust kernels");
    assert!(manifest.kernel_rustc_version.contains("release: "));

    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("kernels.fatbin");
    std::fs::write(&file, kiln_kernels::fatbin()).unwrap();
    // One block per image: "Fatbin elf code:" / "Fatbin ptx code:", then "arch = sm_NN".
    let per_arch = |listing: &str, header: &str| -> Vec<(String, String)> {
        listing
            .split(header)
            .skip(1)
            .map(|block| {
                let arch = block
                    .lines()
                    .find_map(|l| l.trim().strip_prefix("arch = "))
                    .unwrap_or("?")
                    .to_string();
                (arch, block.to_string())
            })
            .collect()
    };
    let elf = per_arch(
        &cuobjdump_on(&["--dump-elf-symbols"], &file),
        "Fatbin elf code:",
    );
    let ptx = per_arch(&cuobjdump_on(&["--dump-ptx"], &file), "Fatbin ptx code:");
    let pins = pins();
    let targets = pins.matrix.targets();
    let sass = targets
        .iter()
        .filter(|t| t.kind == TargetKind::Sass)
        .count();
    let ptx_targets = targets.iter().filter(|t| t.kind == TargetKind::Ptx).count();
    assert_eq!(
        (elf.len(), ptx.len()),
        (sass, ptx_targets),
        "one image per target"
    );
    for (arch, block) in &elf {
        for k in &want {
            assert!(
                block
                    .lines()
                    .any(|l| l.contains("STO_ENTRY")
                        && l.split_whitespace().last() == Some(k.as_str())),
                "cuobjdump: {k} is not an entry of the {arch} cubin"
            );
        }
    }
    for (arch, block) in &ptx {
        for k in &want {
            assert!(
                block.contains(&format!(".entry {k}(")),
                "cuobjdump: {k} is not in the {arch} PTX"
            );
        }
    }
}

#[test]
fn abi_params_struct_matches_the_header() {
    // bindgen's own layout tests run in this crate too; this pins the size the kernels rely on.
    assert_eq!(
        std::mem::size_of::<kiln_kernels::abi::KilnAxpbyParams>(),
        16
    );
}

#[test]
fn the_manifest_is_in_its_own_section_of_this_binary() {
    let exe = std::fs::read(std::env::current_exe().unwrap()).unwrap();
    let out = Command::new("objcopy")
        .args([
            "-O",
            "binary",
            "--only-section",
            kiln_kernels::MANIFEST_SECTION_NAME,
        ])
        .arg(std::env::current_exe().unwrap())
        .arg("/dev/stdout")
        .output();
    // Fall back to a byte search when binutils is absent; the section name is what matters.
    match out {
        Ok(o) if o.status.success() && !o.stdout.is_empty() => {
            assert_eq!(o.stdout, kiln_kernels::MANIFEST_JSON.as_bytes());
        }
        _ => {
            let needle = kiln_kernels::MANIFEST_SECTION_NAME.as_bytes();
            assert!(
                exe.windows(needle.len()).any(|w| w == needle),
                "no {} section name in the binary",
                kiln_kernels::MANIFEST_SECTION_NAME
            );
        }
    }
}

/// A one-module build has one module, "kernels": the whole fatbin, found by name.
#[test]
fn the_one_module_is_the_whole_fatbin_by_name() {
    assert_eq!(kiln_kernels::MODULES.len(), 1);
    let m = kiln_kernels::module("kernels").expect("module \"kernels\"");
    assert_eq!(m.as_ptr(), kiln_kernels::fatbin().as_ptr());
    assert_eq!(m.len(), kiln_kernels::fatbin().len());
    assert!(kiln_kernels::module("softmax").is_none());
}
