//! How the dynamic loader searches `$ORIGIN`-relative RUNPATH/RPATH entries, in '/'-separated
//! paths relative to the input root. Shared by the reader (which looks next to a lone ELF on
//! disk) and the linkage rule (which looks inside the input).

use crate::read::elf::ElfFacts;

/// Normalizes "a/b/../c" (no leading "/"); None when it climbs above the root.
pub fn normalize(path: &str) -> Option<String> {
    let mut parts: Vec<&str> = Vec::new();
    for c in path.split('/') {
        match c {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            c => parts.push(c),
        }
    }
    Some(parts.join("/"))
}

fn parent(path: &str) -> &str {
    path.rsplit_once('/').map(|(d, _)| d).unwrap_or("")
}

/// Each `$ORIGIN` RUNPATH/RPATH entry of `binary_path` with the directory it names
/// (normalized, relative to the input root), in search order; entries that climb above the
/// root are left out.
pub fn origin_dirs<'a>(binary_path: &str, elf: &'a ElfFacts) -> Vec<(&'a str, String)> {
    let origin = parent(binary_path);
    let mut out = Vec::new();
    for entry in elf.runpath.iter().chain(&elf.rpath) {
        let Some(rel) = entry
            .strip_prefix("$ORIGIN")
            .or_else(|| entry.strip_prefix("${ORIGIN}"))
        else {
            continue;
        };
        if let Some(dir) = normalize(&format!("{origin}/{rel}")) {
            out.push((entry.as_str(), dir));
        }
    }
    out
}

/// Each `$ORIGIN` directory (normalized) that `binary_path` searches for `soname`, with the
/// candidate path there, in search order.
pub fn origin_candidates(binary_path: &str, elf: &ElfFacts, soname: &str) -> Vec<(String, String)> {
    origin_dirs(binary_path, elf)
        .into_iter()
        .map(|(_, dir)| {
            let candidate = if dir.is_empty() {
                soname.to_string()
            } else {
                format!("{dir}/{soname}")
            };
            (dir, candidate)
        })
        .collect()
}
