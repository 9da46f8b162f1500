//! Two wheels compared member by member: which members only one holds, and for a member whose
//! bytes differ, the first differing offset, the bytes around it and — for an ELF file — the
//! section it lies in and every section whose bytes differ. Members with equal bytes but
//! different zip entries (time stamp, mode, position) are named too. `kiln wheel diff` prints
//! this; `cargo xtask repro` uses it to explain two builds that should be byte-identical.
//!
//! Both wheels are read into memory whole: this is for wheels one trusts (one's own builds),
//! not the hostile-input path `kiln audit` is.

use std::collections::BTreeMap;
use std::fmt;
use std::io::Read;
use std::path::{Path, PathBuf};

use object::{Object, ObjectSection};
use sha2::{Digest, Sha256};

/// A wheel could not be compared: which file and why.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The file could not be read.
    #[error("{}: {source}", path.display())]
    Io {
        /// The wheel's path.
        path: PathBuf,
        /// The read error.
        source: std::io::Error,
    },
    /// The file is not a zip archive, or one of its members cannot be read.
    #[error("{}: {source}", path.display())]
    Zip {
        /// The wheel's path.
        path: PathBuf,
        /// The zip error.
        source: zip::result::ZipError,
    },
}

/// One member that differs.
#[derive(Debug, Clone, PartialEq)]
pub enum Difference {
    /// A member only the first wheel holds.
    OnlyInFirst(String),
    /// A member only the second wheel holds.
    OnlyInSecond(String),
    /// Same name, different bytes: the first differing offset and where it lies.
    Content {
        /// The member's name.
        name: String,
        /// The first differing byte (the shorter one's length when one is a prefix of the other).
        offset: u64,
        /// The member's size in each wheel.
        sizes: (u64, u64),
        /// Where the offset lies: the ELF section, then the sections whose bytes differ.
        location: String,
        /// The first wheel's bytes around the offset (text when printable, hex otherwise).
        first: String,
        /// The second wheel's bytes around the offset.
        second: String,
    },
    /// Same bytes, different zip entry metadata (time stamp, mode, order).
    Entry {
        /// The member's name.
        name: String,
        /// What differs, for a person.
        what: String,
    },
}

/// The comparison of two wheels.
#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    /// Each wheel file's SHA-256, hex.
    pub sha256: (String, String),
    /// How many members the first wheel holds.
    pub members: usize,
    /// Every member that differs, in name order (members only in the second last).
    pub differences: Vec<Difference>,
}

impl Report {
    /// Whether the two files are byte-identical.
    pub fn identical(&self) -> bool {
        self.sha256.0 == self.sha256.1
    }

    /// The report as JSON: `identical`, `sha256`, `members`, `differences` (each with `member`
    /// and `kind`: `only-in-first`, `only-in-second`, `content` or `entry`).
    pub fn to_json(&self) -> serde_json::Value {
        use serde_json::json;
        let diffs: Vec<serde_json::Value> = self
            .differences
            .iter()
            .map(|d| match d {
                Difference::OnlyInFirst(n) => json!({"member": n, "kind": "only-in-first"}),
                Difference::OnlyInSecond(n) => json!({"member": n, "kind": "only-in-second"}),
                Difference::Content { name, offset, sizes, location, first, second } => json!({
                    "member": name, "kind": "content", "offset": offset, "sizes": [sizes.0, sizes.1],
                    "location": location, "first_bytes": first, "second_bytes": second}),
                Difference::Entry { name, what } => json!({"member": name, "kind": "entry", "what": what}),
            })
            .collect();
        json!({"identical": self.identical(), "sha256": [self.sha256.0, self.sha256.1],
            "members": self.members, "differences": diffs})
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.identical() {
            return write!(
                f,
                "identical: the two wheels are byte-identical ({} members, sha256 {})",
                self.members, self.sha256.0
            );
        }
        writeln!(f, "differ: sha256 {} vs {}", self.sha256.0, self.sha256.1)?;
        if self.differences.is_empty() {
            writeln!(
                f,
                "  every member agrees (name, bytes, time stamp, mode, position): the zip \
                 container itself differs (compression, extra fields, comments)"
            )?;
        }
        for d in &self.differences {
            match d {
                Difference::OnlyInFirst(n) => writeln!(f, "  {n}: only in the first wheel")?,
                Difference::OnlyInSecond(n) => writeln!(f, "  {n}: only in the second wheel")?,
                Difference::Content { name, offset, sizes, location, first, second } => writeln!(
                    f,
                    "  {name}: content differs first at byte {offset:#x} ({location}; sizes {} / {})\n      first:  {first}\n      second: {second}",
                    sizes.0, sizes.1
                )?,
                Difference::Entry { name, what } => writeln!(f, "  {name}: zip entry differs: {what}")?,
            }
        }
        Ok(())
    }
}

/// Compares the wheels at `first` and `second`.
pub fn wheels(first: &Path, second: &Path) -> Result<Report, Error> {
    let sha256 = (sha256(first)?, sha256(second)?);
    let (a, b) = (read_members(first)?, read_members(second)?);
    let mut differences = Vec::new();
    for (name, ma) in &a {
        match b.get(name) {
            None => differences.push(Difference::OnlyInFirst(name.clone())),
            Some(mb) if ma.data != mb.data => differences.push(content(name, &ma.data, &mb.data)),
            Some(mb) => {
                let mut what = Vec::new();
                if ma.modified != mb.modified {
                    what.push(format!("time stamp {:?} vs {:?}", ma.modified, mb.modified));
                }
                if ma.mode != mb.mode {
                    what.push(format!("mode {:?} vs {:?}", ma.mode, mb.mode));
                }
                if ma.index != mb.index {
                    what.push(format!("position {} vs {}", ma.index, mb.index));
                }
                if !what.is_empty() {
                    differences.push(Difference::Entry {
                        name: name.clone(),
                        what: what.join(", "),
                    });
                }
            }
        }
    }
    for name in b.keys().filter(|n| !a.contains_key(*n)) {
        differences.push(Difference::OnlyInSecond(name.clone()));
    }
    Ok(Report {
        sha256,
        members: a.len(),
        differences,
    })
}

/// The difference of one member whose bytes differ.
fn content(name: &str, a: &[u8], b: &[u8]) -> Difference {
    let offset = a
        .iter()
        .zip(b)
        .position(|(x, y)| x != y)
        .unwrap_or(a.len().min(b.len()));
    let mut location = location(a, offset as u64);
    let sections = differing_sections(a, b);
    if !sections.is_empty() {
        location = format!(
            "{location}; ELF sections whose bytes differ: {}",
            sections.join(", ")
        );
    }
    Difference::Content {
        name: name.to_string(),
        offset: offset as u64,
        sizes: (a.len() as u64, b.len() as u64),
        location,
        first: excerpt(a, offset),
        second: excerpt(b, offset),
    }
}

struct Member {
    data: Vec<u8>,
    index: usize,
    modified: Option<String>,
    mode: Option<u32>,
}

fn read_members(path: &Path) -> Result<BTreeMap<String, Member>, Error> {
    let zip_error = |source| Error::Zip {
        path: path.to_path_buf(),
        source,
    };
    let file = std::fs::File::open(path).map_err(|source| Error::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let mut zip = zip::ZipArchive::new(file).map_err(zip_error)?;
    let mut out = BTreeMap::new();
    for index in 0..zip.len() {
        let mut e = zip.by_index(index).map_err(zip_error)?;
        let mut data = Vec::new();
        e.read_to_end(&mut data)
            .map_err(|e| zip_error(zip::result::ZipError::Io(e)))?;
        let modified = e.last_modified().map(|t| format!("{t:?}"));
        let mode = e.unix_mode();
        out.insert(
            e.name().to_string(),
            Member {
                data,
                index,
                modified,
                mode,
            },
        );
    }
    Ok(out)
}

fn sha256(path: &Path) -> Result<String, Error> {
    let bytes = std::fs::read(path).map_err(|source| Error::Io {
        path: path.to_path_buf(),
        source,
    })?;
    Ok(hex(&Sha256::digest(bytes)))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Shows the bytes around `offset`, as text when they are printable.
fn excerpt(data: &[u8], offset: usize) -> String {
    let start = offset.saturating_sub(16);
    let end = (offset + 32).min(data.len());
    let slice = &data[start.min(data.len())..end];
    if slice.iter().all(|b| b.is_ascii_graphic() || *b == b' ') {
        format!("{:?}", String::from_utf8_lossy(slice))
    } else {
        hex(slice)
    }
}

/// The ELF section holding file offset `offset`, when `data` is an ELF file.
fn location(data: &[u8], offset: u64) -> String {
    let Ok(file) = object::File::parse(data) else {
        return "not an ELF file".into();
    };
    for s in file.sections() {
        if let Some((start, size)) = s.file_range() {
            if offset >= start && offset < start + size {
                return format!("ELF section {}", s.name().unwrap_or("?"));
            }
        }
    }
    "ELF, outside any section".into()
}

/// For two ELF files: the sections (by name) whose contents differ — offsets shift when one
/// section grows, so the first differing byte alone often points at the ELF header.
fn differing_sections(a: &[u8], b: &[u8]) -> Vec<String> {
    let (Ok(fa), Ok(fb)) = (object::File::parse(a), object::File::parse(b)) else {
        return Vec::new();
    };
    // Sections that changed size are the likely cause; the rest often differ only because
    // addresses after them moved. List the former first, marked.
    let (mut resized, mut changed) = (Vec::new(), Vec::new());
    for sa in fa.sections() {
        let Ok(name) = sa.name() else { continue };
        match fb.section_by_name(name) {
            None => resized.push(format!("{name} (only in the first)")),
            Some(sb) if sa.size() != sb.size() => {
                resized.push(format!("{name} (size {} vs {})", sa.size(), sb.size()))
            }
            Some(sb) if sa.data().ok() != sb.data().ok() => changed.push(name.to_string()),
            Some(_) => {}
        }
    }
    resized.extend(changed);
    resized
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn wheel(path: &Path, members: &[(&str, &[u8])], time: zip::DateTime) {
        let mut w = zip::ZipWriter::new(std::fs::File::create(path).unwrap());
        for (name, data) in members {
            let opts = zip::write::SimpleFileOptions::default().last_modified_time(time);
            w.start_file(*name, opts).unwrap();
            w.write_all(data).unwrap();
        }
        w.finish().unwrap();
    }

    #[test]
    fn identical_wheels_are_reported_identical() {
        let d = tempfile::tempdir().unwrap();
        let t = zip::DateTime::default();
        wheel(&d.path().join("a.whl"), &[("kiln/__init__.py", b"x")], t);
        wheel(&d.path().join("b.whl"), &[("kiln/__init__.py", b"x")], t);
        let r = wheels(&d.path().join("a.whl"), &d.path().join("b.whl")).unwrap();
        assert!(r.identical() && r.differences.is_empty(), "{r}");
    }

    #[test]
    fn a_time_stamp_in_the_manifest_names_the_member_and_the_bytes() {
        let d = tempfile::tempdir().unwrap();
        let t = zip::DateTime::default();
        let m1 = br#"{"schema":1,"built_at":"2026-11-30T11:00:00Z","targets":[]}"#;
        let m2 = br#"{"schema":1,"built_at":"2026-11-30T11:07:42Z","targets":[]}"#;
        wheel(
            &d.path().join("a.whl"),
            &[("kiln/__init__.py", b"x"), ("kiln/manifest.json", m1)],
            t,
        );
        wheel(
            &d.path().join("b.whl"),
            &[("kiln/__init__.py", b"x"), ("kiln/manifest.json", m2)],
            t,
        );
        let r = wheels(&d.path().join("a.whl"), &d.path().join("b.whl")).unwrap();
        assert!(!r.identical());
        assert_eq!(r.differences.len(), 1, "{r}");
        let text = r.to_string();
        assert!(
            text.contains("kiln/manifest.json: content differs first at byte 0x27"),
            "{text}"
        );
        assert!(
            text.contains("11:00:00") && text.contains("11:07:42"),
            "{text}"
        );
    }

    #[test]
    fn zip_time_stamps_alone_are_reported_as_entry_differences() {
        let d = tempfile::tempdir().unwrap();
        let t2 = zip::DateTime::from_date_and_time(2026, 11, 30, 11, 0, 0).unwrap();
        wheel(
            &d.path().join("a.whl"),
            &[("kiln/x.py", b"x")],
            zip::DateTime::default(),
        );
        wheel(&d.path().join("b.whl"), &[("kiln/x.py", b"x")], t2);
        let r = wheels(&d.path().join("a.whl"), &d.path().join("b.whl")).unwrap();
        assert!(!r.identical());
        assert!(
            matches!(&r.differences[0], Difference::Entry { name, what } if name == "kiln/x.py" && what.contains("time stamp")),
            "{r}"
        );
    }

    #[test]
    fn equal_members_in_a_different_container_say_so() {
        let d = tempfile::tempdir().unwrap();
        for (name, method) in [
            ("a.whl", zip::CompressionMethod::Stored),
            ("b.whl", zip::CompressionMethod::Deflated),
        ] {
            let mut w = zip::ZipWriter::new(std::fs::File::create(d.path().join(name)).unwrap());
            let opts = zip::write::SimpleFileOptions::default().compression_method(method);
            w.start_file("kiln/x.py", opts).unwrap();
            w.write_all(&[b'x'; 100]).unwrap();
            w.finish().unwrap();
        }
        let r = wheels(&d.path().join("a.whl"), &d.path().join("b.whl")).unwrap();
        assert!(!r.identical() && r.differences.is_empty(), "{r}");
        assert!(
            r.to_string().contains("the zip container itself differs"),
            "{r}"
        );
    }

    #[test]
    fn members_only_in_one_wheel_are_named_with_their_side() {
        let d = tempfile::tempdir().unwrap();
        let t = zip::DateTime::default();
        wheel(
            &d.path().join("a.whl"),
            &[("a.py", b"x"), ("b.py", b"y")],
            t,
        );
        wheel(
            &d.path().join("b.whl"),
            &[("b.py", b"y"), ("c.py", b"z")],
            t,
        );
        let r = wheels(&d.path().join("a.whl"), &d.path().join("b.whl")).unwrap();
        assert_eq!(r.differences[0], Difference::OnlyInFirst("a.py".into()));
        assert_eq!(
            r.differences.last(),
            Some(&Difference::OnlyInSecond("c.py".into()))
        );
        let json = r.to_json();
        assert_eq!(json["identical"], false);
        assert_eq!(json["differences"][0]["kind"], "only-in-first");
    }

    #[test]
    fn an_unreadable_or_non_zip_input_is_a_typed_error_naming_the_file() {
        let d = tempfile::tempdir().unwrap();
        let text = d.path().join("not.whl");
        std::fs::write(&text, b"not a zip").unwrap();
        let missing = d.path().join("missing.whl");
        assert!(matches!(wheels(&missing, &text), Err(Error::Io { path, .. }) if path == missing));
        let err = wheels(&text, &text).unwrap_err();
        assert!(
            matches!(&err, Error::Zip { path, .. } if *path == text),
            "{err}"
        );
        assert!(
            err.to_string().starts_with(&text.display().to_string()),
            "{err}"
        );
    }

    #[test]
    fn differing_elf_bytes_are_located_by_section() {
        // This test binary is an ELF file: locate a byte of its .text.
        let exe = std::fs::read(std::env::current_exe().unwrap()).unwrap();
        let file = object::File::parse(&*exe).unwrap();
        let text = file.section_by_name(".text").unwrap();
        let (start, _) = text.file_range().unwrap();
        assert_eq!(location(&exe, start + 1), "ELF section .text");
        assert_eq!(location(b"plain text", 0), "not an ELF file");
    }
}
