//! Reads an input (a wheel, one ELF file, a fatbin, or a directory) into an [`Artifact`]: a file
//! is recognised by its first bytes and read whole (`binary`) or as a wheel (`archive`); a
//! directory is walked (`dir`). Files are read with positioned reads (never mapped: a file
//! truncated meanwhile is an error, not SIGBUS), and an input that changed while it was read
//! is refused.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use crate::error::AuditError;
use crate::facts::{Artifact, Binary, InputKind};
use crate::options::{Options, Progress};
use crate::read::archive::read_wheel_source;
use crate::read::binary::{analyse_with, read_kept};
use crate::read::device;
use crate::read::dir::read_dir;
use crate::read::elf;
use crate::read::runpath;
use crate::read::source::{self, Source};
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
        .map_err(|why| AuditError::Changed(path.to_path_buf(), why.to_string()))?;
    Ok(artifact)
}

/// A file input: a wheel by its zip signature; else an ELF or a fatbin, read whole; a file that
/// is both (a polyglot) or neither is refused.
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
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let root = path.parent().unwrap_or(Path::new(".")).to_path_buf();
    let mapped = bytes.is_mapped();
    Ok(if is_elf {
        lone_elf(name, root, &bytes, opts, mapped)
    } else {
        lone_fatbin(name, root, &bytes, opts, mapped)
    })
}

/// A lone ELF, with the libraries it loads that lie beside it on disk.
fn lone_elf(name: String, root: PathBuf, bytes: &[u8], opts: &Options, mapped: bool) -> Artifact {
    let binary = analyse_with(&name, bytes, opts, mapped);
    let beside = libraries_beside(&root, &binary);
    Artifact {
        kind: InputKind::Elf,
        root,
        files: BTreeSet::from([name]),
        binaries: vec![binary],
        beside,
        ..Artifact::empty(InputKind::Elf)
    }
}

/// A lone fatbin: its device code, as a binary without ELF facts.
fn lone_fatbin(
    name: String,
    root: PathBuf,
    bytes: &[u8],
    opts: &Options,
    mapped: bool,
) -> Artifact {
    let mut binary = Binary {
        path: name.clone(),
        size: bytes.len() as u64,
        elf: None,
        device: None,
        relocatable: None,
        elf_error: None,
        device_error: None,
    };
    match device::read_with(bytes, opts.list_kernels, mapped) {
        Ok(d) => binary.device = Some(d),
        Err(e) => binary.device_error = Some(e.to_string()),
    }
    Artifact {
        root,
        files: BTreeSet::from([name]),
        binaries: vec![binary],
        ..Artifact::empty(InputKind::Fatbin)
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
