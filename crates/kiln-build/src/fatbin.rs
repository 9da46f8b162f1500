//! Combines the linked per-target outputs into one fatbin with `fatbinary --image3`
//! (the one route that keeps every image, PTX included; see shared/FACTS.md).

use std::path::{Path, PathBuf};
use std::process::Command;

use kiln_pins::TargetKind;

use crate::error::BuildError;
use crate::jobs::LinkJob;
use crate::toolkit::Toolkit;

pub fn combine(
    toolkit: &Toolkit,
    linked: &[(LinkJob, PathBuf)],
    out: &Path,
) -> Result<(), BuildError> {
    let mut cmd = Command::new(&toolkit.fatbinary);
    cmd.arg(format!("--create={}", out.display())).arg("-64");
    for (job, file) in linked {
        let kind = match job.target.kind {
            TargetKind::Sass => "elf",
            TargetKind::Ptx => "ptx",
        };
        cmd.arg(format!(
            "--image3=kind={kind},sm={},file={}",
            job.target.arch.short(),
            file.display()
        ));
    }
    let output = cmd.output().map_err(|e| BuildError::Tool {
        tool: toolkit.fatbinary.display().to_string(),
        message: e.to_string(),
    })?;
    if !output.status.success() {
        return Err(BuildError::Tool {
            tool: "fatbinary".into(),
            message: format!(
                "{}\n  command: {cmd:?}",
                String::from_utf8_lossy(&output.stderr).trim_end()
            ),
        });
    }
    Ok(())
}
