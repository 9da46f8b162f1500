//! Which project headers a source includes.
//!
//! Read from the `#include` lines themselves, followed recursively through the source's
//! directory and `-I` directories: no process per source (an `nvcc -MM` costs as much as a
//! small compile, 7 of them were a cost `nvcc --threads 0` never pays), and a rule simple
//! enough for Nix to apply at evaluation time without import-from-derivation. Every include
//! inside `#if` blocks counts too: the set can only be larger than the preprocessor's, so a
//! cache key built from it is never stale. A computed include (`#include MACRO`) cannot be
//! followed textually; then nvcc's own preprocessor (`-MM`) answers.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::error::{io, BuildError};

/// Headers under `project_dir` that `source` includes (directly or not), sorted.
pub fn project_headers(
    nvcc: &Path,
    source: &Path,
    flags: &[String],
    project_dir: &Path,
) -> Result<Vec<PathBuf>, BuildError> {
    match scan_includes(source, flags, project_dir)? {
        Some(headers) => Ok(headers),
        None => preprocessor_headers(nvcc, source, flags, project_dir),
    }
}

/// One `#include` directive's operand.
#[derive(Debug, PartialEq)]
enum Include<'a> {
    Quoted(&'a str),
    Angled(&'a str),
    /// `#include MACRO`: only the preprocessor knows the file.
    Computed,
}

fn parse_include(line: &str) -> Option<Include<'_>> {
    let rest = line.trim_start().strip_prefix('#')?.trim_start();
    let rest = rest.strip_prefix("include")?.trim_start();
    if let Some(r) = rest.strip_prefix('"') {
        return r.split_once('"').map(|(n, _)| Include::Quoted(n));
    }
    if let Some(r) = rest.strip_prefix('<') {
        return r.split_once('>').map(|(n, _)| Include::Angled(n));
    }
    Some(Include::Computed)
}

/// The textual scan; `None` when a computed include makes it unanswerable.
fn scan_includes(
    source: &Path,
    flags: &[String],
    project_dir: &Path,
) -> Result<Option<Vec<PathBuf>>, BuildError> {
    let canon = |p: &Path| p.canonicalize().unwrap_or_else(|_| p.to_path_buf());
    let project = canon(project_dir);
    let include_dirs: Vec<PathBuf> = flags
        .iter()
        .filter_map(|f| f.strip_prefix("-I"))
        .map(|d| canon(Path::new(d)))
        .collect();
    let source = canon(source);
    let mut seen: BTreeSet<PathBuf> = BTreeSet::new();
    let mut todo = vec![source.clone()];
    while let Some(file) = todo.pop() {
        let text =
            std::fs::read_to_string(&file).map_err(io(format!("reading {}", file.display())))?;
        let here = file.parent().map(Path::to_path_buf).unwrap_or_default();
        for line in text.lines() {
            let (name, quoted) = match parse_include(line) {
                None => continue,
                Some(Include::Computed) => return Ok(None),
                Some(Include::Quoted(n)) => (n, true),
                Some(Include::Angled(n)) => (n, false),
            };
            // The preprocessor's order: the includer's directory for "…", then -I.
            let found = quoted
                .then(|| here.join(name))
                .into_iter()
                .chain(include_dirs.iter().map(|d| d.join(name)))
                .find(|p| p.is_file());
            // Not found in project or -I directories: a toolkit/system header.
            if let Some(p) = found.map(|p| canon(&p)) {
                if p.starts_with(&project) && p != source && seen.insert(p.clone()) {
                    todo.push(p);
                }
            }
        }
    }
    Ok(Some(seen.into_iter().collect()))
}

/// The same set as nvcc's preprocessor sees it (`-MM`): one process per source.
pub fn preprocessor_headers(
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn include_forms() {
        assert_eq!(
            parse_include("#include \"a.h\""),
            Some(Include::Quoted("a.h"))
        );
        assert_eq!(
            parse_include("  #  include <b/c.h> // x"),
            Some(Include::Angled("b/c.h"))
        );
        assert_eq!(
            parse_include("#include KILN_HEADER"),
            Some(Include::Computed)
        );
        assert_eq!(parse_include("#define X 1"), None);
        assert_eq!(parse_include("int include;"), None);
    }

    #[test]
    fn follows_project_headers_transitively_and_skips_system_ones() {
        let d = tempfile::tempdir().unwrap();
        let inc = d.path().join("include");
        std::fs::create_dir_all(&inc).unwrap();
        std::fs::write(
            inc.join("a.cuh"),
            "#include \"b.cuh\"\n#include <cuda_fp16.h>\n",
        )
        .unwrap();
        std::fs::write(inc.join("b.cuh"), "#pragma once\n").unwrap();
        std::fs::write(inc.join("unused.cuh"), "").unwrap();
        std::fs::write(
            d.path().join("k.cu"),
            "#include <math.h>\n#include \"a.cuh\"\n",
        )
        .unwrap();
        let flags = vec![format!("-I{}", inc.display())];
        let got = scan_includes(&d.path().join("k.cu"), &flags, d.path())
            .unwrap()
            .unwrap();
        let c = |p: PathBuf| p.canonicalize().unwrap();
        assert_eq!(got, vec![c(inc.join("a.cuh")), c(inc.join("b.cuh"))]);
        std::fs::write(d.path().join("m.cu"), "#include KILN_H\n").unwrap();
        assert_eq!(
            scan_includes(&d.path().join("m.cu"), &flags, d.path()).unwrap(),
            None
        );
    }
}
