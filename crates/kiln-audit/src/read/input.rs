//! Reads an input (a wheel, one ELF file, or a directory) into an [`Artifact`]: every binary's
//! facts plus wheel metadata. Files are read with positioned reads (never mapped: a file
//! truncated meanwhile is an error, not SIGBUS); wheel members are decompressed in parallel,
//! each once (hash for RECORD and ELF analysis from the same buffer). The archive is also listed
//! the way Python's `zipfile` lists it (`zip_view`), and every difference is a read problem.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use kiln_wheel::record::{self, Hasher, MemberDigest};
use kiln_wheel::{archive, metadata, tags};
use rayon::prelude::*;

use crate::error::AuditError;
use crate::facts::{Artifact, Binary, DistRecord, InputKind, ReadProblem, WheelMeta};
use crate::options::{Options, Progress};
use crate::read::device;
use crate::read::dists;
use crate::read::elf;
use crate::read::runpath;
use crate::read::source::{self, Source};
use crate::read::spill;
use crate::read::zip_view;

/// Reads the wheel, ELF, fatbin or directory at `path` into facts.
pub fn read(path: &Path, opts: &Options, progress: &dyn Progress) -> Result<Artifact, AuditError> {
    let meta = std::fs::metadata(path).map_err(|e| AuditError::io(path, e))?;
    if meta.is_dir() {
        return read_dir(path, opts, progress);
    }
    let (file, len) = source::open_regular(path).map_err(|e| AuditError::open(path, e))?;
    let stamp = source::Stamp::of(&file).map_err(|e| AuditError::io(path, e))?;
    let file = std::sync::Arc::new(file);
    let artifact = read_file(path, Source::File(file.clone(), len), opts, progress)?;
    Source::File(file, len)
        .check_unchanged(&stamp)
        .map_err(|why| AuditError::Changed(path.to_path_buf(), why))?;
    Ok(artifact)
}

fn read_file(
    path: &Path,
    src: Source<'_>,
    opts: &Options,
    progress: &dyn Progress,
) -> Result<Artifact, AuditError> {
    let len = src.len();
    if len > opts.max_total_size {
        return Err(AuditError::TooLarge(
            path.to_path_buf(),
            len,
            opts.max_total_size,
        ));
    }
    let head = src.bytes_at(0, 4).unwrap_or_default();
    let named_wheel = path.extension().is_some_and(|e| e == "whl");
    if head.starts_with(b"PK") {
        return read_wheel_source(path, &src, opts, progress);
    }
    let is_elf = elf::is_elf(&head);
    let is_fatbin = head.len() == 4 && kiln_fatbin::container::is_fatbin(&head);
    // An ELF or fatbin that Python's zipfile also opens: pip would install the zip, the loader
    // would load the ELF; which one was audited is ambiguous, so neither is.
    if (is_elf || is_fatbin) && (named_wheel || zip_view::opens_as_zip(&src)) {
        return Err(AuditError::Polyglot(path.to_path_buf()));
    }
    if !is_elf && !is_fatbin {
        return Err(AuditError::Unrecognized(path.to_path_buf()));
    }
    let (bytes, _) = read_kept(&src).map_err(|e| AuditError::io(path, e))?;
    let mapped = bytes.is_mapped();
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let root = path.parent().unwrap_or(Path::new(".")).to_path_buf();
    if is_elf {
        let binary = analyse_with(&name, &bytes, opts, mapped);
        let beside = libraries_beside(&root, &binary);
        Ok(Artifact {
            kind: InputKind::Elf,
            root,
            files: BTreeSet::from([name]),
            binaries: vec![binary],
            beside,
            ..Artifact::empty(InputKind::Elf)
        })
    } else {
        let mut binary = Binary {
            path: name.clone(),
            size: bytes.len() as u64,
            elf: None,
            device: None,
            relocatable: None,
            elf_error: None,
            device_error: None,
        };
        match device::read_with(&bytes, opts.list_kernels, mapped) {
            Ok(d) => binary.device = Some(d),
            Err(e) => binary.device_error = Some(e),
        }
        Ok(Artifact {
            root,
            files: BTreeSet::from([name]),
            binaries: vec![binary],
            ..Artifact::empty(InputKind::Fatbin)
        })
    }
}

/// The whole source, read (never mapped) and hashed: into memory, or past [`spill::IN_MEMORY`]
/// into a mapped temporary file as wheel members are, so a large lone ELF or directory file
/// costs no more memory than a wheel member. A file that shrinks meanwhile is an error.
fn read_kept(src: &Source) -> std::io::Result<(spill::Kept, MemberDigest)> {
    let len = src.len();
    let mut kept = spill::Keeper::for_size(len);
    let mut hasher = Hasher::default();
    let mut chunk = vec![0u8; 1 << 20];
    while kept.len() < len {
        let n = src.read_at(kept.len(), &mut chunk)?;
        if n == 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                format!(
                    "the file shrank while it was read ({len} bytes when opened, {} read)",
                    kept.len()
                ),
            ));
        }
        let n = n.min((len - kept.len()) as usize);
        hasher.update(&chunk[..n]);
        kept.extend(&chunk[..n])?;
    }
    Ok((kept.finish()?, hasher.finish()))
}

/// Which `$ORIGIN`-relative candidates for the sonames a lone ELF loads exist on disk next to it.
fn libraries_beside(root: &Path, binary: &Binary) -> BTreeSet<String> {
    let Some(elf) = &binary.elf else {
        return BTreeSet::new();
    };
    let sonames = elf
        .needed
        .iter()
        .chain(elf.dlopen.iter().flat_map(|f| &f.soname));
    sonames
        .flat_map(|s| runpath::origin_candidates(&binary.path, elf, s))
        .map(|(_, candidate)| candidate)
        .filter(|candidate| root.join(candidate).exists())
        .collect()
}

/// ELF facts and device code of one binary held in memory.
pub fn analyse(path: &str, bytes: &[u8], opts: &Options) -> Binary {
    analyse_with(path, bytes, opts, false)
}

/// `mapped`: `bytes` is a spilled member's mapping, whose pages are handed back as each part
/// is read (spill.rs).
fn analyse_with(path: &str, bytes: &[u8], opts: &Options, mapped: bool) -> Binary {
    let mut b = Binary {
        path: path.to_string(),
        size: bytes.len() as u64,
        elf: None,
        device: None,
        relocatable: None,
        elf_error: None,
        device_error: None,
    };
    let read = elf::read_with(bytes, mapped);
    // The headers, symbols and read-only data elf::read touched: handed back (spill.rs).
    spill::release(bytes, mapped);
    match read {
        Ok(facts) => {
            if let Some(range) = facts.nv_fatbin.clone() {
                match device::read_with(&bytes[range.clone()], opts.list_kernels, mapped) {
                    Ok(d) => b.device = Some(d),
                    Err(e) => b.device_error = Some(e),
                }
                spill::release(&bytes[range], mapped);
            }
            // Device code the library loads itself, from any other data section.
            for (name, range) in &facts.data_sections {
                let first = b.device.as_ref().map_or(0, |d| d.containers);
                let (images, entries) = device::scan(
                    name,
                    &bytes[range.clone()],
                    first,
                    opts.list_kernels,
                    mapped,
                );
                spill::release(&bytes[range.clone()], mapped);
                if images > 0 {
                    let d = b.device.get_or_insert_with(|| device::DeviceCode {
                        containers: 0,
                        entries: Vec::new(),
                        kernels_listed: opts.list_kernels,
                    });
                    d.containers += images;
                    d.entries.extend(entries);
                }
            }
            if let Some(range) = facts.relfatbin.clone() {
                // Relocatable device code has the .nv_fatbin layout; reported apart, from its
                // entry headers, counted for nothing.
                b.relocatable = device::read_relocatable(&bytes[range.clone()], mapped).ok();
                spill::release(&bytes[range], mapped);
            }
            b.elf = Some(facts);
        }
        Err(e) => b.elf_error = Some(e),
    }
    b
}

struct MemberResult {
    name: String,
    digest: Option<MemberDigest>,
    binary: Option<Binary>,
    text: Option<Vec<u8>>,
    problem: Option<ReadProblem>,
}

fn is_dist_info_file(name: &str) -> bool {
    let mut parts = name.split('/');
    matches!((parts.next(), parts.next(), parts.next()), (Some(d), Some("RECORD" | "METADATA" | "WHEEL"), None) if d.ends_with(".dist-info"))
}

/// Largest dist-info text (RECORD, METADATA, WHEEL) kept for parsing; a real RECORD of a
/// large wheel is a few MB (torch 2.x: ~2 MB).
const DIST_INFO_TEXT_LIMIT: u64 = 64 << 20;
/// Requires-Dist lines read from one METADATA (torch 2.x has ~20; each is in the report).
const REQUIRES_DIST_LIMIT: usize = 1000;
/// Top-level `.dist-info` directories read in detail; more than one is already an error.
const DIST_INFO_LIMIT: usize = 4;

/// Reads a wheel held in memory (`path` names it in errors and gives the file name tags).
pub fn read_wheel(
    path: &Path,
    map: &[u8],
    opts: &Options,
    progress: &dyn Progress,
) -> Result<Artifact, AuditError> {
    read_wheel_source(path, &Source::Memory(map), opts, progress)
}

fn read_wheel_source(
    path: &Path,
    src: &Source,
    opts: &Options,
    progress: &dyn Progress,
) -> Result<Artifact, AuditError> {
    let archive = zip::ZipArchive::new(src.reader())
        .map_err(|e| AuditError::Zip(path.to_path_buf(), e.to_string()))?;
    spill::bound_heap(archive.len());
    let mut problems = Vec::new();
    let mut indices = Vec::new();
    let mut files = BTreeSet::new();
    let mut all_names = Vec::new();
    let mut symlinks = BTreeSet::new();
    let mut declared_total: u64 = 0;
    let mut ours = Vec::with_capacity(archive.len());
    // (local header, end of data, index): what each member's inflation would read.
    let mut spans = Vec::with_capacity(archive.len());
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
        ours.push((f.name_raw().to_vec(), f.header_start()));
        spans.push((
            f.header_start(),
            f.data_start().saturating_add(f.compressed_size()),
            i,
        ));
        let name = f.name().to_string();
        let is_symlink = f.is_symlink();
        // Unsafe paths first: a directory entry is extracted too (pip creates it).
        if let Some(why) = archive::unsafe_path(&name) {
            problems.push(ReadProblem::UnsafePath { member: name, why });
            continue;
        }
        all_names.push(name.clone());
        if name.ends_with('/') {
            continue;
        }
        declared_total = declared_total.saturating_add(f.size());
        if is_symlink {
            problems.push(ReadProblem::SymlinkMember {
                member: name.clone(),
            });
            symlinks.insert(name.clone());
        } else {
            files.insert(name);
        }
        indices.push((i, f.size()));
    }
    compare_with_python(src, &ours, &mut problems);
    // Overlapping members are refused before anything is inflated: one stored stream read
    // under many names is how a 1 MiB zip inflates 32 GiB (CPython's zipfile refuses them too,
    // "Overlapped entries", since 3.12).
    let overlapping = overlaps(&mut spans);
    if !overlapping.is_empty() {
        indices.retain(|(i, _)| {
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
    if declared_total > opts.max_total_size {
        return Err(AuditError::TooLarge(
            path.to_path_buf(),
            declared_total,
            opts.max_total_size,
        ));
    }
    progress.begin(src.len(), "reading wheel");
    let inflated = AtomicU64::new(0);
    let results = read_members(&archive, &indices, opts, &inflated, progress);
    progress.end();
    let total = inflated.load(Ordering::Relaxed);
    if total > opts.max_total_size {
        problems.push(ReadProblem::InflatedTooLarge {
            inflated: total,
            limit: opts.max_total_size,
        });
    }

    let mut binaries = Vec::new();
    let mut texts: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    let mut digests = BTreeMap::new();
    for r in results {
        problems.extend(r.problem);
        if let Some(d) = r.digest {
            digests.insert(r.name.clone(), d);
        }
        if symlinks.contains(&r.name) {
            continue;
        }
        binaries.extend(r.binary);
        if let Some(t) = r.text {
            texts.insert(r.name, t);
        }
    }
    let filename = path
        .file_name()
        .and_then(|n| tags::parse_filename(&n.to_string_lossy()));
    check_dist_info(&all_names, &texts, filename.as_ref(), &mut problems);
    let meta = read_dist_info(&texts, filename, &mut problems);
    binaries.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(Artifact {
        files,
        binaries,
        wheel: Some(meta),
        digests,
        problems,
        ..Artifact::empty(InputKind::Wheel)
    })
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

fn read_member(
    ar: &mut zip::ZipArchive<source::SourceReader<'_>>,
    i: usize,
    opts: &Options,
    inflated: &AtomicU64,
    progress: &dyn Progress,
) -> MemberResult {
    let mut r = MemberResult {
        name: String::new(),
        digest: None,
        binary: None,
        text: None,
        problem: None,
    };
    let fallback_name = ar.name_for_index(i).unwrap_or("?").to_string();
    let mut file = match ar.by_index(i) {
        Ok(f) => f,
        Err(e) => {
            r.problem = Some(ReadProblem::UnreadableMember {
                member: fallback_name.clone(),
                action: "read",
                error: e.to_string(),
            });
            r.name = fallback_name;
            return r;
        }
    };
    r.name = file.name().to_string();
    let compressed = file.compressed_size();
    let declared = file.size();
    if declared > opts.max_member_size {
        r.problem = Some(ReadProblem::MemberTooLarge {
            member: r.name.clone(),
            declared: Some(declared),
            limit: opts.max_member_size,
        });
        return r;
    }
    let dist_info = is_dist_info_file(&r.name);
    let keep_limit = if dist_info {
        DIST_INFO_TEXT_LIMIT
    } else {
        opts.max_member_size
    };
    // One pass: inflate in chunks, hash each chunk while it is in cache, and keep the bytes only
    // for members that are analysed (ELF files, dist-info metadata). Whether a member is an ELF
    // is decided from its first 4 bytes, however few bytes the first read returns.
    let mut kept = spill::Keeper::for_size(declared);
    let mut hasher = Hasher::default();
    let mut keep: Option<bool> = None;
    let mut stop: Option<ReadProblem> = None;
    let mut over_total = false;
    let name = r.name.clone();
    let consume = |data: &[u8]| -> bool {
        hasher.update(data);
        let total = inflated.fetch_add(data.len() as u64, Ordering::Relaxed) + data.len() as u64;
        if total > opts.max_total_size {
            // Counted in `inflated`; the wheel-level problem names the total.
            over_total = true;
            return false;
        }
        let stored = match keep {
            Some(true) => kept.extend(data),
            Some(false) => Ok(()),
            None => {
                let s = kept.extend(data);
                if kept.len() >= 4 {
                    let k = elf::is_elf(kept.head(4)) || dist_info;
                    if !k {
                        kept.stop();
                    }
                    keep = Some(k);
                }
                s
            }
        };
        if let Err(e) = stored {
            stop = Some(unreadable_member(&name, "spill to a temporary file", e));
            return false;
        }
        if keep == Some(true) && kept.len() > keep_limit {
            stop = Some(ReadProblem::MemberTooLarge {
                member: name.clone(),
                declared: None,
                limit: keep_limit,
            });
            return false;
        }
        true
    };
    // Python's zipfile reads exactly the declared size: inflating one byte past it proves the
    // claim false, and bounds the work by the declared sizes, which were checked against
    // --max-total-size before anything was inflated (a member claiming 0 bytes that inflates
    // to 4 GiB costs one byte, not 4 GiB).
    let mut limited = (&mut file).take(declared + 1);
    // A large member is inflated on this thread and hashed and kept on a second one: NCCL's
    // 240 MB library was a third of its audit, and hashing and spilling took 0.2 s of its 0.55.
    let drained = if declared > spill::IN_MEMORY as u64 {
        drain_pipelined(&mut limited, consume)
    } else {
        drain(&mut limited, consume)
    };
    if let Err(e) = drained {
        r.problem = Some(unreadable_member(&r.name, "decompress", e));
        return r;
    }
    if over_total {
        return r;
    }
    if let Some(problem) = stop {
        r.problem = Some(problem);
        return r;
    }
    progress.advance(compressed);
    if hasher.size() > opts.max_member_size {
        r.problem = Some(ReadProblem::MemberTooLarge {
            member: r.name.clone(),
            declared: None,
            limit: opts.max_member_size,
        });
        return r;
    }
    // Python's zipfile reads exactly the declared size and checks the CRC over it: a member
    // that inflates to another size is one pip refuses (or installs cut short).
    if hasher.size() != declared {
        let inflates = if hasher.size() > declared {
            "to more bytes (inflation stopped one past the claim)".to_string()
        } else {
            format!("to {} bytes", hasher.size())
        };
        r.problem = Some(ReadProblem::ZipDifferential {
            member: r.name.clone(),
            why: format!(
                "it inflates {inflates}, but the central directory declares {declared} (Python's zipfile reads {declared} and checks its CRC over them)"
            ),
        });
    }
    r.digest = Some(hasher.finish());
    let bytes = match kept.finish() {
        Ok(b) => b,
        Err(e) => {
            r.problem = Some(unreadable_member(&r.name, "map the spilled member", e));
            return r;
        }
    };
    if elf::is_elf(&bytes) {
        r.binary = Some(analyse_with(&r.name, &bytes, opts, bytes.is_mapped()));
        bytes.recycle();
    } else if dist_info {
        r.text = Some(bytes.into_vec());
    }
    r
}

fn unreadable_member(member: &str, action: &'static str, e: std::io::Error) -> ReadProblem {
    ReadProblem::UnreadableMember {
        member: member.to_string(),
        action,
        error: e.to_string(),
    }
}

/// Bytes inflated per chunk.
const CHUNK: usize = 256 << 10;

/// Fills `chunk` from `reader` as far as it goes; the count is short only at the end.
fn fill(reader: &mut impl Read, chunk: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < chunk.len() {
        match reader.read(&mut chunk[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

/// Reads `reader` to its end, handing each chunk to `consume` until it returns false.
fn drain(reader: &mut impl Read, mut consume: impl FnMut(&[u8]) -> bool) -> std::io::Result<()> {
    thread_local! {
        // One chunk per worker thread: a fresh 256 KiB buffer per member is mapped, faulted in
        // and unmapped each time (cupy has 2,438 members).
        static CHUNK_BUF: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
    }
    CHUNK_BUF.with_borrow_mut(|chunk| {
        chunk.resize(CHUNK, 0);
        loop {
            let n = fill(reader, chunk)?;
            if n == 0 || !consume(&chunk[..n]) {
                return Ok(());
            }
        }
    })
}

/// [`drain`] with `consume` on a second thread, fed whole chunks through a few recycled
/// buffers (the inflater's reads return ~10 KB each; handing those over one by one cost more
/// than the overlap saved).
fn drain_pipelined(
    reader: &mut impl Read,
    mut consume: impl FnMut(&[u8]) -> bool + Send,
) -> std::io::Result<()> {
    use std::sync::mpsc::sync_channel;
    const BUFFERS: usize = 4;
    let (full_tx, full_rx) = sync_channel::<(Vec<u8>, usize)>(BUFFERS);
    let (empty_tx, empty_rx) = sync_channel::<Vec<u8>>(BUFFERS);
    for _ in 0..BUFFERS {
        empty_tx
            .send(vec![0u8; CHUNK])
            .expect("room for every buffer");
    }
    // `move`: the reader's channel ends are dropped when this closure returns (on an error too),
    // before the scope waits for the consumer, whose loop ends with them.
    std::thread::scope(move |scope| {
        scope.spawn(move || {
            for (chunk, n) in full_rx {
                // Returning drops `full_rx`, which ends the reader's loop below.
                if !consume(&chunk[..n]) {
                    return;
                }
                // Fails once the reader is done; the chunks still queued are consumed all the
                // same.
                let _ = empty_tx.send(chunk);
            }
        });
        // A closed channel means the consumer stopped: the member's outcome is its to tell.
        while let Ok(mut chunk) = empty_rx.recv() {
            let n = fill(reader, &mut chunk)?;
            if n == 0 || full_tx.send((chunk, n)).is_err() {
                break;
            }
        }
        Ok(())
    })
}

/// What pip's `wheel_dist_info_dir` and `wheel_metadata` refuse (pip/_internal/utils/wheel.py):
/// no or several top-level `.dist-info` directories, one whose name does not start with the
/// project name, no WHEEL, a Wheel-Version that is missing or not 1.x; and METADATA, which every
/// installer reads. Stricter than pip in one place: the dist-info must be `{name}-{version}` of
/// the file name (pip accepts any suffix after the name).
fn check_dist_info(
    names: &[String],
    texts: &BTreeMap<String, Vec<u8>>,
    filename: Option<&tags::FilenameTags>,
    problems: &mut Vec<ReadProblem>,
) {
    let dirs: BTreeSet<&str> = names
        .iter()
        .map(|n| n.split('/').next().unwrap_or(""))
        .filter(|d| d.ends_with(".dist-info"))
        .collect();
    if dirs.len() > 1 {
        problems.push(ReadProblem::BadDistInfo {
            dist_info: String::new(),
            why: format!(
                "{} .dist-info directories (pip refuses more than one): {}",
                dirs.len(),
                dirs.iter().take(8).copied().collect::<Vec<_>>().join(", ")
            ),
        });
    }
    for d in dirs.iter().take(DIST_INFO_LIMIT) {
        let stem = d.trim_end_matches(".dist-info");
        if let Some(f) = filename {
            let (name, version) = stem.split_once('-').unwrap_or((stem, ""));
            let same_name = metadata::normalize_name(name) == metadata::normalize_name(&f.name);
            let same_version = same_version(version, &f.version);
            if !same_name || !same_version {
                problems.push(ReadProblem::BadDistInfo {
                    dist_info: d.to_string(),
                    why: format!(
                        "named for {stem:?}, but the file name says {}-{}",
                        f.name, f.version
                    ),
                });
            }
        }
        for needed in ["WHEEL", "METADATA"] {
            if !texts.contains_key(&format!("{d}/{needed}")) {
                problems.push(ReadProblem::BadDistInfo {
                    dist_info: d.to_string(),
                    why: format!("{d}/{needed} is missing (pip refuses the wheel)"),
                });
            }
        }
        if let Some(text) = texts.get(&format!("{d}/WHEEL")) {
            let text = String::from_utf8_lossy(text);
            let headers = metadata::parse_headers(&text);
            let v = headers
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case("Wheel-Version"))
                .map(|(_, v)| v.as_str());
            let major = v.and_then(|v| v.split('.').next()?.trim().parse::<u64>().ok());
            if major != Some(1) {
                problems.push(ReadProblem::BadDistInfo {
                    dist_info: d.to_string(),
                    why: match v {
                        None => "WHEEL has no Wheel-Version (pip refuses the wheel)".into(),
                        Some(v) => {
                            format!("Wheel-Version {v:?} is not 1.x (pip refuses other majors)")
                        }
                    },
                });
            }
        }
    }
}

/// PEP 440 equality of the dist-info's and the file name's version (`1.0` == `1.0.0`).
fn same_version(a: &str, b: &str) -> bool {
    use std::str::FromStr;
    let parse = |v: &str| pep508_rs::pep440_rs::Version::from_str(&v.replace('_', "-")).ok();
    match (parse(a), parse(b)) {
        (Some(x), Some(y)) => x == y,
        _ => a == b,
    }
}

/// Parses RECORD / WHEEL / METADATA of every top-level `.dist-info` (the first few).
pub(crate) fn read_dist_info(
    texts: &BTreeMap<String, Vec<u8>>,
    filename: Option<tags::FilenameTags>,
    problems: &mut Vec<ReadProblem>,
) -> WheelMeta {
    let mut meta = WheelMeta {
        filename,
        ..Default::default()
    };
    let dist_infos: BTreeSet<&str> = texts
        .keys()
        .filter_map(|k| k.split_once('/').map(|(d, _)| d))
        .collect();
    for d in dist_infos.iter().take(DIST_INFO_LIMIT) {
        meta.dist_info.push(d.to_string());
        let record_path = format!("{d}/RECORD");
        let rows = texts.get(&record_path).map(|text| {
            let (rows, bad) = record::parse(text);
            problems.extend(bad.into_iter().map(|b| ReadProblem::BadRecordLine {
                record: record_path.clone(),
                line: b.line,
                error: b.error,
            }));
            rows
        });
        meta.records.push(DistRecord {
            dist_info: d.to_string(),
            rows,
        });
        if let Some(text) = texts.get(&format!("{d}/WHEEL")) {
            for v in tags::wheel_file_tags(&String::from_utf8_lossy(text)) {
                match tags::expand_tag_bounded(&v, tags::MAX_EXPANDED_TAGS - meta.tags.len()) {
                    Some(t) => meta.tags.extend(t),
                    None => {
                        problems.push(ReadProblem::OverLimit {
                            file: format!("{d}/WHEEL"),
                            what: "expanded wheel tags",
                            limit: tags::MAX_EXPANDED_TAGS as u64,
                        });
                        break;
                    }
                }
            }
        }
        let metadata_path = format!("{d}/METADATA");
        if let Some(text) = texts.get(&metadata_path) {
            let mut headers = metadata::parse_headers(&String::from_utf8_lossy(text));
            let mut seen = 0usize;
            headers.retain(|(k, _)| {
                let req = k.eq_ignore_ascii_case("Requires-Dist");
                seen += usize::from(req);
                !req || seen <= REQUIRES_DIST_LIMIT
            });
            if seen > REQUIRES_DIST_LIMIT {
                problems.push(ReadProblem::OverLimit {
                    file: metadata_path.clone(),
                    what: "Requires-Dist lines",
                    limit: REQUIRES_DIST_LIMIT as u64,
                });
            }
            let (reqs, bad) = metadata::parse_requires_dist(&headers);
            meta.requires_dist.extend(reqs);
            problems.extend(bad.into_iter().map(|b| ReadProblem::BadRequiresDist {
                metadata: metadata_path.clone(),
                value: b.value,
                error: b.error,
            }));
        }
    }
    meta
}

/// Files a directory input may hold before the walk stops (site-packages of a large ML
/// environment: ~100k files).
const DIR_FILE_LIMIT: usize = 1_000_000;

fn read_dir(root: &Path, opts: &Options, progress: &dyn Progress) -> Result<Artifact, AuditError> {
    let mut paths = Vec::new();
    let mut problems = Vec::new();
    let rel = |p: &Path| {
        p.strip_prefix(root)
            .unwrap_or(p)
            .to_string_lossy()
            .replace('\\', "/")
    };
    let mut stack = vec![root.to_path_buf()];
    let mut links = Vec::new();
    let mut total: u64 = 0;
    'walk: while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).map_err(|e| AuditError::io(&dir, e))? {
            let entry = entry.map_err(|e| AuditError::io(&dir, e))?;
            let ft = entry
                .file_type()
                .map_err(|e| AuditError::io(&entry.path(), e))?;
            if ft.is_dir() {
                stack.push(entry.path());
            } else if ft.is_file() {
                if paths.len() >= DIR_FILE_LIMIT {
                    problems.push(ReadProblem::OverLimit {
                        file: String::new(),
                        what: "files in the directory",
                        limit: DIR_FILE_LIMIT as u64,
                    });
                    break 'walk;
                }
                let len = entry.metadata().map(|m| m.len()).unwrap_or(0);
                total = total.saturating_add(len);
                paths.push(entry.path());
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
                    links.push(rel(&entry.path()));
                }
            } else {
                // A FIFO, socket or device is never opened (a FIFO would block the audit).
                problems.push(ReadProblem::UnreadableMember {
                    member: rel(&entry.path()),
                    action: "open",
                    error: format!("not a regular file ({})", source::file_kind(&ft)),
                });
            }
        }
    }
    if total > opts.max_total_size {
        return Err(AuditError::TooLarge(
            root.to_path_buf(),
            total,
            opts.max_total_size,
        ));
    }
    spill::bound_heap(paths.len());
    progress.begin(total, "reading directory");
    // (relative path, ELF facts, dist-info text, digest, problem) per file
    type FileResult = (
        String,
        Option<Binary>,
        Option<Vec<u8>>,
        Option<MemberDigest>,
        Option<ReadProblem>,
    );
    let results: Vec<FileResult> = paths
        .par_iter()
        .map(|p| {
            let name = rel(p);
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
        })
        .collect();
    progress.end();
    let mut files: BTreeSet<String> = links.into_iter().collect();
    let mut binaries = Vec::new();
    let mut texts = BTreeMap::new();
    let mut digests = BTreeMap::new();
    for (name, bin, text, digest, problem) in results {
        files.insert(name.clone());
        binaries.extend(bin);
        problems.extend(problem);
        if let Some(d) = digest {
            digests.insert(name.clone(), d);
        }
        if let Some(t) = text {
            // Only `<x>.dist-info/FILE` at any depth; key it relative to its site root.
            texts.insert(name, t);
        }
    }
    // dist-info at the top level: an unpacked wheel or a site-packages tree.
    let top: BTreeMap<String, Vec<u8>> = texts
        .into_iter()
        .filter(|(k, _)| is_dist_info_file(k))
        .collect();
    // Each distribution on its own (read/dists.rs); one alone is an unpacked wheel.
    let distributions = dists::read(top, &mut problems);
    let wheel = match distributions.as_slice() {
        [one] => Some(one.clone()),
        _ => None,
    };
    binaries.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(Artifact {
        root: root.to_path_buf(),
        files,
        binaries,
        wheel,
        distributions,
        digests,
        problems,
        ..Artifact::empty(InputKind::Directory)
    })
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
        // Hashed in chunks: a large data file is never held whole.
        let mut hasher = Hasher::default();
        let mut chunk = vec![0u8; 1 << 20];
        let mut at = 0u64;
        loop {
            let n = src
                .read_at(at, &mut chunk)
                .map_err(|e| unreadable("read", e.to_string()))?;
            if n == 0 {
                break;
            }
            hasher.update(&chunk[..n]);
            at += n as u64;
        }
        if at != len {
            return Err(unreadable(
                "read",
                format!("{len} bytes when opened, {at} read"),
            ));
        }
        (None, None, hasher.finish())
    };
    src.check_unchanged(&stamp)
        .map_err(|why| unreadable("read", why))?;
    progress.advance(len);
    Ok(result)
}
