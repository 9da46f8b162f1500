//! Commit, dirty flag and compiler versions for the manifest.
//!
//! Release builds (`cargo xtask wheel`, the flake) pass KILN_BUILD_COMMIT / KILN_BUILD_DIRTY
//! explicitly — a Nix build has no .git. Otherwise git is asked, and the build script reruns
//! when HEAD, the branch it points to, or the index changes.

use std::path::{Path, PathBuf};
use std::process::Command;

use kiln_manifest::Provenance;

/// The commit, dirty flag and compiler versions of this build; with `cargo` (inside a build
/// script) it also prints the `rerun-if` directives that keep the commit current.
pub fn collect(
    workspace: &Path,
    env: &dyn Fn(&str) -> Option<std::ffi::OsString>,
    cargo: bool,
) -> Provenance {
    if cargo {
        println!("cargo:rerun-if-env-changed=KILN_BUILD_COMMIT");
        println!("cargo:rerun-if-env-changed=KILN_BUILD_DIRTY");
    }
    let (commit, dirty) = match env("KILN_BUILD_COMMIT") {
        Some(c) => {
            let dirty = env("KILN_BUILD_DIRTY").is_some_and(|d| d == "1" || d == "true");
            (c.to_string_lossy().into_owned(), dirty)
        }
        None => from_git(workspace, cargo),
    };
    let rustc = env("RUSTC")
        .map(PathBuf::from)
        .unwrap_or_else(|| "rustc".into());
    let rustc = output(Command::new(rustc).arg("--version")).unwrap_or_default();
    Provenance {
        commit,
        dirty,
        rustc,
        clang: String::new(),
    }
}

fn from_git(workspace: &Path, cargo: bool) -> (String, bool) {
    let git = |args: &[&str]| output(Command::new("git").arg("-C").arg(workspace).args(args));
    let Some(commit) = git(&["rev-parse", "HEAD"]) else {
        return ("unknown".into(), false);
    };
    let dirty =
        git(&["status", "--porcelain", "--untracked-files=no"]).is_some_and(|s| !s.is_empty());
    if cargo {
        if let Some(dir) = git(&["rev-parse", "--absolute-git-dir"]) {
            let dir = PathBuf::from(dir);
            println!("cargo:rerun-if-changed={}", dir.join("HEAD").display());
            println!("cargo:rerun-if-changed={}", dir.join("index").display());
            if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
                let loose = dir.join(&branch);
                let watched = if loose.exists() {
                    loose
                } else {
                    dir.join("packed-refs")
                };
                println!("cargo:rerun-if-changed={}", watched.display());
            }
        }
    }
    (commit, dirty)
}

fn output(cmd: &mut Command) -> Option<String> {
    let out = cmd.output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}
