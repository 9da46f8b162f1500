//! A directory input (an unpacked wheel, a site-packages) read into an [`Artifact`]: the walk
//! (regular files; symlinks that lead inside the tree; anything else a problem), every file read
//! in parallel, and its distributions (`dists`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use kiln_wheel::record::{Hasher, MemberDigest};
use rayon::prelude::*;

use crate::error::AuditError;
use crate::facts::{Artifact, Binary, InputKind, ReadProblem};
use crate::options::{Options, Progress};
use crate::read::binary::{analyse_with, read_kept};
use crate::read::dist_info::{is_dist_info_file, DIST_INFO_TEXT_LIMIT};
use crate::read::dists;
use crate::read::elf;
use crate::read::source::{self, Source};
use crate::read::spill;

/// Files a directory input may hold before the walk stops (site-packages of a large ML
/// environment: ~100k files).
const DIR_FILE_LIMIT: usize = 1_000_000;

/// `p` relative to `root`, with `/` separators.
fn rel(root: &Path, p: &Path) -> String {
    p.strip_prefix(root)
        .unwrap_or(p)
        .to_string_lossy()
        .replace('\\', "/")
}

/// Walks `root`, reads every file in parallel, then the distributions of its top-level
/// dist-info (read/dists.rs); one alone is an unpacked wheel.
pub(crate) fn read_dir(
    root: &Path,
    opts: &Options,
    progress: &dyn Progress,
) -> Result<Artifact, AuditError> {
    let mut problems = Vec::new();
    let walk = Walk::of(root, &mut problems)?;
    if walk.total > opts.max_total_size {
        return Err(AuditError::TooLarge(
            root.to_path_buf(),
            walk.total,
            opts.max_total_size,
        ));
    }
    spill::bound_heap(walk.paths.len());
    progress.begin(walk.total, "reading directory");
    let results: Vec<FileResult> = walk
        .paths
        .par_iter()
        .map(|p| read_one(root, p, opts, progress))
        .collect();
    progress.end();
    let mut read = DirFiles::gather(walk.links, results, &mut problems);
    // dist-info at the top level: an unpacked wheel or a site-packages tree.
    let top: BTreeMap<String, Vec<u8>> = read
        .texts
        .into_iter()
        .filter(|(k, _)| is_dist_info_file(k))
        .collect();
    // Each distribution on its own (read/dists.rs); one alone is an unpacked wheel.
    let distributions = dists::read(top, &mut problems);
    let wheel = match distributions.as_slice() {
        [one] => Some(one.clone()),
        _ => None,
    };
    read.binaries.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(Artifact {
        root: root.to_path_buf(),
        files: read.files,
        binaries: read.binaries,
        wheel,
        distributions,
        digests: read.digests,
        problems,
        ..Artifact::empty(InputKind::Directory)
    })
}

/// What the walk of a directory found.
struct Walk {
    /// Regular files, up to [`DIR_FILE_LIMIT`].
    paths: Vec<std::path::PathBuf>,
    /// Symlinks that lead to a regular file inside the tree (relative paths).
    links: Vec<String>,
    /// The regular files' lengths together.
    total: u64,
}

impl Walk {
    /// Walks `root`; a FIFO, socket or device is a problem, never opened.
    fn of(root: &Path, problems: &mut Vec<ReadProblem>) -> Result<Walk, AuditError> {
        let mut walk = Walk {
            paths: Vec::new(),
            links: Vec::new(),
            total: 0,
        };
        let mut stack = vec![root.to_path_buf()];
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(&dir).map_err(|e| AuditError::io(&dir, e))? {
                let entry = entry.map_err(|e| AuditError::io(&dir, e))?;
                let ft = entry
                    .file_type()
                    .map_err(|e| AuditError::io(&entry.path(), e))?;
                if ft.is_dir() {
                    stack.push(entry.path());
                } else if !walk.visit(root, &entry, &ft, problems) {
                    return Ok(walk);
                }
            }
        }
        Ok(walk)
    }

    /// One entry that is not a directory; false once the file limit is reached.
    fn visit(
        &mut self,
        root: &Path,
        entry: &std::fs::DirEntry,
        ft: &std::fs::FileType,
        problems: &mut Vec<ReadProblem>,
    ) -> bool {
        if ft.is_file() {
            if self.paths.len() >= DIR_FILE_LIMIT {
                problems.push(ReadProblem::OverLimit {
                    file: String::new(),
                    what: "files in the directory",
                    limit: DIR_FILE_LIMIT as u64,
                });
                return false;
            }
            let len = entry.metadata().map(|m| m.len()).unwrap_or(0);
            self.total = self.total.saturating_add(len);
            self.paths.push(entry.path());
        } else if ft.is_symlink() {
            // ld.so follows a symlink named like a NEEDED soname (libfoo.so.1 ->
            // libfoo.so.1.2): it counts as present when it leads to a regular file inside
            // the tree, which is audited under its own name.
            let inside = |p: &Path| {
                let (Ok(t), Ok(r)) = (p.canonicalize(), root.canonicalize()) else {
                    return false;
                };
                t.starts_with(&r) && t.is_file()
            };
            if inside(&entry.path()) {
                self.links.push(rel(root, &entry.path()));
            }
        } else {
            // A FIFO, socket or device is never opened (a FIFO would block the audit).
            problems.push(ReadProblem::UnreadableMember {
                member: rel(root, &entry.path()),
                action: "open",
                error: format!("not a regular file ({})", source::file_kind(ft)),
            });
        }
        true
    }
}

/// (relative path, ELF facts, dist-info text, digest, problem) per file
type FileResult = (
    String,
    Option<Binary>,
    Option<Vec<u8>>,
    Option<MemberDigest>,
    Option<ReadProblem>,
);

/// One file of the walk read: a dist-info file is one at any depth (`<x>.dist-info/FILE`).
fn read_one(root: &Path, p: &Path, opts: &Options, progress: &dyn Progress) -> FileResult {
    let name = rel(root, p);
    let dist = is_dist_info_file(&name)
        || name
            .split('/')
            .rev()
            .nth(1)
            .is_some_and(|d| d.ends_with(".dist-info"));
    match read_dir_file(p, &name, dist, opts, progress) {
        Ok((bin, text, digest)) => (name, bin, text, Some(digest), None),
        Err(problem) => (name, None, None, None, Some(problem)),
    }
}

/// What the files gave: every file name (and the links), binaries, dist-info texts, digests.
struct DirFiles {
    files: BTreeSet<String>,
    binaries: Vec<Binary>,
    texts: BTreeMap<String, Vec<u8>>,
    digests: BTreeMap<String, MemberDigest>,
}

impl DirFiles {
    fn gather(
        links: Vec<String>,
        results: Vec<FileResult>,
        problems: &mut Vec<ReadProblem>,
    ) -> DirFiles {
        let mut d = DirFiles {
            files: links.into_iter().collect(),
            binaries: Vec::new(),
            texts: BTreeMap::new(),
            digests: BTreeMap::new(),
        };
        for (name, bin, text, digest, problem) in results {
            d.files.insert(name.clone());
            d.binaries.extend(bin);
            problems.extend(problem);
            if let Some(digest) = digest {
                d.digests.insert(name.clone(), digest);
            }
            if let Some(t) = text {
                // Only `<x>.dist-info/FILE` at any depth; key it relative to its site root.
                d.texts.insert(name, t);
            }
        }
        d
    }
}

/// What one directory file gave: ELF facts, dist-info text, digest.
type DirFile = (Option<Binary>, Option<Vec<u8>>, MemberDigest);

/// One file of a directory input: ELF facts or dist-info text, and its digest. A file that
/// cannot be opened or read is a problem (never skipped silently).
fn read_dir_file(
    p: &Path,
    name: &str,
    dist: bool,
    opts: &Options,
    progress: &dyn Progress,
) -> Result<DirFile, ReadProblem> {
    let unreadable = |action: &'static str, error: String| ReadProblem::UnreadableMember {
        member: name.to_string(),
        action,
        error,
    };
    let (file, len) = source::open_regular(p).map_err(|e| unreadable("open", e.to_string()))?;
    let limit = if dist {
        DIST_INFO_TEXT_LIMIT.min(opts.max_member_size)
    } else {
        opts.max_member_size
    };
    if len > limit {
        return Err(ReadProblem::MemberTooLarge {
            member: name.to_string(),
            declared: Some(len),
            limit,
        });
    }
    let stamp = source::Stamp::of(&file).map_err(|e| unreadable("read", e.to_string()))?;
    let src = Source::File(std::sync::Arc::new(file), len);
    let head = src.bytes_at(0, 4).unwrap_or_default();
    let result = if elf::is_elf(&head) || dist {
        let (bytes, digest) = read_kept(&src).map_err(|e| unreadable("read", e.to_string()))?;
        if elf::is_elf(&bytes) {
            let mapped = bytes.is_mapped();
            let binary = analyse_with(name, &bytes, opts, mapped);
            bytes.recycle();
            (Some(binary), None, digest)
        } else {
            (None, Some(bytes.into_vec()), digest)
        }
    } else {
        let digest = hash_in_chunks(&src, len).map_err(|e| unreadable("read", e.to_string()))?;
        (None, None, digest)
    };
    src.check_unchanged(&stamp)
        .map_err(|why| unreadable("read", why.to_string()))?;
    progress.advance(len);
    Ok(result)
}

/// The digest of a file that is not analysed, hashed in chunks: a large data file is never held
/// whole. Err: why it could not be read whole (a file shorter than when opened, too).
fn hash_in_chunks(src: &Source, len: u64) -> std::io::Result<MemberDigest> {
    let mut hasher = Hasher::default();
    let mut chunk = vec![0u8; 1 << 20];
    let mut at = 0u64;
    loop {
        let n = src.read_at(at, &mut chunk)?;
        if n == 0 {
            break;
        }
        hasher.update(&chunk[..n]);
        at += n as u64;
    }
    if at != len {
        return Err(std::io::Error::other(format!(
            "{len} bytes when opened, {at} read"
        )));
    }
    Ok(hasher.finish())
}
