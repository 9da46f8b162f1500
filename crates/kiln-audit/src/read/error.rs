//! Why a reader could not read a structure: [`ReadError`]. Readers return it; the caller keeps
//! its text as a fact (`Binary::elf_error`, `device_error`, a [`crate::facts::ReadProblem`]) or
//! turns it into an [`crate::AuditError`]. Each variant's text is the one the report shows.

/// A structure in the input that a reader could not read.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// An ELFCLASS32 file.
    #[error("32-bit ELF: not analysed (CUDA wheels are 64-bit)")]
    Elf32,
    /// The ELF header, section headers or a section table, as the `object` crate reports it.
    #[error("{0}")]
    Elf(#[from] object::read::Error),
    /// A `.dynamic` entry's string (section headers' view).
    #[error("dynamic string: {0}")]
    DynamicString(object::read::Error),
    /// The program headers.
    #[error("program headers: {0}")]
    ProgramHeaders(object::read::Error),
    /// The `PT_DYNAMIC` segment's entries.
    #[error("PT_DYNAMIC: {0}")]
    PtDynamic(object::read::Error),
    /// More DT_NEEDED entries than the limit (the readers' `MAX_NEEDED`).
    #[error("more than {0} DT_NEEDED entries")]
    TooManyNeeded(usize),
    /// The loader's tables (`DT_STRTAB`, `DT_VERNEED`, a string in them) lie outside the file
    /// or its segments: which, and how.
    #[error("{0}")]
    LoaderTable(&'static str),
    /// A Verneed record whose `vn_version` is not 1 (glibc's dl-version.c refuses the file).
    #[error("unsupported version {0} of a Verneed record (ld.so refuses the file)")]
    VerneedVersion(u16),
    /// The version-needs links loop: more `records` or `entries` than the file can hold.
    #[error("version-needs table loops (more {0} than the file can hold)")]
    VerneedLoops(&'static str),
    /// The version-needs table runs past the end of the file.
    #[error("version-needs table runs past the end of the file")]
    VerneedTruncated,
    /// `.nv_fatbin` has no file range.
    #[error("`.nv_fatbin` has no file range")]
    FatbinNoRange,
    /// `.nv_fatbin`'s offset does not fit in memory.
    #[error("`.nv_fatbin` offset overflows")]
    FatbinOffset,
    /// `.nv_fatbin` runs past the end of the file: its size and offset, the file's length.
    #[error("`.nv_fatbin` ({size} bytes at {offset}) runs past the end of the file ({len} bytes)")]
    FatbinPastEnd {
        /// The section's size.
        size: u64,
        /// The section's file offset.
        offset: u64,
        /// The file's length.
        len: usize,
    },
    /// The fatbin container structure itself is broken.
    #[error("{0}")]
    Fatbin(#[from] kiln_fatbin::Error),
    /// Why Python's `zipfile` refuses the archive (its own wording where it has one).
    #[error("{0}")]
    Zipfile(&'static str),
    /// A central-directory entry whose local header offset, with `concat` applied, is negative.
    #[error("member {0:?}: negative header offset")]
    NegativeHeaderOffset(String),
    /// The input could not be stat'ed again to check that it did not change.
    #[error("cannot stat it again: {0}")]
    Restat(std::io::Error),
    /// The input changed while it was read: its length when opened, its length now, whether
    /// its modification time moved.
    #[error("changed while it was read ({opened} bytes when opened, {now} now{})", if *.modified { ", modified since" } else { "" })]
    Changed {
        /// Length when opened.
        opened: u64,
        /// Length now.
        now: u64,
        /// The modification time differs.
        modified: bool,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each text is the one the report showed when the readers returned `String`s.
    #[test]
    fn texts_are_the_reports() {
        let cases = [
            (
                ReadError::Changed {
                    opened: 10,
                    now: 8,
                    modified: true,
                },
                "changed while it was read (10 bytes when opened, 8 now, modified since)",
            ),
            (
                ReadError::Changed {
                    opened: 10,
                    now: 10,
                    modified: false,
                },
                "changed while it was read (10 bytes when opened, 10 now)",
            ),
            (
                ReadError::VerneedLoops("records"),
                "version-needs table loops (more records than the file can hold)",
            ),
            (
                ReadError::FatbinPastEnd {
                    size: 5,
                    offset: 7,
                    len: 9,
                },
                "`.nv_fatbin` (5 bytes at 7) runs past the end of the file (9 bytes)",
            ),
            (
                ReadError::TooManyNeeded(4096),
                "more than 4096 DT_NEEDED entries",
            ),
            (
                ReadError::NegativeHeaderOffset("a/b".into()),
                "member \"a/b\": negative header offset",
            ),
        ];
        for (e, text) in cases {
            assert_eq!(e.to_string(), text);
        }
    }
}
