//! Which headers a source includes — every one that is not the toolkit's or the system's, wherever
//! it lies (`../common/x.cuh`, an `include-dirs` entry, a symlink out of the project): each is part
//! of the cache key, so an edit anywhere rebuilds the jobs that read it.
//!
//! Read from the `#include` lines themselves, followed recursively through the includer's
//! directory and the `-I` directories: no process per source (an `nvcc -MM` costs as much as a
//! small compile, 7 of them were a cost `nvcc --threads 0` never pays), and a rule simple
//! enough for Nix to apply at evaluation time without import-from-derivation. Every include
//! inside `#if` blocks counts too: the set can only be larger than the preprocessor's, so a
//! cache key built from it is never stale. A computed include (`#include MACRO`) cannot be
//! followed textually; then nvcc's own preprocessor (`-MM`) answers.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::error::{io, BuildError};

/// The headers `source` includes (directly or not) through its own directory and the `-I`
/// directories of `flags`, canonical and sorted; nothing under `toolkit_home` (keyed by the nvcc
/// version instead).
pub fn headers(
    nvcc: &Path,
    source: &Path,
    flags: &[String],
    toolkit_home: &Path,
) -> Result<Vec<PathBuf>, BuildError> {
    match scan_includes(source, flags)? {
        Some(headers) => Ok(headers),
        None => preprocessor_headers(nvcc, source, flags, toolkit_home),
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
fn scan_includes(source: &Path, flags: &[String]) -> Result<Option<Vec<PathBuf>>, BuildError> {
    let canon = |p: &Path| p.canonicalize().unwrap_or_else(|_| p.to_path_buf());
    let include_dirs: Vec<PathBuf> = flags
        .iter()
        .filter_map(|f| f.strip_prefix("-I"))
        .map(|d| canon(Path::new(d)))
        .collect();
    let source_canon = canon(source);
    let mut seen: BTreeSet<PathBuf> = BTreeSet::new();
    // Each file as the preprocessor opened it: "…" includes are looked up beside that path,
    // not beside a symlink's target.
    let mut todo = vec![source.to_path_buf()];
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
            // Not found beside the includer or in -I directories: a toolkit/system header.
            if let Some(p) = found {
                let c = canon(&p);
                if c != source_canon && seen.insert(c) {
                    todo.push(p);
                }
            }
        }
    }
    Ok(Some(seen.into_iter().collect()))
}

/// The same set as nvcc's preprocessor sees it (`-MM`, which leaves out system headers): one
/// process per source.
pub fn preprocessor_headers(
    nvcc: &Path,
    source: &Path,
    flags: &[String],
    toolkit_home: &Path,
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
    let toolkit = toolkit_home
        .canonicalize()
        .unwrap_or_else(|_| toolkit_home.to_path_buf());
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
        .filter(|p| !p.starts_with(&toolkit) && *p != source_canon)
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
    fn follows_headers_outside_the_project_and_through_symlinks() {
        let d = tempfile::tempdir().unwrap();
        let (project, common) = (d.path().join("lib"), d.path().join("common"));
        std::fs::create_dir_all(project.join("kernels/include")).unwrap();
        std::fs::create_dir_all(&common).unwrap();
        std::fs::write(common.join("outside.cuh"), "#include \"beside.cuh\"\n").unwrap();
        std::fs::write(common.join("beside.cuh"), "").unwrap();
        std::fs::write(common.join("linked.cuh"), "").unwrap();
        std::os::unix::fs::symlink(
            common.join("linked.cuh"),
            project.join("kernels/include/linked.cuh"),
        )
        .unwrap();
        let k = project.join("kernels/k.cu");
        std::fs::write(
            &k,
            "#include \"../../common/outside.cuh\"\n#include \"linked.cuh\"\n",
        )
        .unwrap();
        let flags = vec![format!("-I{}", project.join("kernels/include").display())];
        let got = scan_includes(&k, &flags).unwrap().unwrap();
        let c = |p: PathBuf| p.canonicalize().unwrap();
        let want = [
            c(common.join("beside.cuh")),
            c(common.join("linked.cuh")),
            c(common.join("outside.cuh")),
        ];
        assert_eq!(got, want);
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
        let got = scan_includes(&d.path().join("k.cu"), &flags)
            .unwrap()
            .unwrap();
        let c = |p: PathBuf| p.canonicalize().unwrap();
        assert_eq!(got, vec![c(inc.join("a.cuh")), c(inc.join("b.cuh"))]);
        std::fs::write(d.path().join("m.cu"), "#include KILN_H\n").unwrap();
        assert_eq!(scan_includes(&d.path().join("m.cu"), &flags).unwrap(), None);
    }
}
