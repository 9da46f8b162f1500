//! Which project headers a source includes, as nvcc's own preprocessor sees them (`-MM`).

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::error::BuildError;

/// Headers under `project_dir` that `source` includes (directly or not), sorted.
pub fn project_headers(
    nvcc: &Path,
    source: &Path,
    flags: &[String],
    project_dir: &Path,
) -> Result<Vec<PathBuf>, BuildError> {
    let out = Command::new(nvcc)
        .args(flags)
        .arg("-MM")
        .arg(source)
        .output()
        .map_err(|e| BuildError::Tool {
            tool: "nvcc -MM".into(),
            message: e.to_string(),
        })?;
    if !out.status.success() {
        return Err(BuildError::Compile {
            source_file: source.to_path_buf(),
            target: "dependency scan (nvcc -MM)".into(),
            diagnostics: String::from_utf8_lossy(&out.stderr).trim_end().to_string(),
            command: format!(
                "{} {} -MM {}",
                nvcc.display(),
                flags.join(" "),
                source.display()
            ),
        });
    }
    let project = project_dir
        .canonicalize()
        .unwrap_or_else(|_| project_dir.to_path_buf());
    let source_canon = source
        .canonicalize()
        .unwrap_or_else(|_| source.to_path_buf());
    let text = String::from_utf8_lossy(&out.stdout).replace("\\\n", " ");
    let mut headers: Vec<PathBuf> = text
        .split_once(':')
        .map(|(_, deps)| deps)
        .unwrap_or("")
        .split_whitespace()
        .filter_map(|d| Path::new(d).canonicalize().ok())
        .filter(|p| p.starts_with(&project) && *p != source_canon)
        .collect();
    headers.sort();
    headers.dedup();
    Ok(headers)
}
