//! The unit of work: compile one source for one target, or link one target's objects.
//!
//! SASS: each source becomes a relocatable cubin (`-cubin -rdc=true`) and `nvlink` joins a
//! target's cubins into one, so the fatbin carries one module per arch holding every kernel.
//! PTX: each source becomes LTO IR (`-dc code=lto_N`) and `nvlink -lto --emit-ptx` produces one
//! PTX module — the only route that keeps per-file caching for PTX too.

use std::path::{Path, PathBuf};
use std::process::Command;

use kiln_pins::{Target, TargetKind};

pub use crate::cache::Outcome;
use crate::cache::{Cache, KeyBuilder};
use crate::error::{io, BuildError};
use crate::toolkit::Toolkit;

/// One nvcc run: one `.cu` source compiled for one target (a relocatable cubin, or LTO IR for PTX).
#[derive(Debug, Clone)]
pub struct CompileJob {
    /// The `.cu` file.
    pub source: PathBuf,
    /// File name relative to kernels/, for messages and the manifest.
    pub name: String,
    /// The project headers it includes (from the dependency scan), each part of the key.
    pub headers: Vec<PathBuf>,
    /// The target it is compiled for.
    pub target: Target,
    /// Its cache key: nvcc version, target, flags, name, source and header contents.
    pub key: String,
}

/// One nvlink run: every compile output of one target linked into that target's module.
#[derive(Debug, Clone)]
pub struct LinkJob {
    /// The target whose module this links.
    pub target: Target,
    /// The objects to link: the target's compile outputs (and Rust kernel objects, if any).
    pub inputs: Vec<PathBuf>,
    /// Its cache key: nvcc version, target and the inputs' keys.
    pub key: String,
}

/// The flags as the cache key sees them: an include directory inside the kernels directory is
/// named relatively (its headers are keyed by content and relative name), so the same sources in
/// another checkout or copy (CI's sandbox, a second worktree) hit the same entries; nvcc's output
/// does not depend on where the sources lie (no `-lineinfo`/`-G`).
fn key_flags(flags: &[String], kernels_dir: &Path) -> Vec<String> {
    flags
        .iter()
        .map(|f| match f.strip_prefix("-I").map(Path::new) {
            Some(dir) => match dir.strip_prefix(kernels_dir) {
                Ok(rel) => format!("-I<kernels>/{}", rel.display()),
                Err(_) => f.clone(),
            },
            None => f.clone(),
        })
        .collect()
}

impl CompileJob {
    /// Keys a compile of `source` (file name `name`) for `target`, reading the source and headers.
    pub fn new(
        source: &Path,
        name: &str,
        headers: Vec<PathBuf>,
        target: Target,
        flags: &[String],
        toolkit: &Toolkit,
        kernels_dir: &Path,
    ) -> Result<CompileJob, BuildError> {
        let mut key = KeyBuilder::new("compile")
            .field("nvcc", toolkit.version.as_bytes())
            .field("target", target.name().as_bytes())
            .field("flags", key_flags(flags, kernels_dir).join("\0").as_bytes())
            .field("name", name.as_bytes())
            .file("source", source)?;
        for h in &headers {
            let rel = h.strip_prefix(kernels_dir).unwrap_or(h);
            key = key.file(&format!("header:{}", rel.display()), h)?;
        }
        Ok(CompileJob {
            source: source.to_path_buf(),
            name: name.to_string(),
            headers,
            target,
            key: key.finish(),
        })
    }

    /// The cache extension of its output: `cubin` for SASS, `lto.o` (LTO IR) for PTX.
    pub fn ext(&self) -> &'static str {
        match self.target.kind {
            TargetKind::Sass => "cubin",
            TargetKind::Ptx => "lto.o",
        }
    }

    /// nvcc's arguments: the common `flags`, the target's `-gencode`, `-o output`, the source.
    pub fn args(&self, flags: &[String], output: &Path) -> Vec<String> {
        let a = self.target.arch;
        let mut args: Vec<String> = flags.to_vec();
        match self.target.kind {
            TargetKind::Sass => {
                args.extend(["-cubin".into(), "-rdc=true".into(), "-gencode".into()]);
                args.push(format!("arch={},code={}", a.compute(), a.sm()));
            }
            TargetKind::Ptx => {
                args.extend(["-dc".into(), "-gencode".into()]);
                args.push(format!("arch={},code=lto_{}", a.compute(), a.short()));
            }
        }
        args.push("-o".into());
        args.push(output.display().to_string());
        args.push(self.source.display().to_string());
        args
    }

    /// The nvcc command writing this job's output to `output`.
    pub fn command(&self, toolkit: &Toolkit, flags: &[String], output: &Path) -> Command {
        let mut cmd = Command::new(&toolkit.nvcc);
        cmd.args(self.args(flags, output));
        cmd
    }

    /// Runs nvcc, writing `staging`; a failure carries nvcc's diagnostics and the command.
    pub fn produce(
        &self,
        toolkit: &Toolkit,
        flags: &[String],
        staging: &Path,
    ) -> Result<(), BuildError> {
        let args = self.args(flags, staging);
        let out = self
            .command(toolkit, flags, staging)
            .output()
            .map_err(|e| BuildError::Tool {
                tool: toolkit.nvcc.display().to_string(),
                message: e.to_string(),
            })?;
        if out.status.success() {
            return Ok(());
        }
        let mut diagnostics = String::from_utf8_lossy(&out.stderr).trim_end().to_string();
        let stdout = String::from_utf8_lossy(&out.stdout);
        if !stdout.trim().is_empty() {
            diagnostics = format!("{}\n{diagnostics}", stdout.trim_end());
        }
        Err(BuildError::Compile {
            source_file: self.source.clone(),
            target: self.target.name(),
            diagnostics,
            command: format!("{} {}", toolkit.nvcc.display(), args.join(" ")),
        })
    }
}

impl LinkJob {
    /// Keys the link of `target` over `inputs`, given as (cache key, path) pairs.
    pub fn new(target: Target, inputs: Vec<(String, PathBuf)>, toolkit: &Toolkit) -> LinkJob {
        let mut key = KeyBuilder::new("link")
            .field("nvcc", toolkit.version.as_bytes())
            .field("target", target.name().as_bytes());
        for (input_key, _) in &inputs {
            key = key.field("input", input_key.as_bytes());
        }
        LinkJob {
            target,
            inputs: inputs.into_iter().map(|(_, p)| p).collect(),
            key: key.finish(),
        }
    }

    /// The cache extension of the module: `cubin` for SASS, `ptx` for a `+PTX` target.
    pub fn ext(&self) -> &'static str {
        match self.target.kind {
            TargetKind::Sass => "cubin",
            TargetKind::Ptx => "ptx",
        }
    }

    /// The nvlink command writing this target's module to `output`.
    pub fn command(
        &self,
        toolkit: &Toolkit,
        cache: &Cache,
        output: &Path,
    ) -> Result<Command, BuildError> {
        let a = self.target.arch;
        let mut cmd = Command::new(&toolkit.nvlink);
        match self.target.kind {
            TargetKind::Sass => {
                cmd.arg(format!("--arch={}", a.sm()));
            }
            TargetKind::Ptx => {
                let nvvm = nvvm_dir(toolkit, cache)?;
                cmd.arg("-lto").arg(format!("-nvvmpath={}", nvvm.display()));
                cmd.arg(format!("-arch={}", a.sm())).arg("--emit-ptx");
            }
        }
        cmd.arg("-o").arg(output).args(&self.inputs);
        Ok(cmd)
    }

    /// Runs nvlink, writing `staging`.
    pub fn produce(
        &self,
        toolkit: &Toolkit,
        cache: &Cache,
        staging: &Path,
    ) -> Result<(), BuildError> {
        let mut cmd = self.command(toolkit, cache, staging)?;
        crate::plan::run_tool(&mut cmd, &format!("nvlink for {}", self.target))
    }
}

/// The `-nvvmpath` nvlink's LTO needs: a directory with `lib64/libnvvm.so` and `libdevice/`.
/// A full toolkit (Nix, runfile) has `$CUDA_HOME/nvvm` laid out so; the PyPI wheels put libnvvm
/// in `lib/`, so a small directory of links in the cache stands in.
fn nvvm_dir(toolkit: &Toolkit, cache: &Cache) -> Result<PathBuf, BuildError> {
    let home = toolkit.cuda_home();
    let standard = home.join("nvvm");
    if standard.join("lib64/libnvvm.so").exists() {
        return Ok(standard);
    }
    let lib = ["lib/libnvvm.so", "lib/libnvvm.so.4", "lib64/libnvvm.so"]
        .iter()
        .map(|p| home.join(p))
        .find(|p| p.exists())
        .ok_or_else(|| BuildError::Tool {
            tool: "nvlink -lto".into(),
            message: format!(
                "libnvvm not found under {} (needed to emit linked PTX)",
                home.display()
            ),
        })?;
    let shim = cache.dir.join("nvvm");
    std::fs::create_dir_all(shim.join("lib64")).map_err(io("creating the nvvm link directory"))?;
    let link = |target: &Path, at: &Path| -> Result<(), BuildError> {
        if std::fs::read_link(at).ok().as_deref() != Some(target) {
            let _ = std::fs::remove_file(at);
            if let Err(e) = std::os::unix::fs::symlink(target, at) {
                // Another build racing us may have made the same link.
                if std::fs::read_link(at).ok().as_deref() != Some(target) {
                    return Err(io(format!("linking {}", at.display()))(e));
                }
            }
        }
        Ok(())
    };
    link(&lib, &shim.join("lib64/libnvvm.so"))?;
    link(&standard.join("libdevice"), &shim.join("libdevice"))?;
    Ok(shim)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_key_names_an_include_dir_inside_the_kernels_relatively_and_others_as_given() {
        let flags = |k: &str| {
            vec![
                "-O3".to_string(),
                format!("-I{k}/include"),
                "-I/opt/cuda/include".to_string(),
            ]
        };
        let a = key_flags(
            &flags("/home/a/kiln/kernels"),
            Path::new("/home/a/kiln/kernels"),
        );
        let b = key_flags(
            &flags("/tmp/sandbox/src/kernels"),
            Path::new("/tmp/sandbox/src/kernels"),
        );
        assert_eq!(a, b);
        assert_eq!(a[1], "-I<kernels>/include");
        assert_eq!(a[2], "-I/opt/cuda/include");
    }
}
