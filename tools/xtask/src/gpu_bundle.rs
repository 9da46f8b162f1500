//! `cargo xtask gpu-bundle`: one directory to carry to a GPU machine that has no Rust and no
//! network: the wheel, kiln-runtime's GPU test and benchmark executables, the `kiln` binary,
//! and `run.sh RESULTS_DIR`, which runs everything there and writes JSON results.
//!
//! Layout:
//!   run.sh, run_all.py, test_kiln_gpu.py, check_streams.py, test_torch_native.py,
//!   bench_torch.py, bench_decode.py                         (from checks/gpu-bundle/)
//!   kiln_cuda-<version>-cp39-abi3-manylinux_*.whl
//!   bin/<executable>                                         (kiln-runtime's tests, kiln-gpu-bench, kiln)
//!   bin/run-rust-gpu.sh                                      (kiln-runtime's runner for them)
//!   kernel-library/{per-source,one-module}/                  (checks/kernel-library built by kiln-build)
//!   bundle.json                                              (what is here and how to run it)
//!   policy/Cargo.toml                                        (the pins, for `kiln audit`)

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};
use serde_json::{json, Value};

use crate::bootstrap;
use crate::toolchain::{git, repo_root, Layout};
use crate::wheel;

/// The most the lead engineer can carry to the GPU machine.
const MAX_BYTES: u64 = 60 * 1024 * 1024;

/// The scripts of checks/gpu-bundle/ that make up the bundle's runner.
const SCRIPTS: &[&str] = &[
    "run.sh",
    "run_all.py",
    "test_kiln_gpu.py",
    "check_streams.py",
    "test_torch_native.py",
    "bench_torch.py",
    "bench_decode.py",
    "test_kernel_library.py",
];

/// kiln-runtime's GPU test executables, its benchmark, and its runner for both
/// (crates/kiln-runtime/BUNDLE.md), which run.sh calls as one step.
const RUNTIME_PACKAGE: &str = "kiln-runtime";
const BENCH_PACKAGE: &str = "kiln-gpu-bench";
const RUNTIME_RUNNER: &str = "crates/kiln-runtime/bundle/run-rust-gpu.sh";

#[derive(clap::Args)]
pub struct Args {
    /// Where the bundle goes (default: <target dir>/gpu-bundle). Replaced if it exists.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Skip `kiln audit` of the wheel.
    #[arg(long)]
    pub no_audit: bool,
}

pub fn run(args: Args) -> Result<()> {
    let layout = bootstrap::ensure()?;
    let root = repo_root();
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| wheel::target_dir().join("gpu-bundle"));
    if out.exists() {
        std::fs::remove_dir_all(&out)
            .with_context(|| format!("removing the old {}", out.display()))?;
    }
    std::fs::create_dir_all(out.join("bin"))?;

    let built = wheel::build(&wheel::Args {
        out: None,
        no_audit: args.no_audit,
        test: false,
        offline: false,
    })?;
    let wheel_name = built
        .wheel
        .file_name()
        .context("wheel file name")?
        .to_string_lossy()
        .into_owned();
    std::fs::copy(&built.wheel, out.join(&wheel_name))?;

    let mut executables = Vec::new();
    for exe in runtime_executables(&layout, &root)? {
        let dest = out.join("bin").join(&exe.name);
        std::fs::copy(&exe.path, &dest)
            .with_context(|| format!("copying {}", exe.path.display()))?;
        executables
            .push(json!({"name": exe.name, "kind": exe.kind, "path": format!("bin/{}", exe.name)}));
    }
    std::fs::copy(root.join(RUNTIME_RUNNER), out.join("bin/run-rust-gpu.sh"))
        .with_context(|| format!("copying {RUNTIME_RUNNER}"))?;
    set_executable(&out.join("bin/run-rust-gpu.sh"))?;
    let kiln = if root.join("crates/kiln/Cargo.toml").exists() {
        match wheel::build_kiln_binary(&layout, &root) {
            Ok(path) => {
                std::fs::copy(&path, out.join("bin/kiln"))?;
                Some("bin/kiln")
            }
            Err(e) => {
                eprintln!(
                    "warning: the kiln binary did not build, the bundle goes without it: {e:#}"
                );
                None
            }
        }
    } else {
        None
    };

    kernel_library(&layout, &root, &out.join("kernel-library"))?;

    for script in SCRIPTS {
        let src = root.join("checks/gpu-bundle").join(script);
        std::fs::copy(&src, out.join(script))
            .with_context(|| format!("copying {}", src.display()))?;
    }
    set_executable(&out.join("run.sh"))?;
    // `kiln audit --policy` there reads the same pins as here.
    std::fs::create_dir_all(out.join("policy"))?;
    std::fs::copy(root.join("Cargo.toml"), out.join("policy/Cargo.toml"))?;

    let manifest = json!({
        "schema": 1,
        "kiln_version": env!("CARGO_PKG_VERSION"),
        "commit": git(&root, &["rev-parse", "HEAD"]),
        "dirty": git(&root, &["status", "--porcelain", "--untracked-files=no"]).map(|s| !s.is_empty()),
        "wheel": wheel_name,
        "wheel_tags": built.tags,
        "requires_dist": built.requires_dist,
        "executables": executables,
        "kiln": kiln,
        "rust_runner": "bin/run-rust-gpu.sh",
    });
    std::fs::write(
        out.join("bundle.json"),
        serde_json::to_string_pretty(&manifest)?,
    )?;

    let (files, bytes) = dir_size(&out)?;
    if bytes > MAX_BYTES {
        bail!(
            "{} is {:.1} MiB, over the {} MiB limit",
            out.display(),
            mib(bytes),
            MAX_BYTES / (1024 * 1024)
        );
    }
    println!("bundle:      {}", out.display());
    println!(
        "size:        {:.1} MiB in {files} files (limit {} MiB)",
        mib(bytes),
        MAX_BYTES / (1024 * 1024)
    );
    println!("wheel:       {wheel_name}");
    for e in manifest["executables"].as_array().into_iter().flatten() {
        println!(
            "executable:  {} ({})",
            e["path"].as_str().unwrap_or("?"),
            e["kind"].as_str().unwrap_or("?")
        );
    }
    println!("kiln:        {}", kiln.unwrap_or("(not built)"));
    println!("run there:   ./run.sh RESULTS_DIR   (Linux, NVIDIA GPU, Python 3 with torch)");
    Ok(())
}

struct Executable {
    name: String,
    kind: &'static str,
    path: PathBuf,
}

/// What crates/kiln-runtime/BUNDLE.md says to carry: every integration-test executable of
/// kiln-runtime under its target name (hash removed), and kiln-gpu-bench.
fn runtime_executables(layout: &Layout, root: &Path) -> Result<Vec<Executable>> {
    let mut found = Vec::new();
    for (args, package) in [
        (&["test", "--no-run"][..], RUNTIME_PACKAGE),
        (&["build"][..], BENCH_PACKAGE),
    ] {
        let mut cargo = crate::toolchain::cargo();
        cargo.current_dir(root).args(args).args([
            "--release",
            "--locked",
            "-p",
            package,
            "--message-format=json-render-diagnostics",
        ]);
        layout.apply(&mut cargo);
        let out = cargo.output().context("running cargo")?;
        if !out.status.success() {
            bail!(
                "cargo {} -p {package} failed:\n{}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            let Ok(msg) = serde_json::from_str::<Value>(line) else {
                continue;
            };
            if msg["reason"] != "compiler-artifact" {
                continue;
            }
            let Some(exe) = msg["executable"].as_str() else {
                continue;
            };
            let kinds: Vec<&str> = msg["target"]["kind"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|k| k.as_str())
                .collect();
            let name = msg["target"]["name"].as_str().unwrap_or("?").to_string();
            let kind = if package == BENCH_PACKAGE && kinds.contains(&"bin") {
                "bench"
            } else if package == RUNTIME_PACKAGE && kinds.contains(&"test") {
                "test"
            } else {
                continue; // the library's unit tests: CPU tests that CI runs
            };
            if !found.iter().any(|e: &Executable| e.name == name) {
                found.push(Executable {
                    name,
                    kind,
                    path: PathBuf::from(exe),
                });
            }
        }
    }
    if !found.iter().any(|e| e.kind == "test") || !found.iter().any(|e| e.kind == "bench") {
        bail!(
            "expected kiln-runtime test executables and the {BENCH_PACKAGE} binary, found {:?}",
            found.iter().map(|e| &e.name).collect::<Vec<_>>()
        );
    }
    Ok(found)
}

/// checks/kernel-library built by kiln-build twice — as declared (one module per source, with
/// each module's PTX alone for the driver's JIT) and linked into one module per target — for
/// test_kernel_library.py to load and run.
fn kernel_library(layout: &Layout, root: &Path, out: &Path) -> Result<()> {
    let scratch = tempfile::tempdir()?;
    let project = scratch.path().join("kernel-library");
    let fixture = root.join("checks/kernel-library");
    for sub in ["kernels", "common"] {
        std::fs::create_dir_all(project.join(sub))?;
        for e in std::fs::read_dir(fixture.join(sub))? {
            let p = e?.path();
            std::fs::copy(
                &p,
                project.join(sub).join(p.file_name().context("file name")?),
            )?;
        }
    }
    let toml = std::fs::read_to_string(fixture.join("Cargo.toml"))?;
    let nvcc = layout.cuda_home().join("bin/nvcc");
    let cache = scratch.path().join("cache");
    for (dir, text) in [
        ("per-source", toml.clone()),
        ("one-module", toml.replace("modules = \"per-source\"\n", "")),
    ] {
        std::fs::write(project.join("Cargo.toml"), &text)?;
        let pins = kiln_pins::Pins::load(&project.join("Cargo.toml"))?;
        let nvcc = nvcc.clone();
        let build = || {
            let nvcc = nvcc.clone();
            kiln_build::KernelBuild::new(pins.clone(), project.join("kernels"), out.join(dir))
                .cache_dir(cache.clone())
                .env(move |k| (k == "KILN_NVCC").then(|| nvcc.clone().into_os_string()))
                .progress(false)
        };
        let built = build()
            .run()
            .with_context(|| format!("building checks/kernel-library ({dir})"))?;
        if let (Some(lib), "per-source") = (&built.static_lib, dir) {
            // What a crate linking the static library gets, as a shared library Python loads.
            let so = out.join(dir).join("libkernel_library_host_test.so");
            let mut cc = Command::new("cc");
            cc.args(["-shared", "-o"]).arg(&so);
            cc.arg("-Wl,--whole-archive")
                .arg(lib)
                .arg("-Wl,--no-whole-archive");
            cc.arg(format!("-L{}", layout.cuda_home().join("lib").display()));
            cc.args(["-lcudart_static", "-lstdc++", "-ldl", "-lpthread", "-lrt"]);
            crate::toolchain::run_checked(&mut cc)?;
        }
        if dir == "per-source" {
            let ptx = out.join(dir).join("ptx");
            std::fs::create_dir_all(&ptx)?;
            for j in build().plan()?.jobs {
                let mut parts = j.id.split(':');
                if let (Some("compile"), Some(source), Some(target)) =
                    (parts.next(), parts.next(), parts.next())
                {
                    if target.starts_with("compute_") {
                        let stem = source.trim_end_matches(".cu").replace('/', "_");
                        std::fs::copy(&j.output, ptx.join(format!("{stem}.{target}.ptx")))?;
                    }
                }
            }
        }
    }
    Ok(())
}

fn set_executable(path: &Path) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let mut perm = std::fs::metadata(path)?.permissions();
    perm.set_mode(0o755);
    std::fs::set_permissions(path, perm)?;
    Ok(())
}

fn dir_size(dir: &Path) -> Result<(usize, u64)> {
    let (mut files, mut bytes) = (0, 0);
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let meta = entry.metadata()?;
        if meta.is_dir() {
            let (f, b) = dir_size(&entry.path())?;
            files += f;
            bytes += b;
        } else {
            files += 1;
            bytes += meta.len();
        }
    }
    Ok((files, bytes))
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}
