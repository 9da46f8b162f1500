//! A wheel read into an [`Artifact`]: the zip crate's listing checked (unsafe paths, symlinks,
//! overlapping members) and compared with Python's (`zip_view`), every member read in parallel
//! (`member`), then the dist-info (`dist_info`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use kiln_wheel::record::MemberDigest;
use kiln_wheel::{archive, tags};

use crate::error::AuditError;
use crate::facts::{Artifact, Binary, InputKind, ReadProblem};
use crate::options::{Options, Progress};
use crate::read::dist_info::{check_dist_info, read_dist_info};
use crate::read::member::{read_member, MemberResult};
use crate::read::source::{self, Source};
use crate::read::spill;
use crate::read::zip_view;

/// Reads a wheel held in memory (`path` names it in errors and gives the file name tags).
pub fn read_wheel(
    path: &Path,
    map: &[u8],
    opts: &Options,
    progress: &dyn Progress,
) -> Result<Artifact, AuditError> {
    read_wheel_source(path, &Source::Memory(map), opts, progress)
}

pub(crate) fn read_wheel_source(
    path: &Path,
    src: &Source,
    opts: &Options,
    progress: &dyn Progress,
) -> Result<Artifact, AuditError> {
    let archive = zip::ZipArchive::new(src.reader())
        .map_err(|e| AuditError::Zip(path.to_path_buf(), e.to_string()))?;
    spill::bound_heap(archive.len());
    let mut problems = Vec::new();
    let mut listing = Listing::of(&archive, &mut problems);
    compare_with_python(src, &listing.ours, &mut problems);
    refuse_overlaps(&archive, &mut listing, &mut problems);
    if listing.declared_total > opts.max_total_size {
        return Err(AuditError::TooLarge(
            path.to_path_buf(),
            listing.declared_total,
            opts.max_total_size,
        ));
    }
    progress.begin(src.len(), "reading wheel");
    let inflated = AtomicU64::new(0);
    let results = read_members(&archive, &listing.indices, opts, &inflated, progress);
    progress.end();
    let total = inflated.load(Ordering::Relaxed);
    if total > opts.max_total_size {
        problems.push(ReadProblem::InflatedTooLarge {
            inflated: total,
            limit: opts.max_total_size,
        });
    }
    let mut read = Members::gather(results, &listing.symlinks, &mut problems);
    let filename = path
        .file_name()
        .and_then(|n| tags::parse_filename(&n.to_string_lossy()));
    check_dist_info(
        &listing.all_names,
        &read.texts,
        filename.as_ref(),
        &mut problems,
    );
    let meta = read_dist_info(&read.texts, filename, &mut problems);
    read.binaries.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(Artifact {
        files: listing.files,
        binaries: read.binaries,
        wheel: Some(meta),
        digests: read.digests,
        problems,
        ..Artifact::empty(InputKind::Wheel)
    })
}

/// The archive's members as the zip crate lists them, before anything is inflated.
struct Listing {
    /// (archive index, declared size) of every member to read.
    indices: Vec<(usize, u64)>,
    /// Regular files (no directories, no symlinks).
    files: BTreeSet<String>,
    /// Every member with a safe path, directories included.
    all_names: Vec<String>,
    symlinks: BTreeSet<String>,
    /// Declared sizes together.
    declared_total: u64,
    /// (raw name, local header offset): to compare with Python's listing.
    ours: Vec<(Vec<u8>, u64)>,
    /// (local header, end of data, index): what each member's inflation would read.
    spans: Vec<(u64, u64, usize)>,
}

impl Listing {
    /// Lists `archive`; an unreadable entry, an unsafe path or a symlink is a problem.
    fn of(
        archive: &zip::ZipArchive<source::SourceReader<'_>>,
        problems: &mut Vec<ReadProblem>,
    ) -> Listing {
        let mut l = Listing {
            indices: Vec::new(),
            files: BTreeSet::new(),
            all_names: Vec::new(),
            symlinks: BTreeSet::new(),
            declared_total: 0,
            ours: Vec::with_capacity(archive.len()),
            spans: Vec::with_capacity(archive.len()),
        };
        let mut raw = archive.clone();
        for i in 0..archive.len() {
            let Ok(f) = raw.by_index_raw(i) else {
                let name = archive.name_for_index(i).unwrap_or("?").to_string();
                problems.push(ReadProblem::UnreadableMember {
                    member: name,
                    action: "read",
                    error: "unreadable central directory entry".into(),
                });
                continue;
            };
            l.ours.push((f.name_raw().to_vec(), f.header_start()));
            l.spans.push((
                f.header_start(),
                f.data_start().saturating_add(f.compressed_size()),
                i,
            ));
            l.add(i, f.name().to_string(), f.is_symlink(), f.size(), problems);
        }
        l
    }

    /// One member: unsafe paths first (a directory entry is extracted too: pip creates it).
    fn add(
        &mut self,
        i: usize,
        name: String,
        is_symlink: bool,
        size: u64,
        problems: &mut Vec<ReadProblem>,
    ) {
        if let Some(why) = archive::unsafe_path(&name) {
            problems.push(ReadProblem::UnsafePath { member: name, why });
            return;
        }
        self.all_names.push(name.clone());
        if name.ends_with('/') {
            return;
        }
        self.declared_total = self.declared_total.saturating_add(size);
        if is_symlink {
            problems.push(ReadProblem::SymlinkMember {
                member: name.clone(),
            });
            self.symlinks.insert(name);
        } else {
            self.files.insert(name);
        }
        self.indices.push((i, size));
    }
}

/// Overlapping members are refused before anything is inflated: one stored stream read under
/// many names is how a 1 MiB zip inflates 32 GiB (CPython's zipfile refuses them too,
/// "Overlapped entries", since 3.12).
fn refuse_overlaps(
    archive: &zip::ZipArchive<source::SourceReader<'_>>,
    listing: &mut Listing,
    problems: &mut Vec<ReadProblem>,
) {
    let overlapping = overlaps(&mut listing.spans);
    if overlapping.is_empty() {
        return;
    }
    listing.indices.retain(|(i, _)| {
        let Some(other) = overlapping.get(i) else {
            return true;
        };
        let member = archive.name_for_index(*i).unwrap_or("?").to_string();
        let other = archive.name_for_index(*other).unwrap_or("?");
        problems.push(ReadProblem::ZipDifferential {
            member,
            why: format!("its bytes overlap those of {other:?} (one stored stream read as two members, a possible zip bomb): not inflated; Python's zipfile refuses it (\"Overlapped entries\")"),
        });
        false
    });
}

/// What the members gave: binaries, dist-info texts, digests (a symlink's digest only).
struct Members {
    binaries: Vec<Binary>,
    texts: BTreeMap<String, Vec<u8>>,
    digests: BTreeMap<String, MemberDigest>,
}

impl Members {
    fn gather(
        results: Vec<MemberResult>,
        symlinks: &BTreeSet<String>,
        problems: &mut Vec<ReadProblem>,
    ) -> Members {
        let mut m = Members {
            binaries: Vec::new(),
            texts: BTreeMap::new(),
            digests: BTreeMap::new(),
        };
        for r in results {
            problems.extend(r.problem);
            if let Some(d) = r.digest {
                m.digests.insert(r.name.clone(), d);
            }
            if symlinks.contains(&r.name) {
                continue;
            }
            m.binaries.extend(r.binary);
            if let Some(t) = r.text {
                m.texts.insert(r.name, t);
            }
        }
        m
    }
}

/// Every member of `indices` (archive index, declared size) read, in archive order. Largest
/// first, each worker taking the next one: the largest starts at once instead of wherever an
/// index split puts it (cuDNN's two 240 MB libraries, or cupy's largest, were otherwise often
/// the tail: cupy's audit took 0.45 s or 0.55 s by luck).
fn read_members(
    archive: &zip::ZipArchive<source::SourceReader<'_>>,
    indices: &[(usize, u64)],
    opts: &Options,
    inflated: &AtomicU64,
    progress: &dyn Progress,
) -> Vec<MemberResult> {
    let mut order: Vec<usize> = (0..indices.len()).collect();
    order.sort_by_key(|&k| std::cmp::Reverse(indices[k].1));
    let next = std::sync::atomic::AtomicUsize::new(0);
    let slots: Vec<std::sync::Mutex<Option<MemberResult>>> = indices
        .iter()
        .map(|_| std::sync::Mutex::new(None))
        .collect();
    rayon::scope(|s| {
        for _ in 0..rayon::current_num_threads().min(indices.len()) {
            s.spawn(|_| {
                let mut ar = archive.clone();
                while let Some(&k) = order.get(next.fetch_add(1, Ordering::Relaxed)) {
                    let r = read_member(&mut ar, indices[k].0, opts, inflated, progress);
                    *slots[k].lock().unwrap_or_else(|p| p.into_inner()) = Some(r);
                }
            });
        }
    });
    slots
        .into_iter()
        .filter_map(|m| m.into_inner().unwrap_or_else(|p| p.into_inner()))
        .collect()
}

/// The zip crate's listing (`ours`: raw name, local header offset) against Python's, then what
/// `ZipFile.open` checks per member (local header name). Overlaps are found on the audit's own
/// listing, before inflating ([`overlaps`]).
fn compare_with_python(src: &Source, ours: &[(Vec<u8>, u64)], problems: &mut Vec<ReadProblem>) {
    let theirs = match zip_view::python_listing(src) {
        Ok(t) => t,
        Err(why) => {
            problems.push(ReadProblem::ZipDifferential {
                member: String::new(),
                why: format!("Python's zipfile refuses the archive: {why}"),
            });
            return;
        }
    };
    let same = theirs.len() == ours.len()
        && theirs
            .iter()
            .zip(ours)
            .all(|(t, (name, at))| &t.name == name && t.header_offset == *at);
    if !same {
        problems.push(ReadProblem::ZipDifferential {
            member: String::new(),
            why: format!(
                "Python's zipfile lists {} member(s), the audit's reader {}, and they differ (several end-of-central-directory records, or a directory the two readers locate differently)",
                theirs.len(),
                ours.len()
            ),
        });
        return;
    }
    let mut names = BTreeSet::new();
    for e in &theirs {
        let member = e.name_lossy();
        if !names.insert(e.name.as_slice()) {
            problems.push(ReadProblem::ZipDifferential {
                member: member.clone(),
                why: "the name occurs twice in the central directory (Python keeps the last, the audit read the first)".into(),
            });
        }
        match zip_view::local_header(src, e) {
            Ok((local, _)) => {
                if local != e.name {
                    problems.push(ReadProblem::ZipDifferential {
                        member: member.clone(),
                        why: format!(
                            "local header names it {:?}: Python's zipfile refuses to open it",
                            String::from_utf8_lossy(&local)
                        ),
                    });
                }
            }
            Err(why) => problems.push(ReadProblem::ZipDifferential {
                member,
                why: format!("Python's zipfile cannot open it: {why}"),
            }),
        }
    }
}

/// Members whose bytes (local header to end of data) overlap another's, each with one member
/// it overlaps: sorted by start, a span that starts before the furthest end seen so far
/// overlaps the span that reached there.
fn overlaps(spans: &mut [(u64, u64, usize)]) -> BTreeMap<usize, usize> {
    spans.sort_unstable();
    let mut out = BTreeMap::new();
    let mut furthest: Option<(u64, usize)> = None;
    for &(start, end, i) in spans.iter() {
        if let Some((reach, j)) = furthest {
            if start < reach {
                out.entry(i).or_insert(j);
                out.entry(j).or_insert(i);
            }
        }
        if furthest.is_none_or(|(reach, _)| end > reach) {
            furthest = Some((end, i));
        }
    }
    out
}
