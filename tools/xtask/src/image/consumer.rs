//! The build this project exists to end, in a container with no driver: checks/consumer's
//! kernels built inside `kiln-builder:bookworm` (checks/container/builder.Dockerfile: the
//! Debian base plus g++, no NVIDIA driver, no libcuda) by `docker run`, with the pinned
//! toolchain mounted read-only and the kernel cache on a named volume.
//!
//! Why `docker run` and not `docker build`: this engine's `docker build` is the legacy builder
//! (the docker CLI has no buildx plugin, so no BuildKit), which has no `RUN --mount=type=cache`
//! and no volumes: a kernel cache cannot outlive one `docker build`. With BuildKit the same
//! script runs under `RUN --mount=type=cache,target=/cache` (README, "Containers").
//!
//! Each build: kiln's preflight (`kiln doctor --build-only`), the loader must know no libcuda,
//! `cargo clean -p kiln-consumer-example` then `cargo build --locked --offline` (crates vendored,
//! `--network none`), KILN_KERNEL_CACHE on one volume, CARGO_TARGET_DIR on a second
//! ([`TARGET_VOLUME`], never emptied: pyo3, bindgen and the rest are built once per machine). The
//! clean makes the consumer's build script run again in each build, as a Dockerfile layer that a
//! source edit invalidated would; the script checks that its kernels.summary.json is newer than
//! the clean. The host then checks the built library: no DT_NEEDED on libcuda, `kiln audit` clean
//! against the consumer's own table; and kiln-build's summary: the first build, on an emptied
//! cache volume, compiled every kernel job; the second, its build script run again on the same
//! cache volume, compiled none and relinked none.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{ensure, Context, Result};
use serde_json::{json, Value};

use super::docker;
use crate::toolchain::{repo_root, run_checked, Layout};

pub const BUILDER: &str = "kiln-builder:bookworm";
pub const VOLUME: &str = "kiln-consumer-kernel-cache";
/// The cargo target directory, a second volume: it outlives the containers (and the checkout),
/// so the consumer's dependencies are built once per machine.
pub const TARGET_VOLUME: &str = "kiln-consumer-target";
const LIBRARY: &str = "libkiln_consumer_example.so";

/// Runs both builds and their checks; `kiln` is the host's release binary (mounted into the
/// container for the preflight, and the host's audit).
pub fn run(work: &Path, layout: &Layout, kiln: &Path, keep_volume: bool) -> Result<Value> {
    let root = repo_root();
    let t = Instant::now();
    eprintln!(
        "consumer container: docker build -t {BUILDER} -f checks/container/builder.Dockerfile"
    );
    let status = docker::docker()
        .args(["build", "--quiet", "-t", BUILDER, "-f"])
        .arg(root.join("checks/container/builder.Dockerfile"))
        .arg(root.join("checks/container"))
        .stdout(std::io::stderr())
        .status()
        .context("docker build")?;
    ensure!(
        status.success(),
        "docker build of {BUILDER} failed ({status})"
    );
    let builder_seconds = t.elapsed().as_secs_f64();

    let vendor = vendor(work, &root)?;
    if !keep_volume {
        // The first build must start from nothing, or "the second reuses every kernel" proves little.
        let _ = docker::docker()
            .args(["volume", "rm", "-f", VOLUME])
            .output();
    }
    docker::checked(&["volume", "create", VOLUME])?;
    // Never emptied: what it proves nothing about (the dependencies) it keeps; the consumer
    // crate itself is cleaned in it before each build (build-consumer.sh).
    docker::checked(&["volume", "create", TARGET_VOLUME])?;

    let first = build(work, layout, kiln, &vendor, "first")?;
    let second = build(work, layout, kiln, &vendor, "second")?;
    let (s1, s2) = (&first["summary"], &second["summary"]);
    let jobs = s1["compile_jobs"].as_u64().unwrap_or(0);
    if !keep_volume {
        ensure!(
            jobs > 0 && s1["compiled"] == jobs,
            "the first build (an emptied cache volume) must compile every kernel job: {s1}"
        );
    }
    ensure!(
        s2["compile_jobs"] == jobs
            && s2["compiled"] == 0
            && s2["cached"] == jobs
            && s2["linked"] == 0
            && s2["rust_compiled"] == 0,
        "the second build (the consumer crate cleaned, its build script run again, same cache volume {VOLUME}) must reuse every kernel: {s2}"
    );
    eprintln!(
        "consumer container: second build reused all {jobs} kernel compile jobs and {} links (0 compiled, 0 linked)",
        s2["link_jobs"]
    );
    Ok(json!({
        "builder_image_seconds": builder_seconds,
        "volume": VOLUME,
        "target_volume": TARGET_VOLUME,
        "first": first,
        "second": second,
    }))
}

/// The consumer's registry crates, vendored on the host (the container has no network).
fn vendor(work: &Path, root: &Path) -> Result<PathBuf> {
    let dir = work.join("consumer-vendor");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(&cargo);
    cmd.current_dir(root)
        .args([
            "vendor",
            "--locked",
            "--quiet",
            "--manifest-path",
            "checks/consumer/Cargo.toml",
        ])
        .arg(&dir);
    let offline = Command::new(&cargo)
        .current_dir(root)
        .args([
            "vendor",
            "--offline",
            "--locked",
            "--quiet",
            "--manifest-path",
            "checks/consumer/Cargo.toml",
        ])
        .arg(&dir)
        .stdout(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !offline {
        run_checked(cmd.stdout(std::process::Stdio::null()))
            .context("cargo vendor of checks/consumer")?;
    }
    Ok(dir)
}

/// The rustc the checkout builds with: its sysroot, mounted as /opt/rust.
fn rust_sysroot(root: &Path) -> Result<PathBuf> {
    let out = run_checked(
        Command::new("rustc")
            .current_dir(root)
            .args(["--print", "sysroot"]),
    )?;
    Ok(PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()))
}

/// One build in a fresh container; its log, time and kiln-build's summary.
fn build(work: &Path, layout: &Layout, kiln: &Path, vendor: &Path, name: &str) -> Result<Value> {
    let root = repo_root();
    let out = work.join("consumer-out").join(name);
    if out.exists() {
        std::fs::remove_dir_all(&out)?;
    }
    std::fs::create_dir_all(&out)?;
    let cuda_bin = layout.cuda_home().join("bin");
    let mut cmd = docker::docker();
    cmd.args(["run", "--rm", "--network", "none"])
        .arg("-v")
        .arg(docker::mount(&root, "/kiln", true)?)
        .arg("-v")
        .arg(docker::mount(&rust_sysroot(&root)?, "/opt/rust", true)?)
        // At its own path: the environment kiln bootstrap wrote names files under it.
        .arg("-v")
        .arg(docker::mount(
            &layout.root,
            &layout.root.display().to_string(),
            true,
        )?)
        .arg("-v")
        .arg(docker::mount(vendor, "/vendor", true)?)
        .arg("-v")
        .arg(docker::mount(kiln, "/usr/local/bin/kiln", true)?)
        .arg("-v")
        .arg(format!("{VOLUME}:/cache"))
        .arg("-v")
        .arg(format!("{TARGET_VOLUME}:/build/target"))
        .arg("-v")
        .arg(docker::mount(&out, "/out", false)?);
    for (k, v) in layout.vars() {
        if k != "PATH" && k != "PYTHONPATH" {
            cmd.arg("-e").arg(format!("{k}={}", v.to_string_lossy()));
        }
    }
    // No debug info: the dependencies compile faster, and nothing here is debugged.
    cmd.args(["-e", "CARGO_PROFILE_DEV_DEBUG=0"]);
    cmd.args([
        "-e",
        "KILN_KERNEL_CACHE=/cache",
        "-e",
        "CARGO_TARGET_DIR=/build/target",
    ])
    .args(["-e", "CARGO_HOME=/build/cargo-home", "-e", "HOME=/build"])
    .arg("-e")
    .arg(format!(
        "PATH=/opt/rust/bin:{}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        cuda_bin.display()
    ))
    .args([BUILDER, "sh", "/kiln/checks/container/build-consumer.sh"]);
    eprintln!("consumer container: {name} build (docker run {BUILDER}, no driver, no network, cache volume {VOLUME}, target volume {TARGET_VOLUME})");
    let t = Instant::now();
    let status = cmd
        .stdout(std::io::stderr())
        .status()
        .context("docker run")?;
    let seconds = t.elapsed().as_secs_f64();
    ensure!(
        status.success(),
        "the {name} container build failed ({status}); its output is above"
    );
    ensure!(
        out.join("build-script-ran").is_file(),
        "the {name} build did not show that the consumer's build script ran (a kernels.summary.json newer than its cargo clean)"
    );
    let summary: Value = serde_json::from_str(
        &std::fs::read_to_string(out.join("kernels.summary.json"))
            .context("kernels.summary.json from the container")?,
    )?;
    let library = out.join(LIBRARY);
    let needed = needed(&library)?;
    eprintln!(
        "consumer container: {name} build in {seconds:.0} s: {} compiled, {} cached of {} compile jobs; {} of {} links run; {LIBRARY} NEEDs {}",
        summary["compiled"], summary["cached"], summary["compile_jobs"], summary["linked"], summary["link_jobs"], needed.join(" ")
    );
    ensure!(
        !links_driver(&needed),
        "{LIBRARY} built in the container links the driver: NEEDED {needed:?}"
    );
    let audit = Command::new(kiln)
        .arg("audit")
        .arg(&library)
        .arg("--policy")
        .arg(root.join("checks/consumer/Cargo.toml"))
        .output()
        .context("kiln audit")?;
    ensure!(
        audit.status.code() == Some(0),
        "kiln audit {LIBRARY} --policy checks/consumer/Cargo.toml: exit {:?}\n{}",
        audit.status.code(),
        String::from_utf8_lossy(&audit.stdout)
    );
    Ok(json!({ "seconds": seconds, "summary": summary, "needed": needed, "audit_exit": 0 }))
}

/// Whether DT_NEEDED names the driver library (`libcuda.so`, `libcuda.so.1`, …).
fn links_driver(needed: &[String]) -> bool {
    needed
        .iter()
        .any(|n| n == "libcuda.so" || n.starts_with("libcuda.so."))
}

/// DT_NEEDED of an ELF file (readelf -d).
fn needed(path: &Path) -> Result<Vec<String>> {
    let out = run_checked(Command::new("readelf").arg("-d").arg(path))?;
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.contains("(NEEDED)"))
        .filter_map(|l| Some(l.split_once('[')?.1.trim_end_matches(']').to_string()))
        .collect())
}

#[cfg(test)]
mod tests {
    use std::process::Command;

    /// A library linked `-lcuda` against a stub (as a build with the toolkit's stubs on `-L`
    /// links one) is caught; one that loads the driver at run time is not.
    #[test]
    fn a_library_linked_against_libcuda_is_caught() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::write(
            d.join("stub.c"),
            "int cuInit(unsigned f) { (void)f; return 34; }\n",
        )
        .unwrap();
        std::fs::write(
            d.join("lib.c"),
            "int cuInit(unsigned); int f(void) { return cuInit(0); }\n",
        )
        .unwrap();
        let gcc = |args: &[&str]| {
            let s = Command::new("gcc")
                .current_dir(d)
                .args(args)
                .status()
                .unwrap();
            assert!(s.success(), "gcc {args:?}");
        };
        gcc(&[
            "-shared",
            "-fPIC",
            "-Wl,-soname,libcuda.so.1",
            "-o",
            "libcuda.so",
            "stub.c",
        ]);
        gcc(&[
            "-shared",
            "-fPIC",
            "-o",
            "linked.so",
            "lib.c",
            "-L.",
            "-lcuda",
        ]);
        gcc(&["-shared", "-fPIC", "-o", "clean.so", "stub.c"]);
        let linked = super::needed(&d.join("linked.so")).unwrap();
        assert!(linked.contains(&"libcuda.so.1".to_string()), "{linked:?}");
        assert!(super::links_driver(&linked));
        let clean = super::needed(&d.join("clean.so")).unwrap();
        assert!(!super::links_driver(&clean), "{clean:?}");
        assert!(!super::links_driver(&["libcudart.so.13".into()]));
    }
}
