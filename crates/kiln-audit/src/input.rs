//! Reads an input (a wheel, one ELF file, or a directory) into an [`Artifact`]: every binary's
//! facts plus wheel metadata. Files are memory-mapped; wheel members are decompressed in
//! parallel, each once (hash for RECORD and ELF analysis from the same buffer).

use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;
use std::path::{Path, PathBuf};

use rayon::prelude::*;
use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::device::{self, DeviceCode};
use crate::elf::{self, ElfFacts};
use crate::finding::{finding, Finding};
use crate::wheel::{self, MemberDigest, Requirement};
use crate::{AuditError, Options, Progress};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum InputKind {
    Wheel,
    Elf,
    Directory,
    /// A bare fatbin file (what `nvcc -fatbin` or `fatbinary` writes).
    Fatbin,
}

/// One ELF inside the input.
#[derive(Debug, Clone, Serialize)]
pub struct Binary {
    /// Path relative to the input root ("" parts joined with '/').
    pub path: String,
    pub size: u64,
    pub elf: Option<ElfFacts>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device: Option<DeviceCode>,
    #[serde(skip)]
    pub elf_error: Option<String>,
    #[serde(skip)]
    pub device_error: Option<String>,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct WheelMeta {
    pub dist_info: Vec<String>,
    /// Tags from the WHEEL file(s), expanded.
    pub tags: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub filename: Option<wheel::FilenameTags>,
    pub requires_dist: Vec<Requirement>,
}

#[derive(Debug, Clone)]
pub struct Artifact {
    pub kind: InputKind,
    pub root: PathBuf,
    /// Every file path in the input (relative, '/'-separated).
    pub files: BTreeSet<String>,
    pub binaries: Vec<Binary>,
    pub wheel: Option<WheelMeta>,
    /// Findings produced while reading (unsafe paths, RECORD, unreadable members).
    pub findings: Vec<Finding>,
}

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
        Ok(Artifact {
            kind: InputKind::Elf,
            root: path.parent().unwrap_or(Path::new(".")).to_path_buf(),
            files: BTreeSet::from([name]),
            binaries: vec![binary],
            wheel: None,
            findings: Vec::new(),
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
            kind: InputKind::Fatbin,
            root: path.parent().unwrap_or(Path::new(".")).to_path_buf(),
            files: BTreeSet::from([name]),
            binaries: vec![binary],
            wheel: None,
            findings: Vec::new(),
        })
    } else {
        Err(AuditError::Unrecognized(path.to_path_buf()))
    }
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
    finding: Option<Finding>,
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
    let mut findings = Vec::new();
    let mut indices = Vec::new();
    let mut files = BTreeSet::new();
    let mut declared_total: u64 = 0;
    for i in 0..archive.len() {
        let name = archive.name_for_index(i).unwrap_or("").to_string();
        if name.ends_with('/') {
            continue;
        }
        if let Some(why) = wheel::unsafe_path(&name) {
            findings.push(finding(
                "wheel/unsafe-path",
                &name,
                format!("member path {name:?} is unsafe ({why}); it was not read"),
                "rebuild the wheel: members must be relative paths inside it",
            ));
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
        findings.extend(r.finding);
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
        .and_then(|n| wheel::parse_filename(&n.to_string_lossy()));
    let meta = read_dist_info(&texts, &digests, true, filename, &mut findings);
    binaries.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(Artifact {
        kind: InputKind::Wheel,
        root: PathBuf::new(),
        files,
        binaries,
        wheel: Some(meta),
        findings,
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
        finding: None,
    };
    let fallback_name = ar.name_for_index(i).unwrap_or("?").to_string();
    let mut file = match ar.by_index(i) {
        Ok(f) => f,
        Err(e) => {
            r.name = fallback_name;
            r.finding = Some(finding(
                "input/unreadable-member",
                &r.name,
                format!("cannot read member: {e}"),
                "rebuild the wheel",
            ));
            return r;
        }
    };
    r.name = file.name().to_string();
    let compressed = file.compressed_size();
    let declared = file.size();
    if declared > opts.max_member_size {
        r.finding = Some(finding(
            "wheel/member-too-large",
            &r.name,
            format!(
                "member claims {} bytes, over the limit of {}",
                file.size(),
                opts.max_member_size
            ),
            "raise --max-member-size if this is genuine",
        ));
        return r;
    }
    // One pass: inflate in chunks, hash each chunk while it is in cache, and keep the bytes only
    // for members that are analysed (ELF files, dist-info metadata).
    let mut bytes = Vec::new();
    let mut hasher = Sha256::new();
    let mut size: u64 = 0;
    let mut keep = None;
    let mut chunk = vec![0u8; 256 << 10];
    let mut limited = (&mut file).take(opts.max_member_size + 1);
    loop {
        let n = match limited.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => {
                r.finding = Some(finding(
                    "input/unreadable-member",
                    &r.name,
                    format!("cannot decompress member: {e}"),
                    "rebuild the wheel",
                ));
                return r;
            }
        };
        let data = &chunk[..n];
        hasher.update(data);
        size += n as u64;
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
    if size > opts.max_member_size {
        r.finding = Some(finding(
            "wheel/member-too-large",
            &r.name,
            format!(
                "member inflates past the limit of {} bytes",
                opts.max_member_size
            ),
            "raise --max-member-size if this is genuine",
        ));
        return r;
    }
    r.digest = Some(MemberDigest {
        hash: wheel::record_hash(&hasher.finalize()),
        size,
    });
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
    digests: &BTreeMap<String, MemberDigest>,
    is_wheel: bool,
    filename: Option<wheel::FilenameTags>,
    findings: &mut Vec<Finding>,
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
        if let Some(text) = texts.get(&record_path) {
            let record = wheel::parse_record(text, &record_path, findings);
            wheel::verify_record(&record, digests, &record_path, is_wheel, findings);
        } else if is_wheel {
            findings.push(finding(
                "wheel/record-missing",
                d,
                format!("{d} has no RECORD"),
                "rebuild the wheel with a PEP 427 build backend",
            ));
        }
        if let Some(text) = texts.get(&format!("{d}/WHEEL")) {
            for (k, v) in wheel::parse_headers(&String::from_utf8_lossy(text)) {
                if k.eq_ignore_ascii_case("Tag") {
                    meta.tags.extend(wheel::expand_tag(&v));
                }
            }
        }
        if let Some(text) = texts.get(&format!("{d}/METADATA")) {
            let headers = wheel::parse_headers(&String::from_utf8_lossy(text));
            meta.requires_dist.extend(wheel::parse_requires_dist(
                &headers,
                &format!("{d}/METADATA"),
                findings,
            ));
        }
    }
    if is_wheel && dist_infos.is_empty() {
        findings.push(finding(
            "wheel/no-dist-info",
            "",
            "no .dist-info/ with RECORD, WHEEL or METADATA".into(),
            "build the wheel with maturin or pip wheel",
        ));
    }
    if let Some(f) = &meta.filename {
        if !meta.tags.is_empty() && f.tags.iter().any(|t| !meta.tags.contains(t)) {
            findings.push(finding(
                "tags/filename-mismatch",
                "",
                format!(
                    "file name tags {:?} differ from WHEEL tags {:?}",
                    f.tags, meta.tags
                ),
                "rename the file to match the WHEEL Tag lines (or fix WHEEL)",
            ));
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
            let digest = Some(MemberDigest {
                hash: wheel::record_hash(&Sha256::digest(&map[..])),
                size: map.len() as u64,
            });
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
    let mut findings = Vec::new();
    // dist-info at the top level: an unpacked wheel or a site-packages tree.
    let top: BTreeMap<String, Vec<u8>> = texts
        .into_iter()
        .filter(|(k, _)| is_dist_info_file(k))
        .collect();
    let wheel = if top.is_empty() {
        None
    } else {
        Some(read_dist_info(&top, &digests, false, None, &mut findings))
    };
    binaries.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(Artifact {
        kind: InputKind::Directory,
        root: root.to_path_buf(),
        files,
        binaries,
        wheel,
        findings,
    })
}
