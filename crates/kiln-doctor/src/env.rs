//! The environment the checks look at (a snapshot, so tests can hand in their own) and the
//! places the dynamic loader searches for a library name.

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Environment variables as the checks see them.
#[derive(Debug, Clone, Default)]
pub struct Env {
    vars: BTreeMap<OsString, OsString>,
}

impl Env {
    pub fn from_process() -> Env {
        Env {
            vars: std::env::vars_os().collect(),
        }
    }

    pub fn get(&self, key: &str) -> Option<&OsStr> {
        self.vars
            .get(OsStr::new(key))
            .map(OsString::as_os_str)
            .filter(|v| !v.is_empty())
    }

    pub fn set(&mut self, key: &str, value: impl Into<OsString>) {
        self.vars.insert(key.into(), value.into());
    }

    pub fn remove(&mut self, key: &str) {
        self.vars.remove(OsStr::new(key));
    }

    /// A colon-separated list variable, empty entries dropped.
    pub fn paths(&self, key: &str) -> Vec<PathBuf> {
        self.get(key)
            .map(|v| {
                std::env::split_paths(v)
                    .filter(|p| !p.as_os_str().is_empty())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Every variable, for a child process that must see exactly this environment.
    pub fn iter(&self) -> impl Iterator<Item = (&OsString, &OsString)> {
        self.vars.iter()
    }

    /// `program` as the shell would find it on PATH.
    pub fn which(&self, program: &str) -> Option<PathBuf> {
        self.paths("PATH")
            .into_iter()
            .map(|d| d.join(program))
            .find(|p| is_executable(p))
    }

    /// A command that runs with exactly this environment.
    pub fn command(&self, program: impl AsRef<OsStr>) -> Command {
        let mut cmd = Command::new(program);
        cmd.env_clear().envs(self.iter());
        cmd
    }
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    p.metadata()
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

/// Why the loader would look in a place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Via {
    LdLibraryPath,
    LdconfigCache,
    DefaultDir,
}

impl Via {
    pub fn describe(self) -> &'static str {
        match self {
            Via::LdLibraryPath => "LD_LIBRARY_PATH",
            Via::LdconfigCache => "the ldconfig cache",
            Via::DefaultDir => "a default library directory",
        }
    }
}

/// A file named like the library, in a place the loader searches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    pub path: PathBuf,
    pub via: Via,
}

/// The dynamic loader's search order for `dlopen("name")` without a slash: LD_LIBRARY_PATH,
/// the ld.so cache (`ldconfig -p`), then the trusted default directories.
#[derive(Debug, Clone)]
pub struct LoaderPath {
    pub ld_library_path: Vec<PathBuf>,
    /// (soname, path) pairs from `ldconfig -p`, host architecture only.
    pub cache: Vec<(String, PathBuf)>,
    pub defaults: Vec<PathBuf>,
}

/// The multiarch and lib64 directories glibc's loader tries after its cache.
#[cfg(target_arch = "aarch64")]
const DEFAULT_DIRS: &[&str] = &[
    "/lib/aarch64-linux-gnu",
    "/usr/lib/aarch64-linux-gnu",
    "/lib64",
    "/usr/lib64",
    "/lib",
    "/usr/lib",
];
#[cfg(not(target_arch = "aarch64"))]
const DEFAULT_DIRS: &[&str] = &[
    "/lib/x86_64-linux-gnu",
    "/usr/lib/x86_64-linux-gnu",
    "/lib64",
    "/usr/lib64",
    "/lib",
    "/usr/lib",
];

impl LoaderPath {
    pub fn from_env(env: &Env) -> LoaderPath {
        LoaderPath {
            ld_library_path: env.paths("LD_LIBRARY_PATH"),
            cache: ldconfig_cache(env),
            defaults: DEFAULT_DIRS.iter().map(PathBuf::from).collect(),
        }
    }

    /// Every file the loader could reach under `name`, in the order it would try them.
    pub fn find(&self, name: &str) -> Vec<Found> {
        let mut out: Vec<Found> = Vec::new();
        let mut push = |path: PathBuf, via: Via| {
            if path.exists() && !out.iter().any(|f| f.path == path) {
                out.push(Found { path, via });
            }
        };
        for d in &self.ld_library_path {
            push(d.join(name), Via::LdLibraryPath);
        }
        for (soname, path) in &self.cache {
            if soname == name {
                push(path.clone(), Via::LdconfigCache);
            }
        }
        for d in &self.defaults {
            push(d.join(name), Via::DefaultDir);
        }
        out
    }

    /// Every directory searched, in order (for "looked in" messages).
    pub fn dirs(&self) -> Vec<String> {
        let mut v: Vec<String> = self
            .ld_library_path
            .iter()
            .map(|p| p.display().to_string())
            .collect();
        v.push("the ldconfig cache".into());
        v.extend(self.defaults.iter().map(|p| p.display().to_string()));
        v
    }
}

/// Parses `ldconfig -p`: "\tlibcuda.so.1 (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libcuda.so.1".
pub fn parse_ldconfig(text: &str) -> Vec<(String, PathBuf)> {
    text.lines()
        .filter_map(|line| {
            let (left, path) = line.trim().split_once(" => ")?;
            let (name, flags) = left.split_once(' ')?;
            // Only libraries this process could load (a 64-bit x86 loader skips 32-bit entries).
            let host = if cfg!(target_arch = "x86_64") {
                "x86-64"
            } else if cfg!(target_arch = "aarch64") {
                "AArch64"
            } else {
                ""
            };
            if !flags.contains(host) {
                return None;
            }
            Some((name.to_string(), PathBuf::from(path.trim())))
        })
        .collect()
}

fn ldconfig_cache(env: &Env) -> Vec<(String, PathBuf)> {
    let candidates = [
        env.which("ldconfig"),
        Some("/sbin/ldconfig".into()),
        Some("/usr/sbin/ldconfig".into()),
    ];
    for prog in candidates.into_iter().flatten() {
        if let Ok(out) = env.command(&prog).arg("-p").output() {
            if out.status.success() {
                return parse_ldconfig(&String::from_utf8_lossy(&out.stdout));
            }
        }
    }
    Vec::new()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_ldconfig_output() {
        let text = "3 libs found in cache `/etc/ld.so.cache'\n\
            \tlibcuda.so.1 (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libcuda.so.1\n\
            \tlibcuda.so.1 (libc6) => /usr/lib/i386-linux-gnu/libcuda.so.1\n\
            \tlibz.so.1 (libc6,x86-64) => /lib/x86_64-linux-gnu/libz.so.1\n";
        let got = parse_ldconfig(text);
        if cfg!(target_arch = "x86_64") {
            assert_eq!(got.len(), 2);
            assert_eq!(
                got[0],
                (
                    "libcuda.so.1".into(),
                    PathBuf::from("/usr/lib/x86_64-linux-gnu/libcuda.so.1")
                )
            );
        }
    }

    #[test]
    fn loader_order_is_ld_library_path_first() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("libkilnx.so.1"), b"x").unwrap();
        let lp = LoaderPath {
            ld_library_path: vec![dir.path().to_path_buf()],
            cache: vec![("libkilnx.so.1".into(), dir.path().join("libkilnx.so.1"))],
            defaults: vec![],
        };
        let found = lp.find("libkilnx.so.1");
        assert_eq!(found.len(), 1, "the same file is listed once");
        assert_eq!(found[0].via, Via::LdLibraryPath);
        assert!(lp.find("libnothere.so").is_empty());
    }
}
