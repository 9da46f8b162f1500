//! Finding nvcc (the CUDA toolkit) and proving, in seconds, that it is the pinned one and supports the matrix.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

use kiln_pins::{Pins, TargetKind};

use crate::error::ToolchainError;
use crate::layout::Layout;

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
/// install `kiln bootstrap` makes for these pins ([`Layout::per_user`]).
pub fn locate(
    env: &dyn Fn(&str) -> Option<OsString>,
    pins: &Pins,
) -> Result<PathBuf, ToolchainError> {
    let workspace = pins.root();
    let mut searched = Vec::new();
    let mut candidates: Vec<PathBuf> = Vec::new();
    if let Some(p) = env("KILN_NVCC") {
        candidates.push(PathBuf::from(p));
    }
    for var in ["CUDA_HOME", "CUDA_PATH"] {
        if let Some(home) = env(var) {
            candidates.push(PathBuf::from(home).join("bin/nvcc"));
        }
    }
    if let Some(path) = env("PATH") {
        candidates.extend(std::env::split_paths(&path).map(|d| d.join("nvcc")));
    }
    candidates.push(Layout::in_checkout(workspace).cuda_home().join("bin/nvcc"));
    if let Some(user) = Layout::per_user(env, pins) {
        candidates.push(user.cuda_home().join("bin/nvcc"));
    }
    for c in candidates {
        if c.is_file() {
            return Ok(c);
        }
        searched.push(c.display().to_string());
    }
    Err(ToolchainError::NvccNotFound {
        searched: summarize(&searched),
    })
}

fn summarize(paths: &[String]) -> String {
    if paths.len() <= 6 {
        return paths.join(", ");
    }
    format!("{}, … ({} places)", paths[..5].join(", "), paths.len())
}

/// Runs `nvcc --version` and `--list-gpu-code`, and checks both against the pins.
pub fn preflight(nvcc: &Path, pins: &Pins) -> Result<Toolkit, ToolchainError> {
    let version_text = run(nvcc, &["--version"])?;
    let version = parse_nvcc_version(&version_text).ok_or_else(|| ToolchainError::Tool {
        tool: nvcc.display().to_string(),
        message: format!("unrecognised `nvcc --version` output: {version_text:?}"),
    })?;
    if version != pins.toolchain.nvcc {
        return Err(ToolchainError::NvccVersion {
            path: nvcc.to_path_buf(),
            found: version,
            pinned: pins.toolchain.nvcc.clone(),
        });
    }
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

    #[test]
    fn locate_reports_every_place_it_looked() {
        let env = |k: &str| match k {
            "CUDA_HOME" => Some(OsString::from("/nonexistent/cuda")),
            "PATH" => Some(OsString::from("/nonexistent/bin")),
            _ => None,
        };
        let pins = Pins::parse(
            "[workspace.metadata.kiln]\narchs = [\"8.0\"]\n",
            Path::new("/nonexistent/ws/Cargo.toml"),
        )
        .unwrap();
        let err = locate(&env, &pins).unwrap_err().to_string();
        assert!(err.contains("/nonexistent/ws/.toolchain/cuda"), "{err}");
        assert!(err.contains("/nonexistent/cuda/bin/nvcc"), "{err}");
        assert!(
            err.contains("kiln bootstrap") && err.contains("nix develop"),
            "{err}"
        );
    }
}
