//! RECORD (PEP 376/427): `path,sha256=<urlsafe base64, no padding>,size` per member. Read by the
//! audit, written by every step that changes a member; the hash is computed here only.

use std::collections::BTreeMap;

use base64::Engine;
use sha2::{Digest, Sha256};

/// `sha256=<urlsafe base64, no padding>` of a finished sha256 digest.
pub fn record_hash(digest: &[u8]) -> String {
    format!(
        "sha256={}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(digest)
    )
}

/// What a member really is, for comparison against RECORD.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberDigest {
    /// `sha256=…` as RECORD writes it.
    pub hash: String,
    /// Its length in bytes.
    pub size: u64,
}

impl MemberDigest {
    /// The digest of `data`.
    pub fn of(data: &[u8]) -> MemberDigest {
        MemberDigest {
            hash: record_hash(&Sha256::digest(data)),
            size: data.len() as u64,
        }
    }
}

/// A member's digest computed chunk by chunk (the audit inflates members in pieces).
#[derive(Default)]
pub struct Hasher {
    sha: Sha256,
    size: u64,
}

impl Hasher {
    /// Adds the next chunk.
    pub fn update(&mut self, data: &[u8]) {
        self.sha.update(data);
        self.size += data.len() as u64;
    }
    /// Bytes hashed so far.
    pub fn size(&self) -> u64 {
        self.size
    }
    /// The digest of everything added.
    pub fn finish(self) -> MemberDigest {
        MemberDigest {
            hash: record_hash(&self.sha.finalize()),
            size: self.size,
        }
    }
}

/// One RECORD row as written (the hash may be empty, or another algorithm).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordRow {
    /// `sha256=…` (or empty, or another algorithm).
    pub hash: String,
    /// The size column, when present.
    pub size: Option<u64>,
}

/// A RECORD line that is not CSV: its 1-based number and the parser's message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadLine {
    /// 1-based line number.
    pub line: usize,
    /// The CSV parser's message.
    pub error: String,
}

/// Parses RECORD (CSV: path,hash,size). Lines that cannot be read are returned, not dropped.
pub fn parse(text: &[u8]) -> (BTreeMap<String, RecordRow>, Vec<BadLine>) {
    let mut rows = BTreeMap::new();
    let mut bad = Vec::new();
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .from_reader(text);
    for (i, row) in reader.records().enumerate() {
        match row {
            Ok(r) if !r.is_empty() && !r[0].is_empty() => {
                let size = r
                    .get(2)
                    .filter(|s| !s.is_empty())
                    .and_then(|s| s.parse().ok());
                rows.insert(
                    r[0].to_string(),
                    RecordRow {
                        hash: r.get(1).unwrap_or("").to_string(),
                        size,
                    },
                );
            }
            Ok(_) => {}
            Err(e) => bad.push(BadLine {
                line: i + 1,
                error: e.to_string(),
            }),
        }
    }
    (rows, bad)
}

/// One RECORD line for `name` with `data` (the path quoted as CSV when it needs it).
pub fn line(name: &str, data: &[u8]) -> String {
    let d = MemberDigest::of(data);
    format!("{},{},{}\n", csv_field(name), d.hash, d.size)
}

fn csv_field(name: &str) -> String {
    if name.contains([',', '"', '\n']) {
        format!("\"{}\"", name.replace('"', "\"\""))
    } else {
        name.to_string()
    }
}

/// RECORD for `members` (in their order), ending with RECORD's own empty row.
pub fn generate<'a>(
    members: impl IntoIterator<Item = (&'a str, &'a [u8])>,
    record_path: &str,
) -> String {
    let mut text = String::new();
    for (name, data) in members {
        if name != record_path {
            text += &line(name, data);
        }
    }
    text += &format!("{record_path},,\n");
    text
}

/// RECORD with the line for `name` replaced by the hash and size of `data`; every other line is
/// kept byte for byte.
pub fn rehash(record: &str, name: &str, data: &[u8]) -> crate::Result<String> {
    let mut found = false;
    let mut out = String::new();
    for l in record.lines() {
        // Only the last two fields are split off, so a path with a comma in it stays whole.
        let path = l.rsplitn(3, ',').nth(2).unwrap_or(l);
        let unquoted = path
            .strip_prefix('"')
            .and_then(|p| p.strip_suffix('"'))
            .map(|p| p.replace("\"\"", "\""));
        if path == name || unquoted.as_deref() == Some(name) {
            found = true;
            out.push_str(&line(name, data));
        } else {
            out.push_str(l);
            out.push('\n');
        }
    }
    if !found {
        return crate::invalid(format!("RECORD has no line for {name}"));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_is_rehashed_and_the_rest_kept() {
        let rec = "k/__init__.py,sha256=abc,3\nk-0.1.dist-info/METADATA,sha256=old,10\nk-0.1.dist-info/RECORD,,\n";
        let out = rehash(rec, "k-0.1.dist-info/METADATA", b"hello").unwrap();
        // sha256("hello"), urlsafe base64 without padding, as wheels record it.
        assert!(
            out.contains(
                "k-0.1.dist-info/METADATA,sha256=LPJNul-wow4m6DsqxbninhsWHlwfp0JecwQzYpOLmCQ,5\n"
            ),
            "{out}"
        );
        assert!(out.starts_with("k/__init__.py,sha256=abc,3\n") && out.ends_with("RECORD,,\n"));
        assert!(rehash(rec, "missing", b"").is_err());
    }

    #[test]
    fn streamed_and_whole_digests_agree() {
        let mut h = Hasher::default();
        h.update(b"hel");
        h.update(b"lo");
        assert_eq!(h.finish(), MemberDigest::of(b"hello"));
    }

    #[test]
    fn generated_record_parses_back() {
        let text = generate(
            [("a,b.py", b"x".as_slice()), ("d.dist-info/RECORD", b"")],
            "d.dist-info/RECORD",
        );
        let (rows, bad) = parse(text.as_bytes());
        assert!(bad.is_empty());
        assert_eq!(rows["a,b.py"].hash, MemberDigest::of(b"x").hash);
        assert_eq!(rows["a,b.py"].size, Some(1));
        assert_eq!(rows["d.dist-info/RECORD"].hash, "");
        let rehashed = rehash(&text, "a,b.py", b"yy").unwrap();
        assert_eq!(parse(rehashed.as_bytes()).0["a,b.py"].size, Some(2));
    }
}
