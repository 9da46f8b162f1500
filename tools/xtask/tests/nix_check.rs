//! `cargo xtask nix-check` on copies of the repository's flake, each deliberately broken in one
//! way: it must fail, and say why in words a user can act on. The unbroken copy must pass.
//!
//! Nix, nixpkgs-fmt and deadnix come from the workspace's `.toolchain/` (installed there by the
//! first run when missing).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Once;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

fn xtask() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_xtask"));
    c.arg("nix-check")
        .arg("--toolchain")
        .arg(workspace().join(".toolchain"));
    c
}

/// Install the tools once, before the tests race for them.
fn tools() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let out = xtask().arg("--tools-only").output().unwrap();
        assert!(
            out.status.success(),
            "installing the nix-check tools failed:\n{}",
            text(&out)
        );
    });
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let dest = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &dest);
        } else {
            std::fs::copy(entry.path(), &dest).unwrap();
        }
    }
}

/// The files git tracks under `rel` in `ws`, copied to the same place under `to`.
fn copy_tracked(ws: &Path, rel: &str, to: &Path) {
    let out = Command::new("git")
        .current_dir(ws)
        .args(["ls-files", "-z", "--", rel])
        .output()
        .unwrap();
    for f in out.stdout.split(|b| *b == 0).filter(|f| !f.is_empty()) {
        let f = String::from_utf8_lossy(f).into_owned();
        let (from, dest) = (ws.join(&f), to.join(&f));
        std::fs::create_dir_all(dest.parent().unwrap()).unwrap();
        if std::fs::symlink_metadata(&from)
            .unwrap()
            .file_type()
            .is_symlink()
        {
            std::os::unix::fs::symlink(std::fs::read_link(&from).unwrap(), &dest).unwrap();
        } else {
            std::fs::copy(&from, &dest).unwrap();
        }
    }
}

/// The flake and everything it reads, copied to a plain (non-git) directory.
struct Fixture {
    dir: tempfile::TempDir,
}

impl Fixture {
    fn new() -> Fixture {
        tools();
        let ws = workspace();
        let dir = tempfile::tempdir().unwrap();
        for f in ["flake.nix", "flake.lock", "Cargo.toml", "Cargo.lock"] {
            std::fs::copy(ws.join(f), dir.path().join(f)).unwrap();
        }
        // The kernel sources (nix/kernel-jobs.nix plans one derivation per compile job from them).
        copy_dir(
            &ws.join("kernels/include"),
            &dir.path().join("kernels/include"),
        );
        for e in std::fs::read_dir(ws.join("kernels")).unwrap().flatten() {
            if e.path().extension().is_some_and(|x| x == "cu") {
                std::fs::copy(e.path(), dir.path().join("kernels").join(e.file_name())).unwrap();
            }
        }
        // The Rust kernel crate (its jobs are derivations; its lock is vendored), every crate
        // (the kernel job tool is built from kiln-build's closure of them) and xtask's sources
        // (edited by the drvPath-stability test).
        copy_dir(
            &ws.join("kernels/rust/src"),
            &dir.path().join("kernels/rust/src"),
        );
        for f in ["Cargo.toml", "Cargo.lock"] {
            std::fs::copy(
                ws.join("kernels/rust").join(f),
                dir.path().join("kernels/rust").join(f),
            )
            .unwrap();
        }
        copy_tracked(&ws, "crates", dir.path());
        copy_tracked(&ws, "tools/xtask/src", dir.path());
        copy_dir(&ws.join("nix"), &dir.path().join("nix"));
        copy_dir(&ws.join("checks/nix"), &dir.path().join("checks/nix"));
        // templates.default (the consumer fixture), without any build output it may hold.
        for f in consumer_files() {
            let to = dir.path().join("checks/consumer").join(&f);
            std::fs::create_dir_all(to.parent().unwrap()).unwrap();
            std::fs::copy(ws.join("checks/consumer").join(&f), to).unwrap();
        }
        Fixture { dir }
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    /// Replace `from` (which must occur) by `to` in one file.
    fn edit(&self, rel: &str, from: &str, to: &str) -> &Self {
        let p = self.path(rel);
        let s = std::fs::read_to_string(&p).unwrap();
        assert!(s.contains(from), "{rel} does not contain {from:?}");
        std::fs::write(&p, s.replacen(from, to, 1)).unwrap();
        self
    }

    fn set_cargo_line(&self, key: &str, value: &str) -> &Self {
        let p = self.path("Cargo.toml");
        let s = std::fs::read_to_string(&p).unwrap();
        let line = s
            .lines()
            .find(|l| l.trim_start().starts_with(&format!("{key} =")))
            .unwrap_or_else(|| panic!("Cargo.toml has no `{key} =` line"))
            .to_string();
        std::fs::write(&p, s.replacen(&line, &format!("{key} = {value}"), 1)).unwrap();
        self
    }

    fn check(&self) -> Output {
        xtask().arg("--repo").arg(self.dir.path()).output().unwrap()
    }
}

#[track_caller]
fn assert_fails_with(out: &Output, needles: &[&str]) {
    let t = text(out);
    assert!(
        !out.status.success(),
        "nix-check passed but should have failed:\n{t}"
    );
    for n in needles {
        assert!(t.contains(n), "nix-check output lacks {n:?}:\n{t}");
    }
}

#[test]
fn the_unbroken_flake_passes() {
    let out = Fixture::new().check();
    let t = text(&out);
    assert!(out.status.success(), "{t}");
    assert!(
        t.contains("devShells.x86_64-linux.default = /nix/store/"),
        "{t}"
    );
    assert!(
        t.contains("packages.x86_64-linux.wheel = /nix/store/"),
        "{t}"
    );
}

/// `nix eval --json` of one attribute of the wheel package, against the test doubles.
fn eval_wheel_attr(attr: &str) -> serde_json::Value {
    let f = Fixture::new();
    let out = Command::new(nix_bin())
        .args([
            "--extra-experimental-features",
            "nix-command flakes",
            "eval",
            "--json",
            "--offline",
        ])
        .args(["--no-write-lock-file"])
        .args(doubles(&f))
        .arg(format!(
            "path:{}#packages.x86_64-linux.wheel.{attr}",
            f.dir.path().display()
        ))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn the_wheel_gets_requires_dist_from_the_runtime_pins() {
    // The same Requires-Dist `cargo xtask wheel` writes: one `wheel` + declared range
    // (`requires`, e.g. nvidia-cudnn-cu13>=9.19,<10) per default feature of kiln-py that names
    // a [workspace.metadata.kiln.runtime] entry.
    let got: Vec<String> = serde_json::from_value(eval_wheel_attr("requiresDist")).unwrap();
    let cargo: toml::Table = std::fs::read_to_string(workspace().join("Cargo.toml"))
        .unwrap()
        .parse()
        .unwrap();
    let runtime = &cargo["workspace"]["metadata"]["kiln"]["runtime"];
    let py: toml::Table = std::fs::read_to_string(workspace().join("crates/kiln-py/Cargo.toml"))
        .unwrap()
        .parse()
        .unwrap();
    let want: Vec<String> = py["features"]["default"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|f| runtime.get(f.as_str().unwrap()))
        .map(|r| {
            format!(
                "{}{}",
                r["wheel"].as_str().unwrap(),
                r["requires"].as_str().unwrap()
            )
        })
        .collect();
    assert!(!want.is_empty());
    assert_eq!(got, want);
}

#[test]
fn nix_and_xtask_tag_the_wheel_alike() {
    // Both read the level from [workspace.metadata.kiln.wheel]; neither restates it.
    let got: String = serde_json::from_value(eval_wheel_attr("manylinux")).unwrap();
    let pins = kiln_pins::Pins::load(&workspace().join("Cargo.toml")).unwrap();
    assert_eq!(
        Some(got.as_str()),
        pins.wheel.as_ref().map(|w| w.manylinux.as_str())
    );
    for file in [
        "tools/xtask/src/wheel.rs",
        "nix/wheel.nix",
        "nix/wheel-build.sh",
    ] {
        let text = std::fs::read_to_string(workspace().join(file)).unwrap();
        assert!(!text.contains(&got), "{file} restates {got}");
    }
}

#[test]
fn unknown_nightly_date_is_named() {
    let f = Fixture::new();
    f.set_cargo_line("rust-nightly", "\"2026-02-30\"");
    assert_fails_with(
        &f.check(),
        &[
            "flake outputs evaluate",
            "rust-nightly = \"2026-02-30\"",
            "is not in the locked rust-overlay",
        ],
    );
}

#[test]
fn ptx_below_the_highest_arch_cannot_be_expressed() {
    let f = Fixture::new();
    f.set_cargo_line("archs", r#"["8.0+PTX", "9.0", "12.0"]"#);
    assert_fails_with(
        &f.check(),
        &[
            "arch matrix entry nixpkgs cannot express",
            "\"8.0+PTX\"",
            "not the highest",
        ],
    );
}

#[test]
fn two_ptx_targets_cannot_be_expressed() {
    let f = Fixture::new();
    f.set_cargo_line("archs", r#"["8.0", "10.0+PTX", "12.0+PTX"]"#);
    assert_fails_with(
        &f.check(),
        &[
            "arch matrix entry nixpkgs cannot express",
            "all ask for PTX",
        ],
    );
}

#[test]
fn ptx_of_a_family_target_cannot_be_expressed() {
    let f = Fixture::new();
    f.set_cargo_line("archs", r#"["8.0", "12.0f+PTX"]"#);
    assert_fails_with(
        &f.check(),
        &["arch matrix entry nixpkgs cannot express", "\"12.0f+PTX\""],
    );
}

/// Evaluates one attribute of the fixture's flake (with the doubles) as JSON.
fn eval_json(f: &Fixture, attr: &str, apply: Option<&str>) -> serde_json::Value {
    let mut cmd = Command::new(nix_bin());
    cmd.args([
        "--extra-experimental-features",
        "nix-command flakes",
        "eval",
        "--json",
        "--offline",
        "--no-write-lock-file",
    ])
    .args(doubles(f))
    .arg(format!("path:{}#{attr}", f.dir.path().display()));
    if let Some(a) = apply {
        cmd.args(["--apply", a]);
    }
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{attr}: {}", text(&out));
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn the_arch_matrix_goes_to_kiln_derivations_only_and_cudnn_nccl_stay_out_of_them() {
    let f = Fixture::new();
    // kiln's derivations carry the matrix (in nixpkgs' capability terms) ...
    let caps = eval_json(
        &f,
        "packages.x86_64-linux.wheel.KILN_CUDA_CAPABILITIES",
        None,
    );
    // ... the matrix of Cargo.toml (read here by kiln-pins, not restated), in nixpkgs' order:
    // the SASS-only entries ascending, then the `+PTX` one.
    let pins = kiln_pins::Pins::load(&workspace().join("Cargo.toml")).unwrap();
    let mut sass_only: Vec<kiln_pins::Arch> = pins
        .matrix
        .entries()
        .iter()
        .filter(|e| !e.ptx)
        .map(|e| e.arch)
        .collect();
    sass_only.sort();
    let expected: Vec<String> = sass_only
        .into_iter()
        .chain(pins.matrix.ptx())
        .map(|a| a.to_string())
        .collect();
    assert_eq!(caps, expected.join(";"));
    // ... while no crane derivation has cuDNN or NCCL among its inputs (cudarc opens them at
    // run time; a custom-capability NCCL would be a local rebuild no cache holds).
    let names = "d: map (x: x.pname or x.name or \"?\") ((d.buildInputs or [ ]) ++ (d.nativeBuildInputs or [ ]))";
    for attr in [
        "packages.x86_64-linux.wheel",
        "packages.x86_64-linux.kernels",
        "checks.x86_64-linux.nextest",
        "checks.x86_64-linux.clippy",
    ] {
        let inputs = eval_json(&f, attr, Some(names));
        let inputs: Vec<&str> = inputs
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|v| v.as_str())
            .collect();
        assert!(
            !inputs
                .iter()
                .any(|n| n.contains("cudnn") || n.contains("nccl")),
            "{attr} has {inputs:?}"
        );
    }
    // The dev shell has both.
    let shell = eval_json(&f, "devShells.x86_64-linux.default", Some(names));
    let shell = shell.to_string();
    assert!(shell.contains("cudnn") && shell.contains("nccl"), "{shell}");
}

/// The sandbox has no network: every crane derivation that builds kiln-kernels must vendor the
/// workspace's lockfile and kernels/rust's — and no standard-library lockfile: the nightly's
/// prebuilt nvptx64 `core` is used (no -Zbuild-std), so no file nobody here can check is read.
#[test]
fn every_kernel_building_derivation_vendors_the_two_lockfiles_and_no_std_lock() {
    let f = Fixture::new();
    let locks = "d: map toString d.cargoVendorDir.cargoLockList";
    for attr in [
        "packages.x86_64-linux.wheel",
        "packages.x86_64-linux.wheel.cargoArtifacts",
        "packages.x86_64-linux.kernels",
        "checks.x86_64-linux.nextest",
        "checks.x86_64-linux.clippy",
    ] {
        let got = eval_json(&f, attr, Some(locks));
        let got: Vec<&str> = got
            .as_array()
            .unwrap_or_else(|| panic!("{attr}: {got}"))
            .iter()
            .filter_map(|v| v.as_str())
            .collect();
        assert!(
            got.len() == 2
                && got[0].ends_with("-source/Cargo.lock")
                && got[1].ends_with("-source/kernels/rust/Cargo.lock"),
            "{attr} vendors {got:?}; want the workspace's and kernels/rust's only"
        );
    }
}

#[test]
fn a_vendored_lockfile_that_is_missing_is_named() {
    // The crane double reads every lockfile path like crane does: a lockfile that is not there
    // is an evaluation error naming it, not a silently smaller vendor directory.
    let f = Fixture::new();
    std::fs::remove_file(f.path("kernels/rust/Cargo.lock")).unwrap();
    let out = f.check();
    assert_fails_with(&out, &["kernels/rust/Cargo.lock"]);
}

#[test]
fn malformed_arch_entry_is_named() {
    let f = Fixture::new();
    f.set_cargo_line("archs", r#"["sm_80", "12.0+PTX"]"#);
    assert_fails_with(&f.check(), &["arch matrix entry \"sm_80\"", "MAJOR.MINOR"]);
}

#[test]
fn nvcc_pin_the_locked_nixpkgs_lacks_is_named() {
    let f = Fixture::new();
    f.set_cargo_line("nvcc", "\"13.0.99\"");
    assert_fails_with(
        &f.check(),
        &["cuda_nvcc is 13.0.88, but Cargo.toml pins nvcc = \"13.0.99\""],
    );
}

/// The deliberate break of issue 10: the facts (what the locked nixpkgs gives) say another
/// cuDNN than the pins accept.
#[test]
fn a_cudnn_fact_other_than_the_pin_is_named_with_both_versions_and_the_file() {
    let f = Fixture::new();
    f.edit(
        "checks/nix/doubles/nixpkgs/facts.toml",
        "version = \"9.22.0.52\"",
        "version = \"9.23.0.39\"",
    );
    assert_fails_with(
        &f.check(),
        &[
            "facts about the locked nixpkgs",
            "cudaPackages_13_0.cudnn is 9.23.0.39",
            "[workspace.metadata.kiln.runtime.cudnn] version = \"9.22.0.52\"",
            "checks/nix/doubles/nixpkgs/facts.toml",
        ],
    );
}

/// Outside the declared ABI range, the flake itself (the dev shell) refuses it too.
#[test]
fn a_cudnn_outside_the_abi_range_is_refused_by_the_flake() {
    let f = Fixture::new();
    f.edit(
        "checks/nix/doubles/nixpkgs/facts.toml",
        "version = \"9.22.0.52\"",
        "version = \"10.0.0.1\"",
    );
    assert_fails_with(
        &f.check(),
        &[
            "flake outputs evaluate",
            "cudaPackages_13_0.cudnn is 10.0.0.1, outside the ABI range",
            "requires = \">=9.19,<10\"",
        ],
    );
}

#[test]
fn a_lock_the_facts_do_not_describe_is_named() {
    let f = Fixture::new();
    for file in ["flake.nix", "flake.lock"] {
        f.edit(
            file,
            "104240a772428cc2e20d8fd86c9ddbb886bbaff2",
            "0123456789abcdef0123456789abcdef01234567",
        );
    }
    assert_fails_with(
        &f.check(),
        &[
            "flake.lock locks nixpkgs 0123456789abcdef0123456789abcdef01234567",
            "describes nixpkgs 104240a772428cc2e20d8fd86c9ddbb886bbaff2",
        ],
    );
}

#[test]
fn a_pin_released_after_the_locked_nixpkgs_is_named() {
    let f = Fixture::new();
    f.edit(
        "Cargo.toml",
        "version = \"9.22.0.52\"",
        "version = \"9.27.0.42\"",
    );
    assert_fails_with(
        &f.check(),
        &[
            "Cargo.toml pins cudnn 9.27.0.42, released 2026-09-29",
            "after the locked nixpkgs 104240a7 (2026-08-03)",
        ],
    );
}

#[test]
fn a_maturin_the_locked_nixpkgs_lacks_is_named() {
    let f = Fixture::new();
    f.set_cargo_line("maturin", "\"1.16.0\"");
    assert_fails_with(
        &f.check(),
        &[
            "maturin is 1.14.1 at the locked nixpkgs",
            "nixpkgs has maturin 1.14.1, but Cargo.toml pins maturin = \"1.16.0\"",
        ],
    );
}

#[test]
fn an_unfree_package_is_refused_without_allow_unfree() {
    // The double enforces nixpkgs' licence check: allowUnfree must matter.
    let f = Fixture::new();
    f.edit(
        "nix/pkgs.nix",
        "config.allowUnfree = true;",
        "config.allowUnfree = false;",
    );
    assert_fails_with(&f.check(), &["has an unfree license, refusing to evaluate"]);
}

#[test]
fn a_package_unavailable_on_a_system_is_refused() {
    // meta.available: NCCL without aarch64-linux makes that system's dev shell fail.
    let f = Fixture::new();
    f.edit(
        "checks/nix/doubles/nixpkgs/facts.toml",
        "version = \"2.30.7-1\"\noutputs = [\"out\", \"dev\", \"static\"]\nunfree = false\nplatforms = [\"x86_64-linux\", \"aarch64-linux\"]",
        "version = \"2.30.7-1\"\noutputs = [\"out\", \"dev\", \"static\"]\nunfree = false\nplatforms = [\"x86_64-linux\"]",
    );
    assert_fails_with(
        &f.check(),
        &["not available on the requested hostPlatform aarch64-linux"],
    );
}

#[test]
fn misspelt_nixpkgs_attribute_fails() {
    let f = Fixture::new();
    f.edit(
        "nix/cuda.nix",
        "cudaPackages.cuda_nvcc\n",
        "cudaPackages.cuda_nvc\n",
    );
    assert_fails_with(&f.check(), &["attribute 'cuda_nvc' missing"]);
}

#[test]
fn misspelt_crane_attribute_fails() {
    let f = Fixture::new();
    f.edit(
        "nix/crates.nix",
        "craneLib.buildDepsOnly",
        "craneLib.buildDepOnly",
    );
    assert_fails_with(&f.check(), &["attribute 'buildDepOnly' missing"]);
}

#[test]
fn misspelt_rust_extension_fails() {
    let f = Fixture::new();
    f.edit("nix/toolchain.nix", "\"clippy\"", "\"clipy\"");
    assert_fails_with(&f.check(), &["Component `clipy` doesn't exist"]);
}

#[test]
fn lock_out_of_date_with_flake_nix_is_explained() {
    let f = Fixture::new();
    f.edit(
        "flake.nix",
        "github:NixOS/nixpkgs/104240a772428cc2e20d8fd86c9ddbb886bbaff2",
        "github:NixOS/nixpkgs/nixos-26.05",
    );
    assert_fails_with(
        &f.check(),
        &[
            "flake.lock is out of date with flake.nix",
            "input `nixpkgs`",
        ],
    );
}

#[test]
fn lock_without_follows_is_explained() {
    let f = Fixture::new();
    f.edit("flake.nix", "inputs.nixpkgs.follows = \"nixpkgs\";", "");
    assert_fails_with(
        &f.check(),
        &[
            "flake.lock is out of date",
            "input `rust-overlay`",
            "following",
        ],
    );
}

#[test]
fn unformatted_nix_fails() {
    let f = Fixture::new();
    f.edit(
        "nix/pkgs.nix",
        "config.allowUnfree = true;",
        "config.allowUnfree   =   true;",
    );
    assert_fails_with(
        &f.check(),
        &["nixpkgs-fmt --check", "not formatted", "nix/pkgs.nix"],
    );
}

#[test]
fn dead_nix_code_fails() {
    let f = Fixture::new();
    f.edit(
        "nix/crates.nix",
        "  arch = import ./arch.nix pins.archs;\n",
        "  arch = import ./arch.nix pins.archs;\n  unused = 1;\n",
    );
    assert_fails_with(&f.check(), &["deadnix --fail", "nix/crates.nix", "unused"]);
}

#[test]
fn unparsable_nix_fails() {
    let f = Fixture::new();
    f.edit(
        "nix/driver.nix",
        "builtins.readFile ./driver-hook.sh",
        "builtins.readFile ./driver-hook.sh;;",
    );
    assert_fails_with(
        &f.check(),
        &["parse every .nix file", "nix/driver.nix", "syntax error"],
    );
}

#[test]
fn a_double_without_an_attribute_the_flake_uses_fails() {
    // Strictness of the doubles: drop one attribute kiln uses from the facts the nixpkgs
    // double is generated from.
    let f = Fixture::new();
    f.edit(
        "checks/nix/doubles/nixpkgs/facts.toml",
        "[attr.\"cargo-nextest\"]",
        "[attr.\"cargo-nextest-renamed\"]",
    );
    assert_fails_with(&f.check(), &["attribute 'cargo-nextest' missing"]);
}

/// The nix that `nix-check` uses: KILN_NIX_BIN, .toolchain/nix, or the one on PATH.
fn nix_bin() -> PathBuf {
    if let Some(dir) = std::env::var_os("KILN_NIX_BIN") {
        return PathBuf::from(dir).join("nix");
    }
    let private = workspace().join(".toolchain/nix/bin/nix");
    if private.exists() {
        private
    } else {
        PathBuf::from("nix")
    }
}

fn doubles(f: &Fixture) -> Vec<String> {
    ["nixpkgs", "crane", "rust-overlay"]
        .iter()
        .flat_map(|d| {
            [
                "--override-input".to_string(),
                d.to_string(),
                format!("path:{}", f.path("checks/nix/doubles").join(d).display()),
            ]
        })
        .collect()
}

// --- templates.default: the consumer project, initialised and evaluated -------------------

/// checks/consumer's tracked files (relative), as a fresh clone holds them.
fn consumer_files() -> Vec<PathBuf> {
    let out = Command::new("git")
        .arg("-C")
        .arg(workspace())
        .args(["ls-files", "-z", "--", "checks/consumer"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let files: Vec<PathBuf> = out
        .stdout
        .split(|b| *b == 0)
        .filter(|p| !p.is_empty())
        .map(|p| {
            Path::new(std::str::from_utf8(p).unwrap())
                .strip_prefix("checks/consumer")
                .unwrap()
                .to_path_buf()
        })
        .collect();
    assert!(
        files.iter().any(|f| f == Path::new("flake.nix")),
        "{files:?}"
    );
    files
}

fn nix_in(dir: &Path) -> Command {
    let mut c = Command::new(nix_bin());
    c.current_dir(dir).args([
        "--extra-experimental-features",
        "nix-command flakes",
        "--offline",
    ]);
    c
}

/// `nix flake init -t` of the kiln fixture into a fresh directory, offline (the templates
/// output reads none of kiln's inputs).
fn init_template(f: &Fixture) -> tempfile::TempDir {
    let proj = tempfile::tempdir().unwrap();
    let out = nix_in(proj.path())
        .args(["flake", "init", "-t"])
        .arg(format!("path:{}", f.dir.path().display()))
        .output()
        .unwrap();
    assert!(out.status.success(), "nix flake init -t: {}", text(&out));
    proj
}

/// The project's kiln input is the kiln fixture; kiln's inputs are the doubles.
fn template_overrides(f: &Fixture) -> Vec<String> {
    let mut v = vec![
        "--no-write-lock-file".to_string(),
        "--override-input".into(),
        "kiln".into(),
        format!("path:{}", f.dir.path().display()),
    ];
    for pair in doubles(f).chunks(3) {
        v.extend([
            pair[0].clone(),
            format!("kiln/{}", pair[1]),
            pair[2].clone(),
        ]);
    }
    v
}

fn template_eval(f: &Fixture, proj: &Path, attr: &str) -> Output {
    nix_in(proj)
        .args(["eval", "--raw"])
        .args(template_overrides(f))
        .arg(format!("path:{}#{attr}", proj.display()))
        .output()
        .unwrap()
}

/// The template is the consumer fixture CI builds, file for file, and every output of the
/// project it creates evaluates against kiln's Nix test inputs.
#[test]
fn the_template_is_the_consumer_fixture_and_evaluates() {
    let f = Fixture::new();
    let proj = init_template(&f);
    for rel in consumer_files() {
        let want = std::fs::read(workspace().join("checks/consumer").join(&rel)).unwrap();
        let got = std::fs::read(proj.path().join(&rel))
            .unwrap_or_else(|e| panic!("nix flake init did not write {}: {e}", rel.display()));
        assert!(
            got == want,
            "{} differs from checks/consumer",
            rel.display()
        );
    }
    let out = nix_in(proj.path())
        .args(["flake", "check", "--no-build", "--all-systems"])
        .args(template_overrides(&f))
        .arg(format!("path:{}", proj.path().display()))
        .output()
        .unwrap();
    assert!(out.status.success(), "template flake check: {}", text(&out));
    for attr in [
        "packages.x86_64-linux.default.drvPath",
        "packages.x86_64-linux.kiln.drvPath",
        "devShells.x86_64-linux.default.drvPath",
        "checks.x86_64-linux.audit.drvPath",
    ] {
        let out = template_eval(&f, proj.path(), attr);
        let t = String::from_utf8_lossy(&out.stdout).to_string();
        assert!(
            out.status.success() && t.starts_with("/nix/store/"),
            "{attr}: {}",
            text(&out)
        );
    }
    // The wheel builds the project (its name, its Cargo.lock) with kiln's kiln-build.
    let out = template_eval(&f, proj.path(), "packages.x86_64-linux.default.pname");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "kiln-consumer-example-wheel",
        "{}",
        text(&out)
    );
    // kiln-build through the project's own path: the project laid out as kiln's checks/consumer
    // beside kiln's source (nix/lib/buildWheel.nix; the phases: tests/phase_order.rs).
    let out = template_eval(
        &f,
        proj.path(),
        "packages.x86_64-linux.default.kilnProjectDir",
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "checks/consumer",
        "{}",
        text(&out)
    );
    let out = template_eval(&f, proj.path(), "packages.x86_64-linux.default.postUnpack");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("ln -s \"$kilnSrc/crates\""),
        "{}",
        text(&out)
    );
    // The gate's policy is the project's own Cargo.toml, not kiln's (read in the store,
    // which may be a private one).
    let out = nix_in(proj.path())
        .args(["eval", "--raw"])
        .args(template_overrides(&f))
        .arg(format!(
            "path:{}#checks.x86_64-linux.audit.policy",
            proj.path().display()
        ))
        .args(["--apply", "builtins.readFile"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        std::fs::read_to_string(workspace().join("checks/consumer/Cargo.toml")).unwrap()
    );
}

/// A project whose gate names no policy is refused at evaluation, naming the argument.
#[test]
fn the_template_gate_without_a_policy_fails() {
    let f = Fixture::new();
    let proj = init_template(&f);
    let flake = proj.path().join("flake.nix");
    let text_of = std::fs::read_to_string(&flake).unwrap();
    let broken = text_of.replace("          policy = ./Cargo.toml;\n", "");
    assert_ne!(broken, text_of);
    std::fs::write(&flake, broken).unwrap();
    let out = template_eval(&f, proj.path(), "checks.x86_64-linux.audit.drvPath");
    let t = text(&out);
    assert!(!out.status.success(), "{t}");
    assert!(t.contains("policy"), "{t}");
}

// --- the dev shell's driver discovery (nix/driver-hook.sh), run with bash -----------------

struct Host {
    dir: tempfile::TempDir,
}

impl Host {
    fn new() -> Host {
        Host {
            dir: tempfile::tempdir().unwrap(),
        }
    }
    fn lib(&self, rel: &str) -> PathBuf {
        let p = self.dir.path().join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, b"\x7fELF").unwrap();
        p
    }
    /// Source the hook with this search path and LD_LIBRARY_PATH; return (KILN_CUDA_DRIVER,
    /// LD_LIBRARY_PATH, stderr).
    fn hook(&self, search: &[&str], ld: &str) -> (String, String, String) {
        let abs: Vec<String> = search
            .iter()
            .map(|s| self.dir.path().join(s).display().to_string())
            .collect();
        let out = Command::new("bash")
            .arg("-c")
            .arg(format!(
                "set -u; . {}; printf '%s\\n%s\\n' \"${{KILN_CUDA_DRIVER:-}}\" \"${{LD_LIBRARY_PATH:-}}\"",
                workspace().join("nix/driver-hook.sh").display()
            ))
            .env("KILN_DRIVER_SEARCH_PATH", abs.join(":"))
            .env("LD_LIBRARY_PATH", ld)
            .env("XDG_CACHE_HOME", self.dir.path().join("cache"))
            .env_remove("KILN_CUDA_DRIVER_DIR")
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", text(&out));
        let stdout = String::from_utf8_lossy(&out.stdout).to_string();
        let mut lines = stdout.lines();
        (
            lines.next().unwrap_or("").to_string(),
            lines.next().unwrap_or("").to_string(),
            String::from_utf8_lossy(&out.stderr).to_string(),
        )
    }
}

#[test]
fn driver_hook_takes_the_host_driver_and_never_the_stub() {
    let h = Host::new();
    h.lib("cuda/lib/stubs/libcuda.so.1");
    h.lib("cuda/lib/stubs/libcuda.so");
    h.lib("usr/lib/libcuda.so.1");
    h.lib("usr/lib/libcuda.so.580.159");
    h.lib("usr/lib/libcuda.so");
    h.lib("usr/lib/libnvidia-ptxjitcompiler.so.1");
    h.lib("usr/lib/libc.so.6");
    let stub_dir = h.dir.path().join("cuda/lib/stubs").display().to_string();
    let (driver, ld, err) = h.hook(&["cuda/lib/stubs", "usr/lib"], &stub_dir);
    assert_eq!(
        driver,
        h.dir
            .path()
            .join("usr/lib/libcuda.so.1")
            .display()
            .to_string()
    );
    assert!(
        !ld.contains("stubs"),
        "stub dir left on LD_LIBRARY_PATH: {ld}"
    );
    assert!(err.contains("removed CUDA stub directory"), "{err}");
    // Only the driver's own libraries are exposed, never the host's libc, never the
    // unversioned name.
    let link_dir = PathBuf::from(ld.split(':').next().unwrap());
    let mut names: Vec<String> = std::fs::read_dir(&link_dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "libcuda.so.1",
            "libcuda.so.580.159",
            "libnvidia-ptxjitcompiler.so.1"
        ]
    );
}

#[test]
fn driver_hook_refuses_a_link_into_a_stub_directory() {
    let h = Host::new();
    let stub = h.lib("toolkit/lib/stubs/libcuda.so.1");
    std::fs::create_dir_all(h.dir.path().join("sneaky")).unwrap();
    std::os::unix::fs::symlink(&stub, h.dir.path().join("sneaky/libcuda.so.1")).unwrap();
    let (driver, _ld, err) = h.hook(&["sneaky"], "");
    assert_eq!(driver, "");
    assert!(
        err.contains("no NVIDIA driver (libcuda.so.1) found"),
        "{err}"
    );
}

#[test]
fn driver_hook_prefers_nixos_opengl_driver_dir_first_in_its_list() {
    let hook = std::fs::read_to_string(workspace().join("nix/driver-hook.sh")).unwrap();
    let default_list = hook
        .lines()
        .find(|l| l.contains("candidates=\"/run/opengl-driver/lib\""))
        .is_some();
    assert!(default_list, "the NixOS driver directory must come first");
}

#[test]
fn an_output_that_needs_import_from_derivation_is_named() {
    // The deliberate break of issue 24: the standard library's lock read from the toolchain's
    // rust-src (what -Zbuild-std would need). crane (and its double) readFile every lock, so
    // every crate output then builds the nightly during evaluation; with IFD forbidden each
    // such output is named.
    let f = Fixture::new();
    f.edit(
        "nix/crates.nix",
        "      (root + \"/kernels/rust/Cargo.lock\")\n    ];",
        "      (root + \"/kernels/rust/Cargo.lock\")\n      \"${toolchain.rust}/lib/rustlib/src/rust/library/Cargo.lock\"\n    ];",
    );
    assert_fails_with(
        &f.check(),
        &[
            "every output of both systems evaluates without import-from-derivation",
            "packages.x86_64-linux.wheel: error: cannot build",
            "packages.aarch64-linux.wheel: error: cannot build",
            "overlays.default (kiln on a x86_64-linux nixpkgs)",
            "'allow-import-from-derivation' is disabled",
        ],
    );
}

#[test]
fn the_wheels_dependency_build_is_maturins_own() {
    // maturin --zig builds under target/<triple>/ with cargo-zigbuild's linker, which cargo
    // hashes into every fingerprint: only a dependency build made by the same maturin command is
    // reused (nix/wheel.nix). The workspace's plain cargo dependency build would not be.
    let f = Fixture::new();
    let wheel = eval_json(
        &f,
        "packages.x86_64-linux.wheel.buildPhaseCargoCommand",
        None,
    );
    let deps = eval_json(
        &f,
        "packages.x86_64-linux.wheel.cargoArtifacts.buildPhaseCargoCommand",
        None,
    );
    assert_eq!(
        wheel, deps,
        "the dependency build must run the wheel's own maturin step"
    );
    assert!(
        deps.as_str().is_some_and(|c| c.contains("wheel-build.sh")),
        "{deps}"
    );
    let script = std::fs::read_to_string(workspace().join("nix/wheel-build.sh")).unwrap();
    let stop = script
        .find("CRANE_BUILD_DEPS_ONLY")
        .expect("wheel-build.sh stops after maturin in crane's dependency build");
    assert!(
        stop > script.find("maturin build").unwrap()
            && stop < script.find("wheel finalize").unwrap(),
        "the dependency build runs maturin and stops before finalizing"
    );
}

/// docs/install.md's `nix run <kiln>#kiln -- …` and `nix run <kiln> -- …`: with no `apps`
/// output, `nix run` runs the package's `meta.mainProgram`, which must be the CLI for both.
#[test]
fn nix_run_runs_the_kiln_cli() {
    let f = Fixture::new();
    for pkg in ["kiln", "default"] {
        let program = eval_json(
            &f,
            &format!("packages.x86_64-linux.{pkg}.meta.mainProgram"),
            None,
        );
        assert_eq!(program, "kiln", "packages.{pkg}");
    }
}

/// The job derivations of `f`, id -> drvPath, and each source's headers.
fn kernel_jobs(f: &Fixture) -> (BTreeMap<String, String>, BTreeMap<String, Vec<String>>) {
    let v = eval_json(
        f,
        "lib.x86_64-linux.kernelJobs",
        Some("k: { jobs = builtins.mapAttrs (_: d: d.drvPath) k.jobs; inherit (k) headers; }"),
    );
    (
        serde_json::from_value(v["jobs"].clone()).unwrap(),
        serde_json::from_value(v["headers"].clone()).unwrap(),
    )
}

/// The job ids every kind of job has: what a header or source edit reaches beyond its compiles.
fn is_link_or_merge(id: &str) -> bool {
    id.starts_with("link:") || id.starts_with("merge:")
}

#[test]
fn a_header_edit_changes_exactly_the_job_derivations_of_the_sources_that_include_it() {
    let f = Fixture::new();
    let (before, headers) = kernel_jobs(&f);
    // 7 sources x 7 targets, the Rust PTX, ptxas per SASS target, a link per target, the merge.
    assert_eq!(before.len(), 49 + 1 + 6 + 7 + 1, "{:?}", before.keys());
    // A header some sources read and others do not.
    let includers_of = |header: &str| -> BTreeSet<&String> {
        (headers.iter())
            .filter(|(_, hs)| hs.iter().any(|h| h == header))
            .map(|(s, _)| s)
            .collect()
    };
    let all: BTreeSet<&String> = headers.values().flatten().collect();
    let header = all
        .into_iter()
        .find(|h| !includers_of(h).is_empty() && includers_of(h).len() < headers.len())
        .expect("a header read by some sources only")
        .clone();
    let includers = includers_of(&header);
    let p = f.path(&format!("kernels/{header}"));
    let text = std::fs::read_to_string(&p).unwrap();
    std::fs::write(&p, format!("{text}\n// edited\n")).unwrap();
    let (after, _) = kernel_jobs(&f);
    let changed: BTreeSet<&String> = (before.iter())
        .filter(|(id, drv)| after.get(*id) != Some(*drv))
        .map(|(id, _)| id)
        .collect();
    // Its includers' compiles, and the links (and merge) that plan every compile; no other
    // compile, and not the Rust crate's PTX or its assemblies.
    let expected: BTreeSet<&String> = (before.keys())
        .filter(|id| {
            is_link_or_merge(id)
                || includers
                    .iter()
                    .any(|s| id.starts_with(&format!("compile:{s}:")))
        })
        .collect();
    assert_eq!(changed, expected);
    // A source's own edit: its 7 compiles and the links, no other.
    f.edit("kernels/vecadd.cu", "", "// edited\n");
    let (edited, _) = kernel_jobs(&f);
    let changed: Vec<&String> = (after.iter())
        .filter(|(id, drv)| edited.get(*id) != Some(*drv))
        .filter(|(id, _)| !is_link_or_merge(id))
        .map(|(id, _)| id)
        .collect();
    assert_eq!(changed.len(), 7, "{changed:?}");
    assert!(changed
        .iter()
        .all(|id| id.starts_with("compile:vecadd.cu:")));
}

/// Job derivations survive unrelated edits: code of crates outside kiln-build's closure
/// (kiln-audit, kiln-doctor), xtask, and tables of Cargo.toml no kernel reads reach none of
/// them; an edit to kiln-build's key code reaches every one (the job tool is rebuilt).
#[test]
fn unrelated_edits_reach_no_job_and_kiln_builds_own_code_reaches_all() {
    let f = Fixture::new();
    let (before, _) = kernel_jobs(&f);
    let changed_by = |f: &Fixture| -> Vec<String> {
        let (after, _) = kernel_jobs(f);
        assert_eq!(after.len(), before.len());
        (before.iter())
            .filter(|(id, drv)| after.get(*id) != Some(*drv))
            .map(|(id, _)| id.clone())
            .collect()
    };
    for file in [
        "crates/kiln-audit/src/lib.rs",
        "crates/kiln-doctor/src/lib.rs",
        "tools/xtask/src/main.rs",
    ] {
        let p = f.path(file);
        let text = std::fs::read_to_string(&p).unwrap();
        std::fs::write(&p, format!("{text}\n// edited\n")).unwrap();
        let changed = changed_by(&f);
        assert!(changed.is_empty(), "an edit to {file} changed {changed:?}");
    }
    // A table no kernel job reads (the wheel's runtime pins, the test tools).
    f.set_cargo_line("pytest", "\"9.2.1\"");
    let changed = changed_by(&f);
    assert!(changed.is_empty(), "a test-tools pin changed {changed:?}");
    // kiln-build's key code: every job.
    let p = f.path("crates/kiln-build/src/cache.rs");
    let text = std::fs::read_to_string(&p).unwrap();
    std::fs::write(&p, format!("{text}\n// edited\n")).unwrap();
    let changed = changed_by(&f);
    assert_eq!(changed.len(), before.len(), "{changed:?}");
}

/// The image holds Python, kiln's wheel, the runtime libraries and the CLI, and nothing that
/// provides libcuda (the NVIDIA container toolkit mounts the host driver's): no driver stub
/// output among its contents, and adding one is refused at evaluation, naming it.
#[test]
fn the_image_holds_no_libcuda_and_a_stub_in_it_is_refused() {
    let f = Fixture::new();
    for system in ["x86_64-linux", "aarch64-linux"] {
        let names = eval_json(
            &f,
            &format!("packages.{system}.image.contents"),
            Some("cs: map (c: c.name + \"/\" + (c.outputName or \"out\")) cs"),
        );
        let names: Vec<&str> = names
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|v| v.as_str())
            .collect();
        assert!(
            names.iter().any(|n| n.starts_with("kiln-site-packages"))
                && names.iter().any(|n| n.starts_with("cudnn")),
            "{system}: {names:?}"
        );
        assert!(
            !names
                .iter()
                .any(|n| n.ends_with("/stubs") || n.contains("libcuda")),
            "{system}: {names:?}"
        );
    }
    f.edit(
        "nix/image.nix",
        "  contents = [ python crates.kiln site ] ++ runtimeLibs;",
        "  contents = [ python crates.kiln site cuda.cudaPackages.cuda_cudart.stubs ] ++ runtimeLibs;",
    );
    assert_fails_with(
        &f.check(),
        &["is a driver stub output (a fake libcuda); it must not be in the image"],
    );
}
