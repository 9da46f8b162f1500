//! Cargo-level incremental behaviour of the kernel build, on a copy of the workspace's kernel
//! crates: a no-op `cargo build` runs no kernel job (the build script does not even run), a
//! touched .cu reruns the build script but compiles nothing (content unchanged), and an edited
//! .cu recompiles exactly that file's jobs (and the merge of the Rust PTX into each `+PTX`
//! target's module, which reads that target's C++ PTX; no Rust compile), and an edited Rust
//! kernel (kernels/rust) reruns only the Rust kernel jobs (its PTX, ptxas per SASS target, the
//! PTX merge) — no nvcc job.

use std::path::{Path, PathBuf};
use std::process::Command;

use kiln_build::progress::Summary;

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .unwrap()
        .to_path_buf()
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap().flatten() {
        let (src, dst) = (e.path(), to.join(e.file_name()));
        if e.file_type().unwrap().is_dir() {
            if e.file_name() != "target" {
                copy_dir(&src, &dst);
            }
        } else {
            std::fs::copy(&src, &dst).unwrap();
        }
    }
}

struct Workspace {
    root: PathBuf,
    target: PathBuf,
}

impl Workspace {
    /// The kernel crates and two of the kernels, in a fresh directory.
    fn new(dir: &Path) -> Workspace {
        let repo = repo_root();
        for f in ["Cargo.toml", "Cargo.lock"] {
            std::fs::copy(repo.join(f), dir.join(f)).unwrap();
        }
        std::fs::create_dir_all(dir.join("kernels")).unwrap();
        for f in ["vecadd.cu", "axpby.cu"] {
            std::fs::copy(repo.join("kernels").join(f), dir.join("kernels").join(f)).unwrap();
        }
        copy_dir(&repo.join("kernels/include"), &dir.join("kernels/include"));
        copy_dir(&repo.join("kernels/rust"), &dir.join("kernels/rust"));
        // Every path crate kiln-kernels reaches (kiln-arch: the target vocabulary under pins,
        // fatbin and manifest; kiln-embed: the section macros kiln-kernels expands).
        for c in [
            "kiln-arch",
            "kiln-embed",
            "kiln-kernel-params",
            "kiln-pins",
            "kiln-toolchain",
            "kiln-build",
            // kiln-build's tests audit the kernel-library fixture (a dev-dependency, which
            // cargo resolves for any workspace member).
            "kiln-audit",
            "kiln-wheel",
            "kiln-fatbin",
            "kiln-manifest",
            "kiln-kernels",
        ] {
            copy_dir(&repo.join("crates").join(c), &dir.join("crates").join(c));
        }
        // kiln-kernels' tests' helpers (a dev-dependency, which cargo resolves for any build).
        copy_dir(
            &repo.join("tools/kiln-test-support"),
            &dir.join("tools/kiln-test-support"),
        );
        // The bootstrap's toolchain, found the way kiln-build finds it in any workspace.
        std::os::unix::fs::symlink(repo.join(".toolchain"), dir.join(".toolchain")).unwrap();
        // Kept between runs so registry dependencies compile once per machine.
        let target = repo.join("target/incremental-check");
        Workspace {
            root: dir.to_path_buf(),
            target,
        }
    }

    /// `cargo build -p kiln-kernels`; returns (kiln-kernels was fresh, the kernel summary).
    fn build(&self) -> (bool, Summary) {
        let out = Command::new(env!("CARGO"))
            .current_dir(&self.root)
            .args([
                "build",
                "--offline",
                "-p",
                "kiln-kernels",
                "--message-format=json",
            ])
            .env("CARGO_TARGET_DIR", &self.target)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "cargo build failed:\n{stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let mut fresh = None;
        let mut out_dir = None;
        for line in stdout.lines() {
            let Ok(msg) = serde_json::from_str::<serde_json::Value>(line) else {
                continue;
            };
            let is_kernels = msg["package_id"]
                .as_str()
                .is_some_and(|p| p.contains("kiln-kernels"));
            match msg["reason"].as_str() {
                Some("compiler-artifact") if is_kernels && msg["target"]["kind"][0] == "lib" => {
                    fresh = msg["fresh"].as_bool();
                }
                Some("build-script-executed") if is_kernels => {
                    out_dir = msg["out_dir"].as_str().map(PathBuf::from);
                }
                _ => {}
            }
        }
        let summary_path = out_dir
            .expect("kiln-kernels build script output")
            .join("kernels.summary.json");
        let summary =
            serde_json::from_str(&std::fs::read_to_string(summary_path).unwrap()).unwrap();
        (fresh.expect("kiln-kernels artifact message"), summary)
    }
}

#[test]
fn noop_touch_and_edit_do_only_the_work_they_must() {
    let tmp = tempfile::tempdir().unwrap();
    let ws = Workspace::new(tmp.path());
    let targets = kiln_pins::Pins::load(&ws.root.join("Cargo.toml"))
        .unwrap()
        .matrix
        .targets()
        .len();

    let (_, first) = ws.build();
    assert_eq!(first.compile_jobs, 2 * targets, "{first}");

    let (fresh, noop) = ws.build();
    assert!(fresh, "a no-op cargo build must not rerun the build script");
    assert_eq!(noop, first, "the summary is untouched: no kernel job ran");

    // Touch: the build script reruns (cargo sees a newer mtime), the cache compiles nothing.
    let vecadd = ws.root.join("kernels/vecadd.cu");
    let text = std::fs::read_to_string(&vecadd).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1100));
    std::fs::write(&vecadd, &text).unwrap();
    let (fresh, touched) = ws.build();
    assert!(!fresh);
    assert_eq!(
        (touched.compiled, touched.cached),
        (0, 2 * targets),
        "{touched}"
    );

    // Edit: only vecadd.cu's jobs (one per target) compile.
    // A unique edit, so a kernel cache kept from an earlier run cannot already hold it.
    let nonce = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    std::fs::write(
        &vecadd,
        format!("{text}// edited by the incremental test {nonce}\n"),
    )
    .unwrap();
    let (_, edited) = ws.build();
    eprintln!("after the .cu edit: {edited:?}");
    assert_eq!(
        (edited.compiled, edited.cached),
        (targets, targets),
        "{edited}"
    );
    // No Rust compile (the crate's PTX, ptxas per SASS target) reruns. The merge of the Rust
    // PTX into a `+PTX` target's module does: it reads the edited C++ target's linked PTX.
    let ptx_targets = kiln_pins::Pins::load(&ws.root.join("Cargo.toml"))
        .unwrap()
        .matrix
        .targets()
        .iter()
        .filter(|t| t.kind == kiln_pins::TargetKind::Ptx)
        .count();
    assert_eq!(
        edited.rust_compiled - edited.rust_merged,
        0,
        "a .cu edit compiles no Rust kernel: {edited:?}"
    );
    assert!(edited.rust_merged <= ptx_targets, "{edited:?}");

    // Edit one Rust kernel (a real code change, unique to this run): every Rust kernel job
    // reruns, not one nvcc job does.
    let rs = ws.root.join("kernels/rust/src/elementwise.rs");
    let code = std::fs::read_to_string(&rs).unwrap();
    let edited_code = code.replacen(
        "|g, u| g / (1.0 + device::exp(-g)) * u",
        &format!(
            // A constant unique to this run, so the PTX itself is new to the cache.
            "|g, u| g / (1.0 + device::exp(-g)) * u + {}.0e-30",
            nonce % (1 << 20)
        ),
        1,
    );
    assert_ne!(
        edited_code, code,
        "the silu_mul closure moved; update this test"
    );
    std::fs::write(&rs, edited_code).unwrap();
    let (fresh, rust_edit) = ws.build();
    assert!(!fresh);
    assert_eq!(
        (rust_edit.compiled, rust_edit.rust_compiled),
        (0, rust_edit.rust_jobs),
        "{rust_edit}"
    );
    assert!(rust_edit.rust_jobs >= targets, "{rust_edit}");
}
