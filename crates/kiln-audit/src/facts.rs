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

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum InputKind {
    Wheel,
    Elf,
    Directory,
    /// A bare fatbin file (what `nvcc -fatbin` or `fatbinary` writes).
    Fatbin,
}

/// One ELF (or bare fatbin) inside the input.
#[derive(Debug, Clone, Serialize)]
pub struct Binary {
    /// Path relative to the input root ("" parts joined with '/').
    pub path: String,
    pub size: u64,
    pub elf: Option<ElfFacts>,
    /// Loadable device code: `.nv_fatbin`, then what other data sections hold (entries with
    /// `section` set).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device: Option<DeviceCode>,
    /// `__nv_relfatbin`: relocatable device code for a device link, never loaded, counted as
    /// no coverage.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub relocatable: Option<DeviceCode>,
    #[serde(skip)]
    pub elf_error: Option<String>,
    #[serde(skip)]
    pub device_error: Option<String>,
}

/// One `.dist-info/RECORD` as read: its rows, or None when the dist-info has none.
#[derive(Debug, Clone)]
pub struct DistRecord {
    /// `<name>-<version>.dist-info`
    pub dist_info: String,
    pub rows: Option<BTreeMap<String, RecordRow>>,
}

impl DistRecord {
    pub fn record_path(&self) -> String {
        format!("{}/RECORD", self.dist_info)
    }
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct WheelMeta {
    #[serde(serialize_with = "crate::json::dist_info")]
    pub dist_info: Vec<String>,
    /// Tags from the WHEEL file(s), expanded.
    #[serde(serialize_with = "crate::json::tags")]
    pub tags: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub filename: Option<FilenameTags>,
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
    UnsafePath { member: String, why: &'static str },
    /// The member could not be opened (`action` "read") or inflated ("decompress").
    UnreadableMember {
        member: String,
        action: &'static str,
        error: String,
    },
    /// Over `limit` bytes: as declared by the zip (`declared`), or found while inflating (None).
    MemberTooLarge {
        member: String,
        declared: Option<u64>,
        limit: u64,
    },
    /// A RECORD line that is not CSV (1-based line number).
    BadRecordLine {
        record: String,
        line: usize,
        error: String,
    },
    /// A Requires-Dist value that is not PEP 508.
    BadRequiresDist {
        metadata: String,
        value: String,
        error: String,
    },
    /// Python's `zipfile` (so pip) would list, name or place this member differently from the
    /// zip reader the audit used, or would refuse the archive (`member` "" for the whole file).
    ZipDifferential { member: String, why: String },
    /// A member whose Unix mode says symbolic link: pip writes it as a regular file holding the
    /// link target, so it is never analysed and never satisfies a NEEDED.
    SymlinkMember { member: String },
    /// The dist-info pip would refuse or read differently (none, several, misnamed, WHEEL or
    /// METADATA missing, Wheel-Version not 1.x).
    BadDistInfo { dist_info: String, why: String },
    /// More bytes inflated from all members together than the input limit.
    InflatedTooLarge { inflated: u64, limit: u64 },
    /// A count past its hard cap (`what` says which); the rest was not read.
    OverLimit {
        file: String,
        what: &'static str,
        limit: u64,
    },
}

#[derive(Debug, Clone)]
pub struct Artifact {
    pub kind: InputKind,
    pub root: PathBuf,
    /// Every file path in the input (relative, '/'-separated).
    pub files: BTreeSet<String>,
    pub binaries: Vec<Binary>,
    pub wheel: Option<WheelMeta>,
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
            digests: BTreeMap::new(),
            beside: BTreeSet::new(),
            problems: Vec::new(),
        }
    }
}
