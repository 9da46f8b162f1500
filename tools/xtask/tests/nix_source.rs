//! The flake's source set (nix/source.nix) through the crane double is the one real crane gives
//! over the real nixpkgs `lib.fileset`: the same store path, hence the same files.
//!
//! Needs the real sources, which are never committed: KILN_REAL_CRANE (an unpacked `git
//! archive` of the locked crane revision) and KILN_REAL_NIXPKGS_LIB (nix-community/nixpkgs.lib,
//! the real `lib/` in a small repository). Without them the test says so and passes nothing
//! off as checked.

use std::path::{Path, PathBuf};
use std::process::Command;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

fn nix() -> PathBuf {
    let ws = workspace();
    let bin = ws.join(".toolchain/nix/bin/nix");
    if !bin.exists() {
        let st = Command::new(env!("CARGO"))
            .args([
                "run",
                "-q",
                "-p",
                "xtask",
                "--",
                "nix-check",
                "--tools-only",
            ])
            .current_dir(&ws)
            .status()
            .unwrap();
        assert!(st.success(), "installing Nix failed");
    }
    bin
}

/// The tracked files of the checkout, as a flake sees them (no target/, no .toolchain/).
fn tracked_copy() -> tempfile::TempDir {
    let ws = workspace();
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new("git")
        .args(["ls-files", "-z"])
        .current_dir(&ws)
        .output()
        .unwrap();
    assert!(out.status.success());
    for f in out.stdout.split(|b| *b == 0).filter(|f| !f.is_empty()) {
        let rel = Path::new(std::str::from_utf8(f).unwrap());
        let from = ws.join(rel);
        if !from.is_file() {
            continue; // deleted in the working tree
        }
        let to = dir.path().join(rel);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(&from, &to).unwrap();
    }
    dir
}

fn store_path(expr: &str) -> String {
    let out = Command::new(nix())
        .args([
            "--extra-experimental-features",
            "nix-command flakes",
            "eval",
            "--impure",
            "--raw",
            "--expr",
            expr,
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{expr}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn real_source(root: &Path, crane: &Path, lib: &Path) -> String {
    let c = crane.join("lib/fileset");
    store_path(&format!(
        "let lib = import {lib}/lib; \
         fileset = {{ cargoTomlAndLock = import {c}/cargoTomlAndLock.nix {{ inherit lib; }}; \
                      rust = import {c}/rust.nix {{ inherit lib; }}; \
                      toml = import {c}/toml.nix {{ inherit lib; }}; }}; \
         commonCargoSources = import {c}/commonCargoSources.nix {{ inherit lib fileset; }}; \
         in \"${{(import {root}/nix/source.nix {{ inherit lib commonCargoSources; root = {root}; }}).src}}\"",
        lib = lib.display(),
        c = c.display(),
        root = root.display(),
    ))
}

fn double_source(root: &Path, doubles: &Path) -> String {
    store_path(&format!(
        "let lib = import {d}/nixpkgs/lib.nix; crane = import {d}/crane/lib.nix {{ pkgs = {{ inherit lib; }}; }}; \
         in \"${{(import {root}/nix/source.nix {{ inherit lib; inherit (crane.fileset) commonCargoSources; root = {root}; }}).src}}\"",
        d = doubles.display(),
        root = root.display(),
    ))
}

fn real_inputs() -> Option<(PathBuf, PathBuf)> {
    let crane = std::env::var_os("KILN_REAL_CRANE").map(PathBuf::from);
    let lib = std::env::var_os("KILN_REAL_NIXPKGS_LIB").map(PathBuf::from);
    match (crane, lib) {
        (Some(c), Some(l)) if c.join("lib/fileset").is_dir() && l.join("lib").is_dir() => {
            Some((c, l))
        }
        _ => {
            eprintln!(
                "SKIPPED: the double's source set is compared with real crane's only when \
                 KILN_REAL_CRANE (crane at the locked revision) and KILN_REAL_NIXPKGS_LIB \
                 (nix-community/nixpkgs.lib) are set; nothing was checked"
            );
            None
        }
    }
}

#[test]
fn the_doubles_source_set_is_real_cranes() {
    let Some((crane, lib)) = real_inputs() else {
        return;
    };
    let root = tracked_copy();
    let real = real_source(root.path(), &crane, &lib);
    let double = double_source(root.path(), &root.path().join("checks/nix/doubles"));
    assert_eq!(
        double, real,
        "nix/source.nix gives different files through the crane double than through real crane"
    );
}

#[test]
fn a_double_that_drops_a_crane_rule_is_caught() {
    // The comparison above can fail: the double without crane's Cargo.lock rule loses the
    // workspace's Cargo.lock from the source.
    let Some((crane, lib)) = real_inputs() else {
        return;
    };
    let root = tracked_copy();
    let double_lib = root.path().join("checks/nix/doubles/crane/lib.nix");
    let text = std::fs::read_to_string(&double_lib).unwrap();
    let rule = "name == \"Cargo.lock\" || ";
    assert!(text.contains(rule), "the crane double's Cargo.lock rule");
    std::fs::write(&double_lib, text.replacen(rule, "", 1)).unwrap();
    let real = real_source(root.path(), &crane, &lib);
    let double = double_source(root.path(), &root.path().join("checks/nix/doubles"));
    assert_ne!(double, real);
}
