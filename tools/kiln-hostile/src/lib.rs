//! Hostile inputs for `kiln audit`, generated in code (nothing binary is committed): crafted
//! wheels, ELFs and fatbins, each with the verdict the audit must give. `tests/hostile.rs` runs
//! every case through the real binary under per-case limits (time, peak RSS, output size);
//! `tests/differential.rs` compares the audit's view with what Python's `zipfile`, `pip install
//! --no-deps --target` and the dynamic loader (ctypes) do with the same bytes.
//!
//! - [`zipw`]: a zip writer that can lie (names, modes, sizes, directories, streams)
//! - [`elfs`]: real libraries from the host's gcc, and the patches that make them hostile
//! - [`cases`]: the cases and their expected verdicts
//! - [`run`]: the child process runner and its measurements

pub mod cases;
pub mod elfs;
pub mod run;
pub mod zipw;

use std::path::{Path, PathBuf};

/// Writes a case's input under `dir`; returns the path to audit.
pub fn materialize(input: &cases::Input, dir: &Path) -> std::io::Result<PathBuf> {
    use cases::Input;
    std::fs::create_dir_all(dir)?;
    match input {
        Input::File { name, bytes } => {
            let p = dir.join(name);
            std::fs::write(&p, bytes)?;
            Ok(p)
        }
        Input::Dir(files) => {
            let root = dir.join("tree");
            for (rel, bytes) in files {
                let p = root.join(rel);
                std::fs::create_dir_all(p.parent().unwrap_or(&root))?;
                std::fs::write(&p, bytes)?;
            }
            Ok(root)
        }
        Input::DirWithLinks(files, links) => {
            let root = dir.join("tree");
            for (rel, bytes) in files {
                let p = root.join(rel);
                std::fs::create_dir_all(p.parent().unwrap_or(&root))?;
                std::fs::write(&p, bytes)?;
            }
            for (rel, target) in links {
                let p = root.join(rel);
                std::fs::create_dir_all(p.parent().unwrap_or(&root))?;
                std::os::unix::fs::symlink(target, &p)?;
            }
            Ok(root)
        }
        Input::Fifo => {
            let p = dir.join("input.whl");
            mkfifo(&p)?;
            Ok(p)
        }
        Input::UnreadableFile => {
            let p = dir.join(cases::WHEEL_NAME);
            std::fs::write(&p, b"PK\x05\x06")?;
            set_mode(&p, 0o000)?;
            Ok(p)
        }
        Input::DirWithUnreadable => {
            let root = dir.join("tree");
            std::fs::create_dir_all(root.join("demo"))?;
            std::fs::write(root.join("demo/__init__.py"), b"")?;
            let lib = root.join("demo/_native.so");
            std::fs::write(&lib, b"\x7fELF\x02\x01\x01")?;
            set_mode(&lib, 0o000)?;
            Ok(root)
        }
        Input::DirWithFifo => {
            let root = dir.join("tree");
            std::fs::create_dir_all(root.join("demo"))?;
            std::fs::write(root.join("demo/__init__.py"), b"")?;
            mkfifo(&root.join("demo/pipe"))?;
            Ok(root)
        }
    }
}

fn set_mode(p: &Path, mode: u32) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode))
}

/// Makes `dir` and its ancestors up to `root` traversable by other users (an unprivileged
/// reader runs as `nobody`); tempdirs are created 0700.
pub fn open_to_others(root: &Path, dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    for d in dir.ancestors() {
        let mode = std::fs::metadata(d)?.permissions().mode();
        set_mode(d, mode | 0o755)?;
        if d == root {
            break;
        }
    }
    // Everything below, too (the tree the case wrote), but not the files left at mode 000.
    for p in listing(dir) {
        let m = std::fs::symlink_metadata(&p)?;
        if m.is_dir() {
            set_mode(&p, m.permissions().mode() | 0o755)?;
        }
    }
    Ok(())
}

fn mkfifo(p: &Path) -> std::io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(p.as_os_str().as_bytes()).map_err(std::io::Error::other)?;
    // SAFETY: a valid NUL-terminated path.
    if unsafe { libc::mkfifo(c.as_ptr(), 0o600) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Every path under `dir` (sorted), to prove a run wrote nothing.
pub fn listing(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        if let Ok(rd) = std::fs::read_dir(&d) {
            for e in rd.flatten() {
                let p = e.path();
                if e.file_type().is_ok_and(|t| t.is_dir()) {
                    stack.push(p.clone());
                }
                out.push(p);
            }
        }
    }
    out.sort();
    out
}
