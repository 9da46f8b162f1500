//! Finding nvcc (the CUDA toolkit) and proving, in seconds, that it is a release the project
//! accepts (its `cuda` range, else kiln's pin) and supports the matrix.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

use kiln_pins::{Pins, TargetKind};

use crate::error::ToolchainError;
use crate::layout::Layout;
use crate::route::Route;

/// A verified CUDA toolkit.
#[derive(Debug, Clone)]
pub struct Toolkit {
    /// The nvcc binary that passed the preflight.
    pub nvcc: PathBuf,
    /// The `fatbinary` beside it, which packs the per-target modules into one fatbin.
    pub fatbinary: PathBuf,
    /// The `nvlink` beside it, which links device code per SASS target.
    pub nvlink: PathBuf,
    /// "13.0.88"
    pub version: String,
    /// `nvcc --list-gpu-code`: "sm_80", …
    pub supported: Vec<String>,
}

/// Reads "13.0.88" from `nvcc --version` ("Cuda compilation tools, release 13.0, V13.0.88").
pub fn parse_nvcc_version(text: &str) -> Option<String> {
    text.lines()
        .find_map(|l| l.split(", V").nth(1))
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
}

/// Where nvcc is looked for, in order: KILN_NVCC, $CUDA_HOME/bin, $CUDA_PATH/bin, PATH, the
/// workspace's `.toolchain/` (`cargo xtask bootstrap` in a kiln checkout), then the per-user
/// install `kiln bootstrap` makes for these pins ([`Layout::per_user`]). A consumer's
/// `.toolchain/` is still tried but not reported: its install is the per-user one.
pub fn locate(
    env: &dyn Fn(&str) -> Option<OsString>,
    pins: &Pins,
) -> Result<PathBuf, ToolchainError> {
    let route = Route::of(pins);
    let mut searched = Vec::new();
    // (candidate, whether the error lists it)
    let mut candidates: Vec<(PathBuf, bool)> = Vec::new();
    if let Some(p) = env("KILN_NVCC") {
        candidates.push((PathBuf::from(p), true));
    }
    for var in ["CUDA_HOME", "CUDA_PATH"] {
        if let Some(home) = env(var) {
            candidates.push((PathBuf::from(home).join("bin/nvcc"), true));
        }
    }
    if let Some(path) = env("PATH") {
        candidates.extend(std::env::split_paths(&path).map(|d| (d.join("nvcc"), true)));
    }
    candidates.push((
        Layout::in_checkout(pins.root())
            .cuda_home()
            .join("bin/nvcc"),
        route == Route::Checkout,
    ));
    let per_user = Layout::per_user(env, pins);
    if let Some(user) = &per_user {
        candidates.push((user.cuda_home().join("bin/nvcc"), true));
    }
    for (c, reported) in candidates {
        if c.is_file() {
            return Ok(c);
        }
        if reported {
            searched.push(c.display().to_string());
        }
    }
    let into = match (route, &per_user) {
        (Route::Checkout, _) => format!(
            " (into {})",
            Layout::in_checkout(pins.root()).root.display()
        ),
        (Route::Consumer, Some(user)) => format!(
            " (into {}, where kiln-build finds it by itself)",
            user.root.display()
        ),
        (Route::Consumer, None) => String::new(),
    };
    Err(ToolchainError::NvccNotFound {
        searched: summarize(&searched),
        fix: format!(
            "Install the pinned CUDA toolkit with {}{into} (no Nix needed), or enter the pinned shell with `nix develop`.",
            route.bootstrap()
        ),
    })
}

fn summarize(paths: &[String]) -> String {
    if paths.len() <= 6 {
        return paths.join(", ");
    }
    format!("{}, … ({} places)", paths[..5].join(", "), paths.len())
}

/// Whether the project accepts nvcc `version` ([`kiln_pins::KernelsPins::accepts_nvcc`]: its
/// `cuda` range, else exactly kiln's pin); the error says what is accepted, where that is
/// stated, and what to do on `route`.
pub fn check_version(
    nvcc: &Path,
    version: &str,
    pins: &Pins,
    route: Route,
) -> Result<(), ToolchainError> {
    let pinned = &pins.toolchain.nvcc;
    if pins.kernels.accepts_nvcc(version, pinned) {
        return Ok(());
    }
    let manifest = pins.manifest.display();
    let kernels = pins.table("kernels");
    let install = format!("{}, or `nix develop`", route.bootstrap());
    let (accepted, fix) = match &pins.kernels.cuda {
        Some(range) => {
            let pin_inside = pins.kernels.accepts_nvcc(pinned, pinned);
            (
                format!("the project accepts nvcc {range} ({kernels} cuda in {manifest})"),
                if pin_inside {
                    format!("Point KILN_NVCC or CUDA_HOME at an nvcc in that range, or install kiln's pinned {pinned}: {install}.")
                } else {
                    format!("Point KILN_NVCC or CUDA_HOME at an nvcc in that range (kiln's pinned {pinned} is outside it), or change the range.")
                },
            )
        }
        // A consumer states which CUDA releases it builds with in its own table.
        None if !pins.inherited.is_empty() => (
            format!("kiln pins nvcc {pinned} and the project accepts no other release (no `cuda` range in {kernels} of {manifest})"),
            format!(
                "To build with this toolkit, declare the releases the project accepts in {kernels}, e.g. `cuda = \"{}\"`; or install the pinned one: {install}.",
                example_range(version, pinned)
            ),
        ),
        None => (
            format!("kiln pins nvcc {pinned} ({} in {manifest})", pins.table("toolchain")),
            format!("Use the pinned toolkit: {install}."),
        ),
    };
    Err(ToolchainError::NvccVersion {
        path: nvcc.to_path_buf(),
        found: version.to_string(),
        pinned: pinned.clone(),
        accepted,
        fix,
    })
}

/// A `cuda` range holding both releases: ">=12.9,<14" for 12.9.41 and 13.0.88.
fn example_range(found: &str, pinned: &str) -> String {
    let major_minor = |v: &str| -> Option<(u32, u32)> {
        let mut it = v.split('.').map(|p| p.parse::<u32>().ok());
        Some((it.next()??, it.next()??))
    };
    match (major_minor(found), major_minor(pinned)) {
        (Some(f), Some(p)) => {
            let low = f.min(p);
            format!(">={}.{},<{}", low.0, low.1, f.0.max(p.0) + 1)
        }
        _ => ">=12.8,<14".into(),
    }
}

/// Runs `nvcc --version` and `--list-gpu-code`, and checks both against the pins.
pub fn preflight(nvcc: &Path, pins: &Pins) -> Result<Toolkit, ToolchainError> {
    let version_text = run(nvcc, &["--version"])?;
    let version = parse_nvcc_version(&version_text).ok_or_else(|| ToolchainError::Tool {
        tool: nvcc.display().to_string(),
        message: format!("unrecognised `nvcc --version` output: {version_text:?}"),
    })?;
    check_version(nvcc, &version, pins, Route::of(pins))?;
    let list = run(nvcc, &["--list-gpu-code"])?;
    let supported: Vec<String> = list.split_whitespace().map(str::to_string).collect();
    for target in pins.matrix.targets() {
        // --list-gpu-code lists plain sm_XX; a/f variants exist for every listed major >= 9/10.
        let plain = format!("sm_{}", target.arch.number());
        if !supported.contains(&plain) {
            let label = match target.kind {
                TargetKind::Sass => target.arch.sm(),
                TargetKind::Ptx => target.arch.compute(),
            };
            return Err(ToolchainError::UnsupportedTarget {
                path: nvcc.to_path_buf(),
                target: label,
                supported: supported.join(" "),
            });
        }
    }
    let bin = nvcc.parent().unwrap_or(Path::new("."));
    let sibling = |name: &str| -> Result<PathBuf, ToolchainError> {
        let p = bin.join(name);
        if p.is_file() {
            Ok(p)
        } else {
            Err(ToolchainError::Tool {
                tool: name.into(),
                message: format!("not found next to nvcc ({})", p.display()),
            })
        }
    };
    Ok(Toolkit {
        nvcc: nvcc.to_path_buf(),
        fatbinary: sibling("fatbinary")?,
        nvlink: sibling("nvlink")?,
        version,
        supported,
    })
}

impl Toolkit {
    /// CUDA_HOME: the directory above nvcc's bin/.
    pub fn cuda_home(&self) -> PathBuf {
        self.nvcc
            .parent()
            .and_then(Path::parent)
            .unwrap_or(Path::new("."))
            .to_path_buf()
    }
}

fn run(program: &Path, args: &[&str]) -> Result<String, ToolchainError> {
    let out = Command::new(program)
        .args(args)
        .output()
        .map_err(|e| ToolchainError::Tool {
            tool: program.display().to_string(),
            message: format!("cannot run it: {e}"),
        })?;
    if !out.status.success() {
        return Err(ToolchainError::Tool {
            tool: format!("{} {}", program.display(), args.join(" ")),
            message: String::from_utf8_lossy(&out.stderr).into_owned(),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_nvcc_version() {
        let text = "nvcc: NVIDIA (R) Cuda compiler driver\nCuda compilation tools, release 13.0, V13.0.88\nBuild cuda_13.0.r13.0/compiler.36424714_0\n";
        assert_eq!(parse_nvcc_version(text).as_deref(), Some("13.0.88"));
        assert_eq!(parse_nvcc_version("garbage"), None);
    }

    /// kiln's own table (complete) at `manifest`.
    fn own_pins(manifest: &Path) -> Pins {
        let text =
            std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../Cargo.toml"))
                .unwrap();
        Pins::parse(&text, manifest).unwrap()
    }

    /// A consumer's table (layered over kiln's) at `manifest`, with `kernels` as its
    /// `[package.metadata.kiln.kernels]` body.
    fn consumer_pins(manifest: &Path, kernels: &str) -> Pins {
        let text = format!(
            "[package]\nname = \"c\"\n[package.metadata.kiln]\narchs = [\"8.9\"]\n\
             [package.metadata.kiln.kernels]\n{kernels}\n"
        );
        Pins::parse(&text, manifest).unwrap()
    }

    /// A fake toolkit in `dir`: an nvcc script that reports `release` and lists sm_80…sm_120,
    /// with fatbinary and nvlink beside it. Version parsing is what it tests; the real nvcc is
    /// kiln-build's preflight tests'.
    fn fake_toolkit(dir: &Path, release: &str) -> PathBuf {
        use std::os::unix::fs::PermissionsExt;
        let bin = dir.join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        let short = release.rsplit_once('.').unwrap().0;
        let script = format!(
            "#!/bin/sh\ncase \"$1\" in\n\
             --version) echo 'nvcc: NVIDIA (R) Cuda compiler driver'; echo 'Cuda compilation tools, release {short}, V{release}';;\n\
             --list-gpu-code) echo sm_80 sm_86 sm_89 sm_90 sm_100 sm_120;;\n\
             *) exit 1;;\nesac\n"
        );
        for (name, text) in [("nvcc", script.as_str()), ("fatbinary", ""), ("nvlink", "")] {
            let p = bin.join(name);
            std::fs::write(&p, text).unwrap();
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        bin.join("nvcc")
    }

    #[test]
    fn a_consumer_s_cuda_range_accepts_other_releases_and_the_error_names_it() {
        let tmp = tempfile::tempdir().unwrap();
        let manifest = tmp.path().join("Cargo.toml");
        let pins = consumer_pins(&manifest, "cuda = \">=12.8,<14\"");
        let nvcc = fake_toolkit(&tmp.path().join("cuda-12.9"), "12.9.41");
        let tk = preflight(&nvcc, &pins).expect("12.9.41 is inside >=12.8,<14");
        assert_eq!(tk.version, "12.9.41");
        assert!(preflight(&fake_toolkit(&tmp.path().join("13.1"), "13.1.80"), &pins).is_ok());

        let nvcc = fake_toolkit(&tmp.path().join("cuda-14"), "14.0.1");
        let err = preflight(&nvcc, &pins).unwrap_err();
        assert!(matches!(err, ToolchainError::NvccVersion { .. }), "{err:?}");
        let msg = err.to_string();
        let stated = format!(
            "the project accepts nvcc >=12.8,<14 ([package.metadata.kiln.kernels] cuda in {})",
            manifest.display()
        );
        assert!(msg.contains(&stated) && msg.contains("14.0.1"), "{msg}");
        assert!(
            msg.contains("kiln bootstrap") && !msg.contains("xtask"),
            "{msg}"
        );
    }

    #[test]
    fn a_consumer_without_a_range_is_told_how_to_declare_one() {
        let tmp = tempfile::tempdir().unwrap();
        let manifest = tmp.path().join("Cargo.toml");
        let pins = consumer_pins(&manifest, "");
        assert!(preflight(&fake_toolkit(tmp.path(), &pins.toolchain.nvcc), &pins).is_ok());
        let nvcc = fake_toolkit(&tmp.path().join("12.9"), "12.9.41");
        let msg = preflight(&nvcc, &pins).unwrap_err().to_string();
        assert!(
            msg.contains("[package.metadata.kiln.kernels]")
                && msg.contains(&manifest.display().to_string())
                && msg.contains("`cuda = \">=12.9,<14\"`"),
            "{msg}"
        );
        assert!(
            msg.contains("kiln bootstrap --env-file") && msg.contains("nix develop"),
            "{msg}"
        );
        assert!(
            !msg.contains("xtask") && !msg.contains(".toolchain"),
            "{msg}"
        );
    }

    #[test]
    fn kiln_s_own_checkout_keeps_the_exact_pin_and_the_xtask_route() {
        let tmp = tempfile::tempdir().unwrap();
        let pins = own_pins(&tmp.path().join("Cargo.toml"));
        let nvcc = fake_toolkit(tmp.path(), "13.0.48");
        let msg = preflight(&nvcc, &pins).unwrap_err().to_string();
        assert!(
            msg.contains(&format!(
                "kiln pins nvcc {} ([workspace.metadata.kiln.toolchain]",
                pins.toolchain.nvcc
            )),
            "{msg}"
        );
        assert!(msg.contains("cargo xtask bootstrap"), "{msg}");
        assert_eq!(example_range("12.9.41", "13.0.88"), ">=12.9,<14");
        assert_eq!(example_range("13.2.10", "13.0.88"), ">=13.0,<14");
    }

    #[test]
    fn locate_reports_every_place_it_looked() {
        let env = |k: &str| match k {
            "CUDA_HOME" => Some(OsString::from("/nonexistent/cuda")),
            "PATH" => Some(OsString::from("/nonexistent/bin")),
            "HOME" => Some(OsString::from("/nonexistent/home")),
            _ => None,
        };
        // kiln's own checkout: its .toolchain/ and `cargo xtask bootstrap`.
        let pins = own_pins(Path::new("/nonexistent/ws/Cargo.toml"));
        let err = locate(&env, &pins).unwrap_err().to_string();
        assert!(err.contains("/nonexistent/ws/.toolchain/cuda"), "{err}");
        assert!(err.contains("/nonexistent/cuda/bin/nvcc"), "{err}");
        assert!(
            err.contains("cargo xtask bootstrap") && err.contains("nix develop"),
            "{err}"
        );
        // A consumer: the per-user install, `kiln bootstrap`; no .toolchain/ in its directory.
        let pins = consumer_pins(Path::new("/nonexistent/ws/Cargo.toml"), "");
        let err = locate(&env, &pins).unwrap_err().to_string();
        let user = Layout::per_user(&env, &pins).unwrap().root;
        assert!(user.starts_with("/nonexistent/home/.local/share/kiln/toolchain"));
        assert!(
            err.contains(&user.join("cuda").display().to_string()),
            "{err}"
        );
        assert!(
            !err.contains(".toolchain") && !err.contains("xtask"),
            "{err}"
        );
        assert!(
            err.contains("kiln bootstrap") && err.contains("nix develop"),
            "{err}"
        );
    }
}
