//! The unit of work: compile one source for one target, or link one target's objects.
//!
//! Every compile is device-only (`-cubin`, `-ptx` or `-fatbin`): no host pass, so
//! `__CUDA_ARCH__` guards mean what they mean in a device compile. How the per-source outputs
//! become modules is the [`CompileMode`]: linkable whole-program code joined per target by
//! `nvlink` (the default: one module per target), relocatable code for libraries that call
//! device functions across files, or whole-program modules loaded per source (no link at all).

use std::path::{Path, PathBuf};
use std::process::Command;

use kiln_pins::{Target, TargetKind};

pub use crate::cache::Outcome;
use crate::cache::{Cache, KeyBuilder};
use crate::error::{io, BuildError};
use crate::toolkit::Toolkit;

/// Environment variables that change what an nvcc run writes, so each job runs with exactly the
/// values its key holds: nvcc's own three, and `NIX_CUDA_DONT_COMPRESS_FATBINS`, which nixpkgs'
/// nvcc wrapper (pkgs/development/cuda-modules/packages/cuda_nvcc/nvcc-wrapper.sh) reads to
/// decide whether to prepend `-Xfatbin=-compress-all`. The wrapper's other inputs are left out:
/// `NIX_LDFLAGS_AFTER*` reach only a host link (every kiln-build compile is device-only), the
/// role markers select among those, and it unsets `INCLUDES`/`LIBRARIES` itself.
pub const NVCC_ENV: &[&str] = &[
    "NVCC_PREPEND_FLAGS",
    "NVCC_APPEND_FLAGS",
    "NVCC_CCBIN",
    "NIX_CUDA_DONT_COMPRESS_FATBINS",
];

/// How a source's device code is compiled, and so how it becomes a module.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompileMode {
    /// `-ewp`: whole-program code per file (file-local helpers stay file-local) that nvlink can
    /// still join into one module per target. PTX targets: LTO IR, `nvlink -lto`.
    Linkable,
    /// `-rdc=true`: device functions called across files, resolved by the device link.
    Relocatable,
    /// Whole program, each output loadable as it is: one module per source, no device link.
    Whole,
}

impl CompileMode {
    /// The mode as the cache key and the plan spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            CompileMode::Linkable => "ewp",
            CompileMode::Relocatable => "rdc",
            CompileMode::Whole => "whole",
        }
    }
}

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
    /// How it is compiled (and so what its output is).
    pub mode: CompileMode,
    /// [`NVCC_ENV`] as the job runs with them (None: unset).
    pub env: Vec<(String, Option<String>)>,
    /// Its cache key: nvcc version, target, mode, flags, nvcc's environment, name, source and
    /// every header's contents.
    pub key: String,
}

/// Sets [`NVCC_ENV`] on `cmd` to exactly `env` (None: removed).
pub(crate) fn set_nvcc_env(cmd: &mut Command, env: &[(String, Option<String>)]) {
    for (var, value) in env {
        match value {
            Some(v) => cmd.env(var, v),
            None => cmd.env_remove(var),
        };
    }
}

/// Keeps a successful nvcc run's stderr (its warnings) at `path`, or removes an old one.
pub(crate) fn keep_warnings(path: &Path, stderr: &[u8]) -> Result<(), BuildError> {
    let warnings = String::from_utf8_lossy(stderr);
    if warnings.trim().is_empty() {
        let _ = std::fs::remove_file(path);
        return Ok(());
    }
    std::fs::write(path, warnings.trim_end()).map_err(io(format!("writing {}", path.display())))
}

/// What every compile job of a build shares.
#[derive(Debug, Clone)]
pub struct CompileSettings<'a> {
    /// nvcc flags (base, -I, -D, the project's own).
    pub flags: &'a [String],
    /// [`NVCC_ENV`] values.
    pub env: &'a [(String, Option<String>)],
    /// The compile mode.
    pub mode: CompileMode,
    /// The kernels directory (headers inside are keyed by relative name).
    pub kernels_dir: &'a Path,
    /// The project root (include directories inside are keyed relatively).
    pub root: &'a Path,
}

/// A `+PTX` entry's SASS in a whole-program build: its own PTX compile assembled by `ptxas`, as
/// nvcc does it inside one call (one front-end run for both; the cubin is byte-identical to
/// `nvcc -cubin` for that arch).
#[derive(Debug, Clone)]
pub struct AssembleJob {
    /// The `.cu` file the PTX came from.
    pub source: PathBuf,
    /// File name relative to kernels/.
    pub name: String,
    /// The SASS target.
    pub target: Target,
    /// The PTX compile's output in the cache.
    pub ptx: PathBuf,
    /// Its cache key: nvcc version, target and the PTX compile's key.
    pub key: String,
}

impl AssembleJob {
    /// Keys the assembly of `ptx_job`'s output for `target`.
    pub fn new(
        target: Target,
        ptx_job: &CompileJob,
        cache: &Cache,
        toolkit: &Toolkit,
    ) -> AssembleJob {
        let key = KeyBuilder::new("assemble")
            .field("nvcc", &toolkit.version)
            .field("target", &target.name())
            .field("ptx", &ptx_job.key)
            .finish();
        AssembleJob {
            source: ptx_job.source.clone(),
            name: ptx_job.name.clone(),
            target,
            ptx: cache.path(&ptx_job.key, ptx_job.ext()),
            key,
        }
    }

    /// `ptxas -arch=sm_XX -m64 PTX -o output`: the flags nvcc passes it.
    pub fn command(&self, toolkit: &Toolkit, output: &Path) -> Command {
        let mut cmd = Command::new(crate::rust::ptxas(toolkit));
        cmd.arg(format!("-arch={}", self.target.arch.sm()))
            .arg("-m64")
            .arg(&self.ptx)
            .arg("-o")
            .arg(output);
        cmd
    }

    /// Runs ptxas, writing `staging`.
    pub fn produce(&self, toolkit: &Toolkit, staging: &Path) -> Result<(), BuildError> {
        crate::tool::run_tool(
            &mut self.command(toolkit, staging),
            &format!("ptxas ({}) for {}", self.name, self.target),
        )
    }
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

/// The flags as the cache key sees them: an include directory inside the kernels directory or
/// the project is named relatively (its headers are keyed by content and relative name), so the
/// same sources in another checkout or copy (CI's sandbox, a second worktree) hit the same
/// entries; nvcc's output does not depend on where the sources lie (no `-lineinfo`/`-G`).
fn key_flags(flags: &[String], kernels_dir: &Path, root: &Path) -> Vec<String> {
    flags
        .iter()
        .map(|f| match f.strip_prefix("-I").map(Path::new) {
            Some(dir) => match (dir.strip_prefix(kernels_dir), dir.strip_prefix(root)) {
                (Ok(rel), _) => format!("-I<kernels>/{}", rel.display()),
                (_, Ok(rel)) => format!("-I<root>/{}", rel.display()),
                _ => f.clone(),
            },
            None => f.clone(),
        })
        .collect()
}

/// A header's name in the key: relative to the kernels directory or the project root when
/// inside them, else its full path (a header from elsewhere is keyed where it lies).
fn header_label(h: &Path, kernels_dir: &Path, root: &Path) -> String {
    match (h.strip_prefix(kernels_dir), h.strip_prefix(root)) {
        (Ok(rel), _) => rel.display().to_string(),
        (_, Ok(rel)) => format!("<root>/{}", rel.display()),
        _ => h.display().to_string(),
    }
}

impl CompileJob {
    /// Keys a compile of `source` (file name `name`) for `target`, reading the source and headers.
    pub fn new(
        source: &Path,
        name: &str,
        headers: Vec<PathBuf>,
        target: Target,
        settings: &CompileSettings<'_>,
        toolkit: &Toolkit,
    ) -> Result<CompileJob, BuildError> {
        let (kernels_dir, root) = (settings.kernels_dir, settings.root);
        let flags = key_flags(settings.flags, kernels_dir, root);
        let mut key = KeyBuilder::new("compile")
            .field("nvcc", &toolkit.version)
            .field("target", &target.name())
            .field("mode", settings.mode.as_str())
            .field(
                "flags",
                &serde_json::to_string(&flags).expect("strings serialize"),
            );
        // A variable set (even to "") is a field; an unset one is none.
        for (var, value) in settings.env {
            if let Some(v) = value {
                key = key.field(&format!("env:{var}"), v);
            }
        }
        key = key.field("name", name).file("source", source)?;
        for h in &headers {
            let label = header_label(h, kernels_dir, root);
            key = key.file(&format!("header:{label}"), h)?;
        }
        Ok(CompileJob {
            source: source.to_path_buf(),
            name: name.to_string(),
            headers,
            target,
            mode: settings.mode,
            env: settings.env.to_vec(),
            key: key.finish(),
        })
    }

    /// The cache extension of its output: `cubin` for SASS; for PTX `ptx` (whole program) or
    /// `lto.fatbin` (LTO IR for the device link).
    pub fn ext(&self) -> &'static str {
        match (self.target.kind, self.mode) {
            (TargetKind::Sass, _) => "cubin",
            (TargetKind::Ptx, CompileMode::Whole) => "ptx",
            (TargetKind::Ptx, _) => "lto.fatbin",
        }
    }

    /// nvcc's arguments: the common `flags`, the device-only output kind and the target's
    /// `-gencode`, `-o output`, the source.
    pub fn args(&self, flags: &[String], output: &Path) -> Vec<String> {
        let a = self.target.arch;
        let mut args: Vec<String> = flags.to_vec();
        let linking = match self.mode {
            CompileMode::Linkable => Some("-ewp"),
            CompileMode::Relocatable => Some("-rdc=true"),
            CompileMode::Whole => None,
        };
        let (kind, code) = match (self.target.kind, linking) {
            (TargetKind::Sass, _) => ("-cubin", a.sm()),
            (TargetKind::Ptx, None) => ("-ptx", a.compute()),
            (TargetKind::Ptx, Some(_)) => ("-fatbin", format!("lto_{}", a.short())),
        };
        args.push(kind.into());
        args.extend(linking.map(String::from));
        args.push("-gencode".into());
        args.push(format!("arch={},code={code}", a.compute()));
        args.push("-o".into());
        args.push(output.display().to_string());
        args.push(self.source.display().to_string());
        args
    }

    /// The nvcc command writing this job's output to `output`, with nvcc's own environment
    /// variables set to exactly what the key holds.
    pub fn command(&self, toolkit: &Toolkit, flags: &[String], output: &Path) -> Command {
        let mut cmd = Command::new(&toolkit.nvcc);
        cmd.args(self.args(flags, output));
        set_nvcc_env(&mut cmd, &self.env);
        cmd
    }

    /// Where nvcc's warnings for this job's cache entry are kept (shown on every build until
    /// the source changes, as cargo replays a crate's warnings).
    pub fn warnings_path(&self, cache: &Cache) -> PathBuf {
        cache.path(&self.key, "warnings")
    }

    /// Runs nvcc, writing `staging`; a failure carries nvcc's diagnostics and the command.
    pub fn produce(
        &self,
        toolkit: &Toolkit,
        flags: &[String],
        cache: &Cache,
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
            return keep_warnings(&self.warnings_path(cache), &out.stderr);
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
            .field("nvcc", &toolkit.version)
            .field("target", &target.name());
        for (input_key, _) in &inputs {
            key = key.field("input", input_key);
        }
        LinkJob {
            target,
            inputs: inputs.into_iter().map(|(_, p)| p).collect(),
            key: key.finish(),
        }
    }

    /// The key the link actually runs under: the inputs' bytes, not their keys, so an edit that
    /// leaves every compiled object the same (a comment) relinks nothing. Known only once the
    /// compiles ran; [`LinkJob::key`] (from the inputs' keys) names the plan's output.
    pub fn bytes_key(&self, toolkit: &Toolkit) -> Result<String, BuildError> {
        let mut key = KeyBuilder::new("link-bytes")
            .field("nvcc", &toolkit.version)
            .field("target", &self.target.name());
        for input in &self.inputs {
            key = key.file("input", input)?;
        }
        Ok(key.finish())
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
        crate::tool::run_tool(&mut cmd, &format!("nvlink for {}", self.target)).map_err(|e| {
            match e {
                BuildError::Tool { tool, message } if message.contains("Undefined reference") => {
                    BuildError::Tool {
                        tool,
                        message: format!(
                            "{message}\n  a kernel calls a device function defined in another source file: \
                             declare `rdc = true` in [package.metadata.kiln.kernels] (relocatable device code)"
                        ),
                    }
                }
                other => other,
            }
        })
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
            Path::new("/home/a/kiln"),
        );
        let b = key_flags(
            &flags("/tmp/sandbox/src/kernels"),
            Path::new("/tmp/sandbox/src/kernels"),
            Path::new("/tmp/sandbox/src"),
        );
        assert_eq!(a, b);
        assert_eq!(a[1], "-I<kernels>/include");
        assert_eq!(a[2], "-I/opt/cuda/include");
        let shared = key_flags(
            &["-I/home/a/lib/common".to_string()],
            Path::new("/home/a/lib/kernels"),
            Path::new("/home/a/lib"),
        );
        assert_eq!(shared, ["-I<root>/common"]);
    }
}
