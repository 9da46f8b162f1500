//! The typed facts the readers produce and the rules judge: what an input holds, never whether
//! that is acceptable. Problems met while reading (an unsafe member path, a member that cannot
//! be inflated, a RECORD line that is not CSV) are facts too ([`ReadProblem`]); only `rules/`
//! turns facts into findings, under the policy.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use serde::Serialize;

pub use crate::read::device::{Compression, DeviceCode, EntryFacts, EntryKind, EntryTarget};
pub use crate::read::elf::{DlopenFeature, ElfFacts};
pub use kiln_pins::{Target, TargetKind, Variant};
pub use kiln_wheel::metadata::Requirement;
pub use kiln_wheel::record::{MemberDigest, RecordRow};
pub use kiln_wheel::tags::FilenameTags;

/// What kind of input was audited.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum InputKind {
    /// A `.whl` archive.
    Wheel,
    /// One ELF file (shared library or executable).
    Elf,
    /// A directory: an unpacked wheel or a site-packages.
    Directory,
    /// A bare fatbin file (what `nvcc -fatbin` or `fatbinary` writes).
    Fatbin,
}

/// One ELF (or bare fatbin) inside the input.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Binary {
    /// Path relative to the input root ("" parts joined with '/').
    pub path: String,
    /// Its size in bytes.
    pub size: u64,
    /// What its ELF headers declare; None for a bare fatbin or an unreadable ELF.
    pub elf: Option<ElfFacts>,
    /// Loadable device code: `.nv_fatbin`, then what other data sections hold (entries with
    /// `section` set).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device: Option<DeviceCode>,
    /// `__nv_relfatbin`: relocatable device code for a device link, never loaded, counted as
    /// no coverage.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub relocatable: Option<DeviceCode>,
    /// Why the ELF could not be read.
    #[serde(skip)]
    pub elf_error: Option<String>,
    /// Why its device code could not be read.
    #[serde(skip)]
    pub device_error: Option<String>,
}

/// One `.dist-info/RECORD` as read: its rows, or None when the dist-info has none.
#[derive(Debug, Clone)]
pub struct DistRecord {
    /// `<name>-<version>.dist-info`
    pub dist_info: String,
    /// Its rows by member path.
    pub rows: Option<BTreeMap<String, RecordRow>>,
}

impl DistRecord {
    /// `<dist-info>/RECORD`.
    pub fn record_path(&self) -> String {
        format!("{}/RECORD", self.dist_info)
    }
}

/// What a wheel's dist-info says about it.
#[derive(Debug, Clone, Default, Serialize, schemars::JsonSchema)]
pub struct WheelMeta {
    /// The top-level `.dist-info` directories.
    #[serde(serialize_with = "crate::json::dist_info")]
    pub dist_info: Vec<String>,
    /// Tags from the WHEEL file(s), expanded.
    #[serde(serialize_with = "crate::json::tags")]
    pub tags: Vec<String>,
    /// The tags the file name claims, when it parses.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub filename: Option<FilenameTags>,
    /// METADATA's Requires-Dist lines.
    #[serde(serialize_with = "crate::json::requires_dist")]
    pub requires_dist: Vec<Requirement>,
    /// Every top-level dist-info's RECORD, in `dist_info` order.
    #[serde(skip)]
    pub records: Vec<DistRecord>,
}

/// Why a file or member of the input could not be read, or only in part.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReadProblem {
    /// A member path that must not be extracted; the member was not read.
    UnsafePath {
        /// The member's path as the archive names it.
        member: String,
        /// What makes it unsafe.
        why: &'static str,
    },
    /// The member could not be opened (`action` "read") or inflated ("decompress").
    UnreadableMember {
        /// The member's path.
        member: String,
        /// "read" or "decompress".
        action: &'static str,
        /// The reader's message.
        error: String,
    },
    /// Over `limit` bytes: as declared by the zip (`declared`), or found while inflating (None).
    MemberTooLarge {
        /// The member's path.
        member: String,
        /// The size the zip declares, when that is what is over.
        declared: Option<u64>,
        /// `--max-member-size`.
        limit: u64,
    },
    /// A RECORD line that is not CSV (1-based line number).
    BadRecordLine {
        /// The RECORD's path.
        record: String,
        /// 1-based line number.
        line: usize,
        /// The CSV parser's message.
        error: String,
    },
    /// A Requires-Dist value that is not PEP 508.
    BadRequiresDist {
        /// The METADATA's path.
        metadata: String,
        /// The value as written.
        value: String,
        /// The PEP 508 parser's message.
        error: String,
    },
    /// Python's `zipfile` (so pip) would list, name or place this member differently from the
    /// zip reader the audit used, or would refuse the archive (`member` "" for the whole file).
    ZipDifferential {
        /// The member's path ("" for the whole file).
        member: String,
        /// How the two readers differ.
        why: String,
    },
    /// A member whose Unix mode says symbolic link: pip writes it as a regular file holding the
    /// link target, so it is never analysed and never satisfies a NEEDED.
    SymlinkMember {
        /// The member's path.
        member: String,
    },
    /// The dist-info pip would refuse or read differently (none, several, misnamed, WHEEL or
    /// METADATA missing, Wheel-Version not 1.x).
    BadDistInfo {
        /// The dist-info directory ("" when there is none).
        dist_info: String,
        /// What pip would do with it.
        why: String,
    },
    /// More bytes inflated from all members together than the input limit.
    InflatedTooLarge {
        /// Bytes inflated when the read stopped.
        inflated: u64,
        /// `--max-total-size`.
        limit: u64,
    },
    /// A count past its hard cap (`what` says which); the rest was not read.
    OverLimit {
        /// The file whose count is over.
        file: String,
        /// What was counted.
        what: &'static str,
        /// The cap.
        limit: u64,
    },
}

/// Everything the readers learned about one input.
#[derive(Debug, Clone)]
pub struct Artifact {
    /// What the input is.
    pub kind: InputKind,
    /// The input's path.
    pub root: PathBuf,
    /// Every file path in the input (relative, '/'-separated).
    pub files: BTreeSet<String>,
    /// Every ELF (or bare fatbin) in it.
    pub binaries: Vec<Binary>,
    /// For a wheel, or a directory holding exactly one `.dist-info` (an unpacked wheel): its
    /// metadata.
    pub wheel: Option<WheelMeta>,
    /// For a directory: every top-level `.dist-info` (a site-packages holds many), each read on
    /// its own, by name. A binary belongs to the distribution whose RECORD lists it.
    pub distributions: Vec<WheelMeta>,
    /// sha256 and size of every member or file read, for RECORD.
    pub digests: BTreeMap<String, MemberDigest>,
    /// For a lone ELF: the `$ORIGIN`-relative library paths that exist next to it on disk
    /// (looked up by the reader, so that rules never touch the file system).
    pub beside: BTreeSet<String>,
    /// Problems met while reading, in reading order.
    pub problems: Vec<ReadProblem>,
}

impl Artifact {
    /// An artifact of `kind` with nothing in it (for callers that assemble facts by hand).
    pub fn empty(kind: InputKind) -> Artifact {
        Artifact {
            kind,
            root: PathBuf::new(),
            files: BTreeSet::new(),
            binaries: Vec::new(),
            wheel: None,
            distributions: Vec::new(),
            digests: BTreeMap::new(),
            beside: BTreeSet::new(),
            problems: Vec::new(),
        }
    }
}
