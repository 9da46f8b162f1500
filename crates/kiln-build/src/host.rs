//! Host-launched kernels: sources whose host code launches their kernels (`kernel<<<…>>>` behind
//! an `extern "C"` function, as flash-attention style libraries ship them) are compiled with
//! their host code (`nvcc -c`, every target in one object) into a static library the crate
//! links, instead of into a module loaded at run time. `host-sources` in the kernels table
//! names them.
//!
//! The object's device code is read back from its `.nv_fatbin` section for the manifest, like
//! every other output. nvcc names the object's `STT_FILE` symbol after its temporary file
//! (`tmpxft_<pid>_…`), which would make every build's bytes differ; that one local symbol is
//! stripped.

use std::path::{Path, PathBuf};
use std::process::Command;

use kiln_pins::{Target, TargetKind};
use object::{Object, ObjectSection, ObjectSymbol};

use crate::cache::{Cache, KeyBuilder};
use crate::error::{io, BuildError};
use crate::jobs::CompileSettings;
use crate::toolkit::Toolkit;

/// One host+device compile of a source for every target.
#[derive(Debug, Clone)]
pub struct HostJob {
    /// The `.cu` file.
    pub source: PathBuf,
    /// File name relative to the kernels directory.
    pub name: String,
    /// Every header it reads (part of the key).
    pub headers: Vec<PathBuf>,
    /// nvcc's own environment variables as the job runs with them.
    pub env: Vec<(String, Option<String>)>,
    /// The `-gencode` arguments, one per target.
    pub gencode: Vec<String>,
    /// Its cache key: nvcc version, targets, flags, environment, name, source and headers.
    pub key: String,
}

impl HostJob {
    /// Keys the host compile of `source` for `targets`.
    pub fn new(
        source: &Path,
        name: &str,
        headers: Vec<PathBuf>,
        targets: &[Target],
        settings: &CompileSettings<'_>,
        toolkit: &Toolkit,
    ) -> Result<HostJob, BuildError> {
        let gencode: Vec<String> = (targets.iter())
            .map(|t| {
                let a = t.arch;
                let code = match t.kind {
                    TargetKind::Sass => a.sm(),
                    TargetKind::Ptx => a.compute(),
                };
                format!("arch={},code={code}", a.compute())
            })
            .collect();
        // The same fields a device compile is keyed by, with the whole gencode list as target.
        let probe = crate::jobs::CompileJob::new(
            source,
            name,
            headers.clone(),
            targets[0],
            settings,
            toolkit,
        )?;
        let key = KeyBuilder::new("host")
            .field("device-key", &probe.key)
            .field("gencode", &gencode.join(" "))
            .finish();
        Ok(HostJob {
            source: source.to_path_buf(),
            name: name.to_string(),
            headers,
            env: settings.env.to_vec(),
            gencode,
            key,
        })
    }

    /// `nvcc -c -Xcompiler -fPIC FLAGS -gencode … -o OUTPUT SOURCE`.
    pub fn command(&self, toolkit: &Toolkit, flags: &[String], output: &Path) -> Command {
        let mut cmd = Command::new(&toolkit.nvcc);
        cmd.args(flags).args(["-c", "-Xcompiler", "-fPIC"]);
        for g in &self.gencode {
            cmd.arg("-gencode").arg(g);
        }
        cmd.arg("-o").arg(output).arg(&self.source);
        crate::jobs::set_nvcc_env(&mut cmd, &self.env);
        cmd
    }

    /// Where nvcc's warnings for this job's cache entry are kept.
    pub fn warnings_path(&self, cache: &Cache) -> PathBuf {
        cache.path(&self.key, "warnings")
    }

    /// Compiles, keeps nvcc's warnings beside the entry, and strips the temporary-file symbol.
    pub fn produce(
        &self,
        toolkit: &Toolkit,
        flags: &[String],
        cache: &Cache,
        staging: &Path,
    ) -> Result<(), BuildError> {
        let mut cmd = self.command(toolkit, flags, staging);
        let out = cmd.output().map_err(|e| BuildError::Tool {
            tool: toolkit.nvcc.display().to_string(),
            message: e.to_string(),
        })?;
        if !out.status.success() {
            return Err(BuildError::Compile {
                source_file: self.source.clone(),
                target: "host code (every target)".into(),
                diagnostics: String::from_utf8_lossy(&out.stderr).trim_end().to_string(),
                command: format!("{cmd:?}"),
            });
        }
        crate::jobs::keep_warnings(&self.warnings_path(cache), &out.stderr)?;
        strip_temp_file_symbols(staging)
    }
}

/// Removes the `STT_FILE` symbols nvcc names after its temporary files (`tmpxft_…`).
fn strip_temp_file_symbols(object_path: &Path) -> Result<(), BuildError> {
    let bytes =
        std::fs::read(object_path).map_err(io(format!("reading {}", object_path.display())))?;
    let file = object::File::parse(&*bytes).map_err(|e| bad(object_path, e.to_string()))?;
    let names: Vec<String> = (file.symbols())
        .filter(|s| s.kind() == object::SymbolKind::File)
        .filter_map(|s| s.name().ok().map(str::to_string))
        .filter(|n| n.starts_with("tmpxft_"))
        .collect();
    if names.is_empty() {
        return Ok(());
    }
    let mut cmd = Command::new("objcopy");
    for n in &names {
        cmd.arg(format!("--strip-symbol={n}"));
    }
    cmd.arg(object_path);
    crate::tool::run_tool(&mut cmd, "objcopy (host object)")
}

fn bad(path: &Path, message: String) -> BuildError {
    BuildError::BadOutput {
        source_file: path.to_path_buf(),
        output: "host object".into(),
        message,
    }
}

/// What a host object's `.nv_fatbin` holds: each target's kernels (and the PTX ISA of PTX).
pub fn device_code(object_path: &Path) -> Result<Vec<kiln_manifest::TargetKernels>, BuildError> {
    let bytes =
        std::fs::read(object_path).map_err(io(format!("reading {}", object_path.display())))?;
    let file = object::File::parse(&*bytes).map_err(|e| bad(object_path, e.to_string()))?;
    let Some(section) = file.section_by_name(".nv_fatbin") else {
        return Ok(Vec::new());
    };
    let data = section
        .data()
        .map_err(|e| bad(object_path, e.to_string()))?;
    let containers =
        kiln_fatbin::container::parse(data).map_err(|e| bad(object_path, e.to_string()))?;
    let mut out: Vec<kiln_manifest::TargetKernels> = Vec::new();
    for entry in containers.iter().flat_map(|c| &c.entries) {
        let Some(target) = entry.target() else {
            continue;
        };
        let payload = entry
            .decompress()
            .map_err(|e| bad(object_path, e.to_string()))?;
        let (kernels, ptx_isa) = match target.kind {
            TargetKind::Sass => (
                kiln_fatbin::cubin::kernels(&*payload)
                    .map_err(|e| bad(object_path, e.to_string()))?,
                None,
            ),
            TargetKind::Ptx => {
                let info = kiln_fatbin::ptx::parse_bytes(&payload)
                    .map_err(|e| bad(object_path, e.to_string()))?;
                (info.kernels, Some(format!("{}.{}", info.isa.0, info.isa.1)))
            }
        };
        out.push(kiln_manifest::TargetKernels {
            target,
            kind: target.kind,
            ptx_isa,
            kernels,
        });
    }
    Ok(out)
}

/// `ar crsD OUT OBJECTS…`: a static library, deterministic (no time stamps, uids or modes).
pub fn archive(objects: &[PathBuf], out: &Path) -> Result<(), BuildError> {
    let _ = std::fs::remove_file(out);
    let mut cmd = Command::new("ar");
    cmd.arg("crsD").arg(out).args(objects);
    crate::tool::run_tool(&mut cmd, "ar (static library of host-launched kernels)")
}
