//! Captures what `kiln.build_info()` reports beyond the kernel manifest: the git commit the
//! extension was built from (and whether the tree was dirty), and the runtime libraries this
//! build reaches, taken from `[workspace.metadata.kiln.runtime]` for each enabled feature.

use std::path::Path;
use std::process::Command;

fn main() {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let pins = match kiln_pins::Pins::discover(crate_dir) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("error: kiln-py needs the workspace pins: {e}");
            std::process::exit(1);
        }
    };
    println!("cargo:rerun-if-changed={}", pins.manifest.display());

    let mut libs = serde_json::Map::new();
    for (key, lib) in &pins.runtime {
        // Cargo sets CARGO_FEATURE_<NAME> for each enabled feature of this crate.
        if std::env::var_os(format!("CARGO_FEATURE_{}", key.to_uppercase().replace('-', "_"))).is_some() {
            libs.insert(
                key.clone(),
                serde_json::json!({
                    "wheel": lib.wheel,
                    "version": lib.version,
                    "requirement": lib.requirement(),
                    "lib_dir": lib.lib_dir,
                    "sonames": lib.sonames,
                }),
            );
        }
    }
    let (commit, dirty) = git_state(pins.root());
    let info = serde_json::json!({
        "commit": commit,
        "dirty": dirty,
        "runtime_libraries": libs,
    });
    let out = Path::new(&std::env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join("py_build_info.json");
    std::fs::write(&out, serde_json::to_string_pretty(&info).expect("json")).expect("writing OUT_DIR");
}

/// `git rev-parse HEAD` and `git status --porcelain`; KILN_COMMIT overrides both (builds from a
/// source tarball or the Nix store have no .git). Unknown stays unknown rather than guessed.
fn git_state(root: &Path) -> (Option<String>, Option<bool>) {
    println!("cargo:rerun-if-env-changed=KILN_COMMIT");
    if let Ok(c) = std::env::var("KILN_COMMIT") {
        return (Some(c), None);
    }
    let git = root.join(".git");
    for f in ["HEAD", "index"] {
        if git.join(f).exists() {
            println!("cargo:rerun-if-changed={}", git.join(f).display());
        }
    }
    let run = |args: &[&str]| -> Option<String> {
        let out = match Command::new("git").current_dir(root).args(args).output() {
            Ok(out) => out,
            Err(e) => {
                println!("cargo:warning=kiln-py: git {args:?} could not run ({e}); commit unknown");
                return None;
            }
        };
        if !out.status.success() {
            println!("cargo:warning=kiln-py: git {args:?} failed: {}", String::from_utf8_lossy(&out.stderr).trim());
        }
        out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
    };
    let commit = run(&["rev-parse", "HEAD"]);
    let dirty = commit.as_ref().and_then(|_| run(&["status", "--porcelain", "--untracked-files=no"])).map(|s| !s.is_empty());
    (commit, dirty)
}
