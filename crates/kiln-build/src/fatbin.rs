//! Combines the linked per-target outputs into one fatbin with `fatbinary --image3`
//! (the one route that keeps every image, PTX included; see shared/FACTS.md).

use std::path::{Path, PathBuf};
use std::process::Command;

use kiln_pins::{Target, TargetKind};

use crate::error::BuildError;
use crate::toolkit::Toolkit;

/// The `fatbinary` command combining each target's module into `out`.
pub fn command(toolkit: &Toolkit, modules: &[(Target, PathBuf)], out: &Path) -> Command {
    let mut cmd = Command::new(&toolkit.fatbinary);
    cmd.arg(format!("--create={}", out.display())).arg("-64");
    for (target, file) in modules {
        let kind = match target.kind {
            TargetKind::Sass => "elf",
            TargetKind::Ptx => "ptx",
        };
        cmd.arg(format!(
            "--image3=kind={kind},sm={},file={}",
            target.arch.short(),
            file.display()
        ));
    }
    cmd
}

/// Runs `fatbinary`, combining each target's module into the fatbin at `out`.
pub fn combine(
    toolkit: &Toolkit,
    modules: &[(Target, PathBuf)],
    out: &Path,
) -> Result<(), BuildError> {
    crate::tool::run_tool(&mut command(toolkit, modules, out), "fatbinary")
}
