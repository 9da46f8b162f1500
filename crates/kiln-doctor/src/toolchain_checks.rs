//! Build-side checks: nvcc (a release the project accepts, every matrix target), the host
//! compiler nvcc drives, libclang for bindgen, rustc and maturin. Fixes name the project's
//! [`Route`]: `cargo xtask bootstrap` only in kiln's own checkout, `kiln bootstrap` elsewhere.

use std::path::{Path, PathBuf};
use std::process::Command;

use kiln_pins::Pins;
use kiln_toolchain::nvcc as toolkit;
use kiln_toolchain::{kernel_rustc, needs, Route, ToolchainError};

use crate::env::Env;
use crate::probe::{self, LibclangProbe, ProbeCommand};
use crate::report::{Check, Scope};
use crate::run_error::RunError;

/// Runs `program args` and returns stdout+stderr, or why it could not run.
pub(crate) fn capture(cmd: &mut Command) -> Result<(bool, String), RunError> {
    let out = cmd.output().map_err(RunError::spawn(cmd.get_program()))?;
    let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&out.stderr));
    Ok((out.status.success(), text))
}

/// `nvcc --version` of the nvcc at `path`.
pub(crate) fn nvcc_version(env: &Env, path: &Path) -> Result<String, RunError> {
    let (ok, text) = capture(env.command(path).arg("--version"))?;
    let command = format!("`{} --version`", path.display());
    if !ok {
        return Err(RunError::Failed {
            command,
            detail: text.trim().to_string(),
        });
    }
    toolkit::parse_nvcc_version(&text).ok_or_else(|| RunError::NoVersion {
        command,
        output: text.trim().to_string(),
    })
}

/// nvcc as kiln-build finds it.
pub(crate) fn locate_nvcc(env: &Env, pins: &Pins) -> Result<PathBuf, ToolchainError> {
    toolkit::locate(&|k: &str| env.get(k).map(|v| v.to_os_string()), pins)
}

/// `toolchain.nvcc`, `toolchain.cuda-targets`, `toolchain.host-compiler`.
pub fn nvcc_checks(env: &Env, pins: &Pins, route: Route) -> Vec<Check> {
    const DEP: &str = "needs a working nvcc (toolchain.nvcc failed)";
    let skipped = |c: Vec<Check>| {
        let mut c = c;
        c.push(Check::skip("toolchain.cuda-targets", Scope::Build, DEP));
        c.push(Check::skip("toolchain.host-compiler", Scope::Build, DEP));
        c
    };
    let nvcc = match locate_nvcc(env, pins) {
        Ok(p) => p,
        Err(e) => {
            let msg = e.to_string();
            let first = msg.lines().next().unwrap_or_default().to_string();
            return skipped(vec![
                Check::fail("toolchain.nvcc", Scope::Build, first).with_fix(route.install_fix())
            ]);
        }
    };
    let version = match nvcc_version(env, &nvcc) {
        Ok(v) => v,
        Err(e) => {
            return skipped(vec![Check::fail(
                "toolchain.nvcc",
                Scope::Build,
                e.to_string(),
            )
            .with_fix(route.install_fix())])
        }
    };
    // The same rule and words as kiln-build's preflight: the project's `cuda` range, else the pin.
    if let Err(e) = toolkit::check_version(&nvcc, &version, pins, route) {
        let (message, fix) = match e {
            ToolchainError::NvccVersion {
                path,
                found,
                accepted,
                fix,
                ..
            } => (
                format!("nvcc at {} is {found}, but {accepted}", path.display()),
                fix_line(&fix),
            ),
            other => (other.to_string(), route.install_fix()),
        };
        return skipped(vec![
            Check::fail("toolchain.nvcc", Scope::Build, message).with_fix(fix)
        ]);
    }
    let pinned = &pins.toolchain.nvcc;
    let which = match &pins.kernels.cuda {
        _ if &version == pinned => "the pinned version".to_string(),
        Some(range) => format!("inside the project's cuda range {range}; kiln pins {pinned}"),
        None => "accepted".to_string(),
    };
    let mut checks = vec![Check::ok(
        "toolchain.nvcc",
        Scope::Build,
        format!("nvcc {version} at {} ({which})", nvcc.display()),
    )
    .with_fact("path", nvcc.display().to_string())
    .with_fact("version", version.clone())];
    let targets: Vec<String> = pins.matrix.targets().iter().map(|t| t.name()).collect();
    checks.push(match toolkit::preflight(&nvcc, pins) {
        Ok(tk) => Check::ok(
            "toolchain.cuda-targets",
            Scope::Build,
            format!(
                "nvcc {} supports every matrix target: {}",
                tk.version,
                targets.join(" ")
            ),
        ),
        Err(e @ ToolchainError::UnsupportedTarget { .. }) => {
            Check::fail("toolchain.cuda-targets", Scope::Build, e.to_string()).with_fix(format!(
                "drop that entry from `archs` in {}, or use a toolkit that supports it",
                pins.table("")
            ))
        }
        Err(e) => Check::fail("toolchain.cuda-targets", Scope::Build, e.to_string())
            .with_fix(route.install_fix()),
    });
    checks.push(host_compiler(env, pins, &nvcc));
    checks
}

/// Compiles a tiny kernel with host code: nvcc runs the host compiler for it and rejects one it
/// does not support ("unsupported GNU version"), which a fatbin-only build would never notice.
fn host_compiler(env: &Env, pins: &Pins, nvcc: &Path) -> Check {
    const ID: &str = "toolchain.host-compiler";
    let dir = match tempfile::tempdir() {
        Ok(d) => d,
        Err(e) => {
            return Check::fail(
                ID,
                Scope::Build,
                format!("cannot create a temporary directory: {e}"),
            )
        }
    };
    let src = dir.path().join("kiln_doctor_host.cu");
    let code = "__global__ void kiln_doctor_k(int *p) { *p = 1; }\nint main() { kiln_doctor_k<<<1, 1>>>(nullptr); return 0; }\n";
    if let Err(e) = std::fs::write(&src, code) {
        return Check::fail(
            ID,
            Scope::Build,
            format!("cannot write {}: {e}", src.display()),
        );
    }
    let arch = pins
        .matrix
        .sass()
        .next()
        .expect("matrix is never empty")
        .sm();
    let obj = dir.path().join("kiln_doctor_host.o");
    let args = |cmd: &mut Command| {
        cmd.arg("-c")
            .arg(format!("-arch={arch}"))
            .arg(&src)
            .arg("-o")
            .arg(&obj);
    };
    // --dryrun names the host compiler nvcc will run (NVCC_CCBIN / -ccbin / PATH's gcc).
    let mut dry = env.command(nvcc);
    args(&mut dry);
    dry.arg("--dryrun");
    let host = capture(&mut dry)
        .ok()
        .and_then(|(_, text)| host_compiler_from_dryrun(&text));
    let host_version = host.as_ref().and_then(|h| {
        let (ok, text) = capture(env.command(h).arg("--version")).ok()?;
        ok.then(|| text.lines().next().unwrap_or_default().trim().to_string())
    });
    let named = match (&host, &host_version) {
        (Some(h), Some(v)) => format!("{h} ({v})"),
        (Some(h), None) => h.clone(),
        _ => "the host compiler".into(),
    };
    let mut cmd = env.command(nvcc);
    args(&mut cmd);
    match capture(&mut cmd) {
        Ok((true, _)) => Check::ok(ID, Scope::Build, format!("nvcc accepts {named}: a kernel with host code compiles for {arch}")),
        Ok((false, text)) => Check::fail(ID, Scope::Build, format!("nvcc rejects {named}: {}", last_lines(&text, 6)))
            .with_fix("install a host compiler this nvcc supports and select it with NVCC_CCBIN=/path/to/g++ (or -ccbin)"),
        Err(e) => Check::fail(ID, Scope::Build, e.to_string()),
    }
}

/// The program of nvcc's host preprocessing step: "#$ gcc -D__CUDA_ARCH_LIST__=800 -E -x c++ …".
pub fn host_compiler_from_dryrun(text: &str) -> Option<String> {
    text.lines()
        .filter_map(|l| l.strip_prefix("#$ "))
        .find(|l| l.contains(" -E ") && l.contains("-x c++"))
        .and_then(|l| l.split_whitespace().next())
        .map(|p| p.trim_matches('"').to_string())
}

/// The error's advice (a sentence) as a fix line (a clause, like the others).
fn fix_line(sentence: &str) -> String {
    let s = sentence.trim_end_matches('.');
    let mut chars = s.chars();
    chars
        .next()
        .map(|c| c.to_lowercase().chain(chars).collect())
        .unwrap_or_default()
}

pub(crate) fn last_lines(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    lines[lines.len().saturating_sub(n)..].join(" | ")
}

/// `toolchain.libclang`: loads libclang the way bindgen will (in a child) and parses
/// `#include <stddef.h>`, which only works when clang's resource directory is found. Only when
/// bindgen will run: kiln-build runs it only for `*.h` headers in `<kernels dir>/include`.
pub fn libclang(
    env: &Env,
    pins: &Pins,
    workspace: &Path,
    probe: Option<&ProbeCommand>,
    route: Route,
) -> Check {
    const ID: &str = "toolchain.libclang";
    if needs::bindgen_headers(pins).is_empty() {
        return Check::skip(
            ID,
            Scope::Build,
            format!(
                "bindgen will not run: no headers in {}/include (kiln-build runs it only for `*.h` there), so libclang is not needed",
                pins.kernels.dir
            ),
        );
    }
    let Some(probe) = probe else {
        return Check::skip(
            ID,
            Scope::Build,
            "no probe command to load libclang in isolation (library use without the kiln binary)",
        );
    };
    // Same default as kiln-build: `<root>/.toolchain`'s libclang when LIBCLANG_PATH is unset
    // (a consumer's per-user install is reached through its env file, as the fix says).
    let mut child_env = env.clone();
    let bootstrap = workspace.join(".toolchain/libclang/clang/native");
    if env.get("LIBCLANG_PATH").is_none() && bootstrap.join("libclang.so").exists() {
        child_env.set("LIBCLANG_PATH", &bootstrap);
        if env.get("BINDGEN_EXTRA_CLANG_ARGS").is_none() {
            child_env.set(
                "BINDGEN_EXTRA_CLANG_ARGS",
                format!("-resource-dir={}", bootstrap.join("resource").display()),
            );
        }
    }
    let resource = child_env
        .get("BINDGEN_EXTRA_CLANG_ARGS")
        .and_then(|a| a.to_str())
        .and_then(|a| {
            a.split_whitespace()
                .find_map(|w| w.strip_prefix("-resource-dir="))
                .map(str::to_string)
        });
    let resource_text = resource
        .clone()
        .map(|r| format!("resource dir {r}"))
        .unwrap_or_else(|| "libclang's built-in resource dir".into());
    let result: Result<LibclangProbe, RunError> =
        probe::run(probe, &child_env, &["libclang".as_ref()]);
    let p = match result {
        Ok(p) => p,
        Err(e) => {
            return Check::fail(
                ID,
                Scope::Build,
                format!("loading libclang crashed or failed: {e}"),
            )
            .with_fix(route.install_fix())
        }
    };
    if let Some(e) = p.error {
        let first = e.lines().next().unwrap_or_default();
        return Check::fail(
            ID,
            Scope::Build,
            format!("libclang not found (bindgen needs it): {first}"),
        )
        .with_fix(route.install_fix())
        .with_fix("or set LIBCLANG_PATH to the directory holding libclang.so");
    }
    let path = p
        .path
        .map(|p| p.display().to_string())
        .unwrap_or_else(|| "?".into());
    let version = p.version.unwrap_or_default();
    if p.major != Some(pins.toolchain.clang_major) {
        return Check::fail(
            ID,
            Scope::Build,
            format!(
                "libclang at {path} is {version:?}, but kiln pins clang {}",
                pins.toolchain.clang_major
            ),
        )
        .with_fix(route.install_fix())
        .with_fix("or set LIBCLANG_PATH to a libclang of the pinned major");
    }
    if let Some(e) = p.stddef_error {
        return Check::fail(
            ID,
            Scope::Build,
            format!("libclang {version} at {path} cannot resolve <stddef.h> with {resource_text}: {}", last_lines(&e, 2)),
        )
        .with_fix(format!("point bindgen at clang's resource dir: BINDGEN_EXTRA_CLANG_ARGS=-resource-dir=<dir with include/stddef.h> ({} sets it)", route.source_env()));
    }
    Check::ok(
        ID,
        Scope::Build,
        format!("{version} at {path}; <stddef.h> resolves ({resource_text})"),
    )
}

/// `toolchain.kernel-rustc`: the rustc that compiles kernels/rust for nvptx64 (the pinned
/// `kernel-rustc` release or the flake's nightly, with rust-src and cargo beside it), found
/// exactly as kiln-build finds it. Only for a project with Rust kernels (`<kernels dir>/rust`).
pub fn kernel_rustc(env: &Env, pins: &Pins) -> Check {
    const ID: &str = "toolchain.kernel-rustc";
    if needs::rust_kernels(pins).is_none() {
        return Check::skip(
            ID,
            Scope::Build,
            format!(
                "no Rust kernels ({}/rust/Cargo.toml), so the kernel rustc is not needed",
                pins.kernels.dir
            ),
        );
    }
    match kernel_rustc::locate(&|k: &str| env.get(k).map(|v| v.to_os_string()), pins) {
        Ok(r) => {
            let field = |k: &str| {
                r.version_verbose
                    .lines()
                    .find_map(|l| l.strip_prefix(k))
                    .unwrap_or("?")
                    .trim()
                    .to_string()
            };
            Check::ok(
                ID,
                Scope::Build,
                format!(
                    "rustc {} (LLVM {}) at {} builds kernels/rust for {} ({})",
                    field("release:"),
                    field("LLVM version:"),
                    r.rustc.display(),
                    kernel_rustc::DEVICE_TARGET,
                    match r.std {
                        kernel_rustc::DeviceStd::Sysroot => "against its prebuilt core",
                        kernel_rustc::DeviceStd::BuildStd => "rust-src present, -Zbuild-std=core",
                    }
                ),
            )
            .with_fact("path", r.rustc.display().to_string())
            .with_fact("release", field("release:"))
        }
        Err(e) => {
            Check::fail(ID, Scope::Build, e.to_string()).with_fix(kernel_rustc::install_hint(pins))
        }
    }
}

/// `toolchain.rustc`: stable is what builds here; the flake's nightly is for Nix users.
pub fn rustc(env: &Env, pins: &Pins) -> Check {
    const ID: &str = "toolchain.rustc";
    let program = env
        .get("RUSTC")
        .map(PathBuf::from)
        .or_else(|| env.which("rustc"));
    let Some(program) = program else {
        return Check::fail(ID, Scope::Build, "rustc not found on PATH").with_fix(format!(
            "install stable Rust (rustup) or enter `nix develop` (nightly-{})",
            pins.toolchain.rust_nightly
        ));
    };
    let text = match capture(env.command(&program).arg("-vV")) {
        Ok((true, t)) => t,
        Ok((false, t)) => {
            return Check::fail(
                ID,
                Scope::Build,
                format!("`{} -vV` failed: {}", program.display(), last_lines(&t, 3)),
            )
        }
        Err(e) => return Check::fail(ID, Scope::Build, e.to_string()),
    };
    let field = |k: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(k))
            .map(|v| v.trim().to_string())
    };
    let release = field("release:").unwrap_or_default();
    let date = field("commit-date:").unwrap_or_default();
    let nightly = release.contains("nightly");
    let pinned = &pins.toolchain.rust_nightly;
    if nightly {
        // nightly-D is built from the last commit of the day before D: commit-date is D or D-1.
        let matches = match (day_number(&date), day_number(pinned)) {
            (Some(c), Some(p)) => p - c == 0 || p - c == 1,
            _ => false,
        };
        return if matches {
            Check::ok(
                ID,
                Scope::Build,
                format!("rustc {release} (commit {date}) is the flake's nightly-{pinned}"),
            )
        } else {
            Check::warn(ID, Scope::Build, format!("rustc {release} (commit {date}) is not the flake's nightly-{pinned}"))
                .with_fix(format!("`nix develop` for nightly-{pinned}, or build with stable (the workspace builds on stable)"))
        };
    }
    let minimum = workspace_rust_version(&pins.manifest);
    match (&minimum, version_tuple(&release), minimum.as_deref().and_then(version_tuple)) {
        (Some(min), Some(have), Some(need)) if have < need => {
            Check::fail(ID, Scope::Build, format!("rustc {release} is older than the workspace's rust-version {min}"))
                .with_fix("`rustup update stable`, or `nix develop` for the pinned nightly")
        }
        _ => Check::ok(
            ID,
            Scope::Build,
            format!(
                "rustc {release} (stable){}; the flake pins nightly-{pinned} for Nix users, the workspace builds on stable",
                minimum.map(|m| format!(" >= rust-version {m}")).unwrap_or_default()
            ),
        ),
    }
}

fn workspace_rust_version(manifest: &Path) -> Option<String> {
    let text = std::fs::read_to_string(manifest).ok()?;
    let doc: toml::Table = toml::from_str(&text).ok()?;
    doc.get("workspace")?
        .get("package")?
        .get("rust-version")?
        .as_str()
        .map(str::to_string)
}

/// Days since 1970-01-01 of "YYYY-MM-DD" (proleptic Gregorian), to compare two dates.
fn day_number(date: &str) -> Option<i64> {
    let mut it = date.split('-').map(|p| p.parse::<i64>().ok());
    let (y, m, d) = (it.next()??, it.next()??, it.next()??);
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (m + if m > 2 { -3 } else { 9 }) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    Some(era * 146097 + doe - 719468)
}

fn version_tuple(v: &str) -> Option<(u32, u32, u32)> {
    let core = v.split(['-', ' ']).next()?;
    let mut it = core.split('.').map(|p| p.parse::<u32>().ok());
    Some((
        it.next()??,
        it.next().flatten().unwrap_or(0),
        it.next().flatten().unwrap_or(0),
    ))
}

/// `toolchain.maturin`: builds the wheel; missing is a warning (only the wheel needs it).
pub fn maturin(env: &Env, pins: &Pins, route: Route) -> Check {
    const ID: &str = "toolchain.maturin";
    // The route's install (`.toolchain/` in kiln's checkout, the per-user one elsewhere).
    let bootstrap = route
        .layout(&|k: &str| env.get(k).map(|v| v.to_os_string()), pins)
        .map(|l| l.py_site().join("bin/maturin"));
    let program = env
        .which("maturin")
        .or_else(|| bootstrap.filter(|b| b.is_file()));
    let pinned = &pins.toolchain.maturin;
    let Some(program) = program else {
        return Check::warn(
            ID,
            Scope::Build,
            format!("maturin not found (needed only to build the wheel; pinned {pinned})"),
        )
        .with_fix(route.install_fix());
    };
    match capture(env.command(&program).arg("--version")) {
        Ok((true, text)) => {
            let found = text
                .split_whitespace()
                .nth(1)
                .unwrap_or_default()
                .to_string();
            if &found == pinned {
                Check::ok(
                    ID,
                    Scope::Build,
                    format!(
                        "maturin {found} at {} (the pinned version)",
                        program.display()
                    ),
                )
            } else {
                Check::fail(
                    ID,
                    Scope::Build,
                    format!(
                        "maturin at {} is {found:?}, but kiln pins maturin {pinned}",
                        program.display()
                    ),
                )
                .with_fix(route.install_fix())
            }
        }
        Ok((false, text)) => Check::fail(
            ID,
            Scope::Build,
            format!(
                "`{} --version` failed: {}",
                program.display(),
                last_lines(&text, 3)
            ),
        ),
        Err(e) => Check::fail(ID, Scope::Build, e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_host_compiler_in_a_dryrun() {
        let text = "#$ _NVVM_BRANCH_=nvvm\n#$ gcc -D__CUDA_ARCH_LIST__=800 -E -x c++ -D__CUDACC__ \"p.cu\"\n#$ cudafe++ --c++17\n";
        assert_eq!(host_compiler_from_dryrun(text).as_deref(), Some("gcc"));
        assert_eq!(host_compiler_from_dryrun("nothing"), None);
    }

    #[test]
    fn advice_sentences_become_fix_lines() {
        assert_eq!(
            fix_line("Use the pinned toolkit: `nix develop`."),
            "use the pinned toolkit: `nix develop`"
        );
        assert_eq!(fix_line(""), "");
    }

    #[test]
    fn compares_rust_versions() {
        assert!(version_tuple("1.95.0").unwrap() > version_tuple("1.85").unwrap());
        assert_eq!(version_tuple("1.96.0-nightly"), Some((1, 96, 0)));
        assert_eq!(day_number("1970-01-01"), Some(0));
        assert_eq!(
            day_number("2026-03-01").unwrap() - day_number("2026-02-28").unwrap(),
            1
        );
        assert_eq!(
            day_number("2024-03-01").unwrap() - day_number("2024-02-28").unwrap(),
            2
        );
    }
}
