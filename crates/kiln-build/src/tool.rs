//! Running an external tool (nvcc's companions, ar, objcopy, cargo) to completion, its failure
//! carrying its stderr and the command.

use std::process::Command;

use crate::error::BuildError;

/// Runs a tool to completion; a failure carries its stderr and the command.
pub(crate) fn run_tool(cmd: &mut Command, what: &str) -> Result<(), BuildError> {
    let out = cmd.output().map_err(|e| BuildError::Tool {
        tool: what.to_string(),
        message: e.to_string(),
    })?;
    if !out.status.success() {
        return Err(BuildError::Tool {
            tool: what.to_string(),
            message: format!(
                "{}\n  command: {cmd:?}",
                String::from_utf8_lossy(&out.stderr).trim_end()
            ),
        });
    }
    Ok(())
}
