//! Reads an input (a wheel, one ELF file, or a directory) into an [`Artifact`]: every binary's
//! facts plus wheel metadata. Files are memory-mapped; wheel members are decompressed in
//! parallel, each once (hash for RECORD and ELF analysis from the same buffer).

use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;
use std::path::Path;

use kiln_wheel::record::{self, Hasher, MemberDigest};
use kiln_wheel::{archive, metadata, tags};
use rayon::prelude::*;

use crate::device;
use crate::elf;
use crate::error::AuditError;
use crate::facts::{Artifact, Binary, DistRecord, InputKind, ReadProblem, WheelMeta};
use crate::options::{Options, Progress};
use crate::runpath;

pub fn read(path: &Path, opts: &Options, progress: &dyn Progress) -> Result<Artifact, AuditError> {
    let meta = std::fs::metadata(path).map_err(|e| AuditError::io(path, e))?;
    if meta.is_dir() {
        return read_dir(path, opts, progress);
    }
    let map = map_file(path)?;
    if map.starts_with(b"PK\x03\x04") || map.starts_with(b"PK\x05\x06") {
        read_wheel(path, &map, opts, progress)
    } else if elf::is_elf(&map) {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let binary = analyse(&name, &map, opts);
        let root = path.parent().unwrap_or(Path::new(".")).to_path_buf();
        let beside = libraries_beside(&root, &binary);
        Ok(Artifact {
            kind: InputKind::Elf,
            root,
            files: BTreeSet::from([name]),
            binaries: vec![binary],
            beside,
            ..Artifact::empty(InputKind::Elf)
        })
    } else if kiln_fatbin::container::is_fatbin(&map) {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let mut binary = Binary {
            path: name.clone(),
            size: map.len() as u64,
            elf: None,
            device: None,
            elf_error: None,
            device_error: None,
        };
        match device::read(&map, opts.list_kernels) {
            Ok(d) => binary.device = Some(d),
            Err(e) => binary.device_error = Some(e),
        }
        Ok(Artifact {
            root: path.parent().unwrap_or(Path::new(".")).to_path_buf(),
            files: BTreeSet::from([name]),
            binaries: vec![binary],
            ..Artifact::empty(InputKind::Fatbin)
        })
    } else {
        Err(AuditError::Unrecognized(path.to_path_buf()))
    }
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

fn map_file(path: &Path) -> Result<memmap2::Mmap, AuditError> {
    let file = std::fs::File::open(path).map_err(|e| AuditError::io(path, e))?;
    // SAFETY: the input is only read; a concurrent writer can at worst give us torn bytes,
    // which every reader here treats as untrusted anyway.
    unsafe { memmap2::Mmap::map(&file) }.map_err(|e| AuditError::io(path, e))
}

/// ELF facts and device code of one binary held in memory.
pub fn analyse(path: &str, bytes: &[u8], opts: &Options) -> Binary {
    let mut b = Binary {
        path: path.to_string(),
        size: bytes.len() as u64,
        elf: None,
        device: None,
        elf_error: None,
        device_error: None,
    };
    match elf::read(bytes) {
        Ok(facts) => {
            if let Some(range) = facts.nv_fatbin.clone() {
                match device::read(&bytes[range], opts.list_kernels) {
                    Ok(d) => b.device = Some(d),
                    Err(e) => b.device_error = Some(e),
                }
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

/// Reads a wheel held in memory (`path` names it in errors and gives the file name tags).
pub fn read_wheel(
    path: &Path,
    map: &[u8],
    opts: &Options,
    progress: &dyn Progress,
) -> Result<Artifact, AuditError> {
    let archive = zip::ZipArchive::new(std::io::Cursor::new(map))
        .map_err(|e| AuditError::Zip(path.to_path_buf(), e.to_string()))?;
    let mut problems = Vec::new();
    let mut indices = Vec::new();
    let mut files = BTreeSet::new();
    let mut declared_total: u64 = 0;
    for i in 0..archive.len() {
        let name = archive.name_for_index(i).unwrap_or("").to_string();
        if name.ends_with('/') {
            continue;
        }
        if let Some(why) = archive::unsafe_path(&name) {
            problems.push(ReadProblem::UnsafePath { member: name, why });
            continue;
        }
        files.insert(name);
        indices.push(i);
    }
    let mut archive_for_sizes = archive.clone();
    for &i in &indices {
        if let Ok(f) = archive_for_sizes.by_index_raw(i) {
            declared_total = declared_total.saturating_add(f.size());
        }
    }
    if declared_total > opts.max_total_size {
        return Err(AuditError::TooLarge(
            path.to_path_buf(),
            declared_total,
            opts.max_total_size,
        ));
    }
    progress.begin(map.len() as u64, "reading wheel");
    let results: Vec<MemberResult> = indices
        .par_iter()
        .map_init(
            || archive.clone(),
            |ar, &i| read_member(ar, i, opts, progress),
        )
        .collect();
    progress.end();

    let mut binaries = Vec::new();
    let mut texts: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    let mut digests = BTreeMap::new();
    for r in results {
        problems.extend(r.problem);
        if let Some(d) = r.digest {
            digests.insert(r.name.clone(), d);
        }
        binaries.extend(r.binary);
        if let Some(t) = r.text {
            texts.insert(r.name, t);
        }
    }
    let filename = path
        .file_name()
        .and_then(|n| tags::parse_filename(&n.to_string_lossy()));
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

fn read_member(
    ar: &mut zip::ZipArchive<std::io::Cursor<&[u8]>>,
    i: usize,
    opts: &Options,
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
    // One pass: inflate in chunks, hash each chunk while it is in cache, and keep the bytes only
    // for members that are analysed (ELF files, dist-info metadata).
    let mut bytes = Vec::new();
    let mut hasher = Hasher::default();
    let mut keep = None;
    let mut chunk = vec![0u8; 256 << 10];
    let mut limited = (&mut file).take(opts.max_member_size + 1);
    loop {
        let n = match limited.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => {
                r.problem = Some(ReadProblem::UnreadableMember {
                    member: r.name.clone(),
                    action: "decompress",
                    error: e.to_string(),
                });
                return r;
            }
        };
        let data = &chunk[..n];
        hasher.update(data);
        let keep = *keep.get_or_insert_with(|| {
            let k = elf::is_elf(data) || is_dist_info_file(&r.name);
            if k {
                bytes.reserve_exact(declared.min(512 << 20) as usize);
            }
            k
        });
        if keep {
            bytes.extend_from_slice(data);
        }
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
    r.digest = Some(hasher.finish());
    if elf::is_elf(&bytes) {
        r.binary = Some(analyse(&r.name, &bytes, opts));
    } else if is_dist_info_file(&r.name) {
        r.text = Some(bytes);
    }
    r
}

/// Parses RECORD / WHEEL / METADATA of every top-level `.dist-info`.
fn read_dist_info(
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
    for d in &dist_infos {
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
                meta.tags.extend(tags::expand_tag(&v));
            }
        }
        let metadata_path = format!("{d}/METADATA");
        if let Some(text) = texts.get(&metadata_path) {
            let headers = metadata::parse_headers(&String::from_utf8_lossy(text));
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

fn read_dir(root: &Path, opts: &Options, progress: &dyn Progress) -> Result<Artifact, AuditError> {
    let mut paths = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).map_err(|e| AuditError::io(&dir, e))? {
            let entry = entry.map_err(|e| AuditError::io(&dir, e))?;
            let ft = entry
                .file_type()
                .map_err(|e| AuditError::io(&entry.path(), e))?;
            if ft.is_dir() {
                stack.push(entry.path());
            } else if ft.is_file() {
                paths.push(entry.path());
            }
        }
    }
    let rel = |p: &Path| {
        p.strip_prefix(root)
            .unwrap_or(p)
            .to_string_lossy()
            .replace('\\', "/")
    };
    let total: u64 = paths
        .iter()
        .filter_map(|p| std::fs::metadata(p).ok())
        .map(|m| m.len())
        .sum();
    progress.begin(total, "reading directory");
    // (relative path, ELF facts, dist-info text, digest) per file
    type FileResult = (
        String,
        Option<Binary>,
        Option<Vec<u8>>,
        Option<MemberDigest>,
    );
    let results: Vec<FileResult> = paths
        .par_iter()
        .map(|p| {
            let name = rel(p);
            let Ok(map) = map_file(p) else {
                return (name, None, None, None);
            };
            progress.advance(map.len() as u64);
            let dist = is_dist_info_file(&name)
                || name
                    .split('/')
                    .rev()
                    .nth(1)
                    .is_some_and(|d| d.ends_with(".dist-info"));
            let digest = Some(MemberDigest::of(&map[..]));
            if elf::is_elf(&map) {
                (name.clone(), Some(analyse(&name, &map, opts)), None, digest)
            } else if dist {
                (name, None, Some(map.to_vec()), digest)
            } else {
                (name, None, None, digest)
            }
        })
        .collect();
    progress.end();
    let mut files = BTreeSet::new();
    let mut binaries = Vec::new();
    let mut texts = BTreeMap::new();
    let mut digests = BTreeMap::new();
    for (name, bin, text, digest) in results {
        files.insert(name.clone());
        binaries.extend(bin);
        if let Some(d) = digest {
            digests.insert(name.clone(), d);
        }
        if let Some(t) = text {
            // Only `<x>.dist-info/FILE` at any depth; key it relative to its site root.
            texts.insert(name, t);
        }
    }
    let mut problems = Vec::new();
    // dist-info at the top level: an unpacked wheel or a site-packages tree.
    let top: BTreeMap<String, Vec<u8>> = texts
        .into_iter()
        .filter(|(k, _)| is_dist_info_file(k))
        .collect();
    let wheel = if top.is_empty() {
        None
    } else {
        Some(read_dist_info(&top, None, &mut problems))
    };
    binaries.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(Artifact {
        root: root.to_path_buf(),
        files,
        binaries,
        wheel,
        digests,
        problems,
        ..Artifact::empty(InputKind::Directory)
    })
}
