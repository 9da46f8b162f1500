//! kiln-doctor: the checks behind `kiln doctor` — the whole Rust+CUDA chain, before a long
//! build rather than after. A library: it returns a [`Report`]; rendering and the exit code
//! belong to the `kiln` binary.
//!
//! # Check ids (stable; `--json` consumers key on them)
//!
//! Several ids repeat once per subject (a GPU, a library file, a runtime library); the
//! `subject` field then tells the instances apart.
//!
//! | id | scope | what it checks |
//! |----|-------|----------------|
//! | `pins` | both | where the pins came from: the workspace Cargo.toml above the current directory, `--pins PATH`, or (warn) the pins this kiln was built with |
//! | `toolchain.nvcc` | build | nvcc found (KILN_NVCC, CUDA_HOME, CUDA_PATH, PATH, the bootstrap's install) and its version is one the project accepts: its `[…kernels] cuda` range, else exactly the pin |
//! | `toolchain.cuda-targets` | build | `nvcc --list-gpu-code` covers every matrix target (and fatbinary/nvlink sit next to nvcc) |
//! | `toolchain.host-compiler` | build | nvcc accepts the host compiler: a kernel with host code compiles |
//! | `toolchain.libclang` | build | libclang loads as bindgen loads it, has the pinned major, and `<stddef.h>` resolves (resource dir); skipped when bindgen will not run (no `*.h` in `<kernels dir>/include`) |
//! | `toolchain.rustc` | build | rustc stable >= the workspace rust-version, or the flake's pinned nightly |
//! | `toolchain.kernel-rustc` | build | the rustc for kernels/rust (nvptx64): the pinned `kernel-rustc` release or the flake's nightly, with rust-src and cargo beside it; skipped without `<kernels dir>/rust/Cargo.toml` |
//! | `toolchain.maturin` | build | maturin found and pinned (missing: warn, only the wheel needs it) |
//! | `driver.libcuda` | run | `libcuda.so.1` loads (by that exact name), and from where |
//! | `driver.init` | run | cuInit(0) succeeds (CUDA_ERROR_STUB_LIBRARY = a stub, explained) |
//! | `driver.version` | run | the driver (cuDriverGetVersion, release from the library's name) is at least `min-driver` |
//! | `driver.ptx-jit` | run | the driver can JIT the PTX ISA the pinned nvcc emits, when the matrix ships PTX |
//! | `gpu.devices` | run | the GPUs the driver sees, with their compute capabilities |
//! | `gpu.coverage` | run | per GPU (subject `GPU n`): SASS in the matrix covers it (ok), only PTX JIT (warn), or nothing (fail) |
//! | `trap.stub-libcuda` | both | per stub found (subject: its path): the toolkit's stub libcuda where the dynamic loader looks |
//! | `trap.unversioned-libcuda` | run | what `dlopen("libcuda.so")` would pick, compared with libcuda.so.1 |
//! | `trap.cuda-home` | build | CUDA_HOME / CUDA_PATH hold the same nvcc version as the nvcc on PATH |
//! | `trap.runtime-lib` | run | per pinned runtime library (subject: cudart, cublas, cudnn, nccl): its sonames are reachable, the release installed (the owning `nvidia-*` wheel's dist-info) is inside the range the wheel declares; one the wheel does not require is skipped when absent; a consumer whose table states no `runtime` gets one skip ("not asked for by <its Cargo.toml>"), not kiln's list |
//! | `link.driver-api` | build | a shared library calling cuMem* links `-lcuda`, and an executable linked against it finds libcuda.so.1; skipped when there is nothing to link against (no driver, no stub) |
//!
//! Facts (`facts` in JSON, only where listed): `toolchain.nvcc` {path, version};
//! `driver.libcuda` {path}; `driver.version` {release, cuda}; `gpu.coverage` {name, sm,
//! coverage = sass|ptx|none, target}.
//!
//! # JSON
//!
//! `{"schema": 1, "mode": "full"|"runtime-only"|"build-only", "pins": PATH|null,
//! "verdict": {"can_build", "can_run", "build_blocker"?, "run_blocker"?: {"id", "subject"?,
//! "reason"}}, "checks": [{"id", "status", "subject"?, "message", "fix": [..], "facts"?,
//! "scope": "build"|"run"|"both", "softened"?}], "summary": {"ok", "warn", "fail", "skip"},
//! "inventory": {"os", "kernel", "arch", "glibc", "python": {"executable", "version",
//! "nvidia": [{"name", "version"}], "torch": {"version", "cuda"}|null, "kiln": {"name",
//! "version", "requires"}|null, "other_kiln_imports"?}|null, "python_error"?, "driver":
//! {"release", "cuda", "path"}|null, "driver_error"?, "gpus": [..], "nvcc"}, "elapsed_ms"}`.
//! `verdict` and `inventory` were added without a schema bump: version-1 readers are unaffected.
//!
//! The verdict: a machine can build when no build-scope check failed, and can run when no
//! run-scope check failed (a failure the mode softened to a warning still counts: `--build-only`
//! says "can run: no" on a machine without a driver, and exits 0).
//!
//! Statuses: `ok`, `warn`, `fail`, and `skip` (a check that could not run because one it
//! depends on failed, or that has nothing to check on this machine — the reason is its message —
//! or one waived with [`Options::skip`] / `--skip ID`). [`Mode::RuntimeOnly`] turns failures of build-scope checks into
//! warnings (a machine that only runs artifacts); [`Mode::BuildOnly`] does the same for
//! run-scope checks (a build machine without a GPU).
//!
//! # A consumer project
//!
//! A project whose kiln table is layered over kiln's (it states only its own keys, e.g.
//! `archs`) is checked for what *it* asks for: the runtime libraries only when its table states
//! `runtime`, libclang only when bindgen will run, the kernel rustc only for Rust kernels; and
//! every fix names its route (`kiln bootstrap`, the per-user install, `nix develop`), never
//! kiln's own `cargo xtask bootstrap` or `.toolchain/` ([`kiln_toolchain::Route`]).
//!
//! # Without a workspace
//!
//! Outside a kiln workspace (no Cargo.toml with `[workspace.metadata.kiln]` above the current
//! directory, and no `--pins`), the doctor uses the pins this kiln binary was built with and
//! says so (`pins` = warn). An explicit `--pins PATH` that cannot be read is an error
//! ([`DoctorError`]), not a check.
//!
//! # Isolation
//!
//! `libcuda.so.1` is loaded into the doctor's own process (as kiln's runtime would load it).
//! Anything suspect — an unversioned `libcuda.so`, a possible stub, libclang chosen by
//! environment variables — is loaded only in a child process ([`ProbeCommand`], the kiln
//! binary re-invoked), so a bad library cannot poison the doctor.

mod driver;
mod env;
mod gpu;
mod gpu_coverage;
mod inventory;
mod link;
mod probe;
mod report;
mod run_error;
mod toolchain_checks;
mod traps;

use std::path::{Path, PathBuf};

use kiln_pins::{Pins, PinsError};
use kiln_toolchain::Route;

pub use env::{Env, LoaderPath};
pub use gpu_coverage::{coverage, ptx_isa_of_cuda, Coverage};
pub use inventory::{DriverInfo, Inventory, PyDist, Python, Torch};
pub use probe::{child_main as probe_child_main, ProbeCommand};
pub use report::{
    first_clause, Blocker, Check, Mode, Report, Scope, Status, Summary, Verdict, SCHEMA,
};
pub use traps::Declared;

/// Every check id, in report order (the table above documents each).
pub const CHECK_IDS: &[&str] = &[
    "pins",
    "toolchain.nvcc",
    "toolchain.cuda-targets",
    "toolchain.host-compiler",
    "toolchain.libclang",
    "toolchain.rustc",
    "toolchain.kernel-rustc",
    "toolchain.maturin",
    "driver.libcuda",
    "driver.init",
    "driver.version",
    "driver.ptx-jit",
    "gpu.devices",
    "gpu.coverage",
    "trap.stub-libcuda",
    "trap.unversioned-libcuda",
    "trap.cuda-home",
    "trap.runtime-lib",
    "link.driver-api",
];

/// Where the pins come from.
#[derive(Debug, Clone)]
pub enum PinsSource {
    /// The nearest workspace Cargo.toml at or above this directory, else the built-in pins.
    Discover(PathBuf),
    /// Exactly this Cargo.toml.
    File(PathBuf),
}

#[derive(Debug, Clone)]
pub struct Options {
    pub mode: Mode,
    pub pins: PinsSource,
    /// What the checks read (PATH, CUDA_HOME, LD_LIBRARY_PATH for the trap scan, …) and what
    /// child processes get. The in-process `libcuda.so.1` load is the exception: the dynamic
    /// loader read this process's own LD_LIBRARY_PATH when it started.
    pub env: Env,
    /// How to run isolated probes; None skips the checks that need one.
    pub probe: Option<ProbeCommand>,
    /// Check ids the user waived (`--skip ID`): reported as `skip`, never failing the run —
    /// e.g. `link.driver-api` for a project that never links the driver.
    pub skip: Vec<String>,
    /// The Python whose packages are inventoried and searched for the runtime libraries;
    /// None: `python3` on PATH.
    pub python: Option<PathBuf>,
}

impl Options {
    pub fn new(mode: Mode, pins: PinsSource) -> Options {
        Options {
            mode,
            pins,
            env: Env::from_process(),
            probe: None,
            skip: Vec::new(),
            python: None,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum DoctorError {
    #[error("--pins {path}: {source}")]
    Pins { path: PathBuf, source: PinsError },
    #[error("--skip {0}: no such check (ids: {ids})", ids = CHECK_IDS.join(", "))]
    UnknownCheck(String),
}

/// The pins, their `pins` check, the manifest they came from, and the toolchain route: the
/// pins' own ([`Route::of`]), but a consumer's when they are kiln's built-in ones (no project
/// here, so no `cargo xtask` either).
fn resolve_pins(source: &PinsSource) -> Result<(Pins, Check, Option<PathBuf>, Route), DoctorError> {
    match source {
        PinsSource::File(path) => {
            let pins = Pins::load(path).map_err(|source| DoctorError::Pins {
                path: path.clone(),
                source,
            })?;
            let check = Check::ok(
                "pins",
                Scope::Both,
                format!("pins from {} (--pins)", path.display()),
            );
            let route = Route::of(&pins);
            Ok((pins, check, Some(path.clone()), route))
        }
        PinsSource::Discover(dir) => match Pins::discover(dir) {
            Ok(pins) => {
                let check = Check::ok(
                    "pins",
                    Scope::Both,
                    format!("pins from {}", pins.manifest.display()),
                );
                let path = pins.manifest.clone();
                let route = Route::of(&pins);
                Ok((pins, check, Some(path), route))
            }
            Err(e) => {
                let pins =
                    Pins::parse(kiln_pins::BUILT_IN_MANIFEST, Path::new("<built into kiln>"))
                        .expect("the workspace's own pins parse");
                let why = match e {
                    PinsError::NoWorkspace(_) => e.to_string(),
                    other => format!("the workspace pins are unusable ({other})"),
                };
                let check = Check::warn(
                    "pins",
                    Scope::Both,
                    format!(
                        "{why}; checking against the pins this kiln was built with (nvcc {}, matrix {}, min-driver {})",
                        pins.toolchain.nvcc,
                        pins.matrix.targets().iter().map(|t| t.name()).collect::<Vec<_>>().join(" "),
                        pins.min_driver
                    ),
                )
                .with_fix("run inside a project with a kiln table ([package.metadata.kiln]) or kiln's workspace, or pass --pins path/to/Cargo.toml");
                Ok((pins, check, None, Route::Consumer))
            }
        },
    }
}

/// Runs every check.
pub fn run(opts: &Options) -> Result<Report, DoctorError> {
    let started = std::time::Instant::now();
    if let Some(unknown) = opts.skip.iter().find(|s| !CHECK_IDS.contains(&s.as_str())) {
        return Err(DoctorError::UnknownCheck(unknown.clone()));
    }
    let (pins, pins_check, pins_path, route) = resolve_pins(&opts.pins)?;
    let env = &opts.env;
    let workspace = pins_path
        .as_deref()
        .and_then(Path::parent)
        .unwrap_or(Path::new("."))
        .to_path_buf();
    let mut checks = vec![pins_check];

    checks.extend(toolchain_checks::nvcc_checks(env, &pins, route));
    checks.push(toolchain_checks::libclang(
        env,
        &pins,
        &workspace,
        opts.probe.as_ref(),
        route,
    ));
    checks.push(toolchain_checks::rustc(env, &pins));
    checks.push(toolchain_checks::kernel_rustc(env, &pins));
    checks.push(toolchain_checks::maturin(env, &pins, route));

    let driver = driver::probe();
    checks.extend(gpu::checks(&pins, &driver));

    let python = inventory::python(env, opts.python.as_deref());
    let declared = declared(&pins, &workspace, python.as_ref().ok());
    let loader = LoaderPath::from_env(env);
    checks.extend(traps::libcuda(env, &loader, &driver, opts.probe.as_ref()));
    checks.push(traps::cuda_home(env, route));
    checks.extend(traps::runtime_libs(
        env,
        &loader,
        &pins,
        python.as_ref().ok(),
        &declared,
    ));

    // The toolkit a build would use: CUDA_HOME, else CUDA_PATH, else the one nvcc lives in.
    let cuda_home = ["CUDA_HOME", "CUDA_PATH"]
        .iter()
        .find_map(|v| env.get(v).map(PathBuf::from))
        .or_else(|| {
            toolchain_checks::locate_nvcc(env, &pins)
                .ok()
                .and_then(|n| Some(n.parent()?.parent()?.to_path_buf()))
        });
    checks.push(link::check(env, cuda_home.as_deref(), driver.is_ok()));

    let nvcc = checks
        .iter()
        .find(|c| c.id == "toolchain.nvcc")
        .and_then(|c| {
            Some(format!(
                "{} ({})",
                c.facts.get("version")?,
                c.facts.get("path")?
            ))
        });
    let inventory = Inventory::gather(python, &driver, nvcc);
    let checks = checks
        .into_iter()
        .map(|c| {
            if opts.skip.iter().any(|s| s == c.id) {
                let message = format!(
                    "waived (--skip); it said: {} {}",
                    c.status.label(),
                    c.message
                );
                Check {
                    status: Status::Skip,
                    message,
                    fix: Vec::new(),
                    ..c
                }
            } else {
                c
            }
        })
        .collect();
    let elapsed_ms = started.elapsed().as_millis() as u64;
    Ok(Report::new(
        opts.mode,
        pins_path.map(|p| p.display().to_string()),
        checks,
        inventory,
        elapsed_ms,
    ))
}

/// What `pip install` of kiln's wheel pulls in: the installed wheel's own Requires-Dist when
/// there is one, else the Requires-Dist rule applied to these pins (kiln-wheel's `Recipe`,
/// the code every wheel build runs), else unknown.
fn declared(pins: &Pins, workspace: &Path, python: Option<&Python>) -> Declared {
    if let Some(k) = python.and_then(|p| p.kiln.as_ref()) {
        return Declared::Installed(format!("{} {}", k.name, k.version), k.requires.clone());
    }
    match kiln_wheel::finalize::Recipe::from_pins(pins, workspace) {
        Ok(r) => Declared::Workspace(r.runtime.into_iter().map(|w| w.name).collect()),
        Err(_) => Declared::Unknown,
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_id_is_documented_in_the_table() {
        let doc = include_str!("lib.rs");
        let rows = doc.lines().filter(|l| l.starts_with("//! | `")).count();
        assert_eq!(rows, super::CHECK_IDS.len(), "table rows vs CHECK_IDS");
        for id in super::CHECK_IDS {
            assert!(
                doc.contains(&format!("//! | `{id}` |")),
                "{id} undocumented"
            );
        }
    }
}
