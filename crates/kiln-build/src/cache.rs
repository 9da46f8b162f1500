//! Content-addressed cache of nvcc/nvlink outputs: the key covers everything that can change
//! the bytes (source, every project header it includes, flags, target, nvcc version), so a
//! no-op rebuild compiles nothing and an edit recompiles only the jobs that read the edit.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

use crate::error::{io, BuildError};

/// Accumulates the inputs of one job into a key.
///
/// The key is the SHA-256 (hex) of one compact JSON document, `["kiln-build key v2", KIND,
/// [LABEL, VALUE], …]`, where a file's value is `"sha256:" + the hex SHA-256 of its bytes`. That
/// is what Nix computes at evaluation time with `builtins.toJSON`, `builtins.hashString` and
/// `builtins.hashFile` (nix/kernel-jobs.nix), so a job built by a Nix derivation carries the
/// same key kiln-build plans for it (the prebuilt mode checks exactly that).
pub struct KeyBuilder {
    kind: String,
    fields: Vec<(String, String)>,
}

impl KeyBuilder {
    /// Starts a key for one kind of job, so jobs of different kinds over the same inputs differ.
    pub fn new(kind: &str) -> KeyBuilder {
        KeyBuilder {
            kind: kind.to_string(),
            fields: Vec::new(),
        }
    }

    /// Adds a labelled text field (JSON strings: labels and values never run together).
    pub fn field(mut self, label: &str, value: &str) -> KeyBuilder {
        self.fields.push((label.to_string(), value.to_string()));
        self
    }

    /// Adds a file's contents as a labelled field: `sha256:<hex>`.
    pub fn file(self, label: &str, path: &Path) -> Result<KeyBuilder, BuildError> {
        let bytes = std::fs::read(path).map_err(io(format!("reading {}", path.display())))?;
        Ok(self.field(
            label,
            &format!("sha256:{}", hex::encode(Sha256::digest(&bytes))),
        ))
    }

    /// The canonical document the key hashes (what Nix builds with `builtins.toJSON`).
    pub fn document(&self) -> String {
        let mut doc = vec![
            serde_json::Value::from("kiln-build key v2"),
            serde_json::Value::from(self.kind.as_str()),
        ];
        for (label, value) in &self.fields {
            doc.push(serde_json::json!([label, value]));
        }
        serde_json::Value::Array(doc).to_string()
    }

    /// The key: the hex SHA-256 of [`KeyBuilder::document`].
    pub fn finish(self) -> String {
        hex::encode(Sha256::digest(self.document().as_bytes()))
    }
}

/// A directory of `<key>.<ext>` files.
#[derive(Debug, Clone)]
pub struct Cache {
    /// The cache directory.
    pub dir: PathBuf,
}

impl Cache {
    /// Opens the cache at `dir`, creating it if needed.
    pub fn new(dir: PathBuf) -> Result<Cache, BuildError> {
        std::fs::create_dir_all(&dir).map_err(io(format!("creating cache {}", dir.display())))?;
        Ok(Cache { dir })
    }

    /// Where the entry for `key` with extension `ext` lives (`<key>.<ext>`).
    pub fn path(&self, key: &str, ext: &str) -> PathBuf {
        self.dir.join(format!("{key}.{ext}"))
    }

    /// A temporary path next to the final one; [`Cache::commit`] renames it into place so a
    /// killed build never leaves a half-written entry under a valid key.
    pub fn staging(&self, key: &str, ext: &str) -> PathBuf {
        self.dir
            .join(format!("{key}.{}.tmp.{ext}", std::process::id()))
    }

    /// Renames a finished staging file to its entry's path, and returns that path.
    pub fn commit(&self, staging: &Path, key: &str, ext: &str) -> Result<PathBuf, BuildError> {
        let dest = self.path(key, ext);
        std::fs::rename(staging, &dest).map_err(io(format!("storing {}", dest.display())))?;
        Ok(dest)
    }

    /// Keeps the cache's entries (its top-level files) under `max_bytes`: the least recently
    /// used go first, never one of `keep` (this build's own). Returns (entries removed, bytes
    /// left).
    pub fn evict(
        &self,
        max_bytes: u64,
        keep: &std::collections::BTreeSet<PathBuf>,
    ) -> Result<(usize, u64), BuildError> {
        let rd =
            std::fs::read_dir(&self.dir).map_err(io(format!("reading {}", self.dir.display())))?;
        let mut entries: Vec<(std::time::SystemTime, u64, PathBuf)> = rd
            .flatten()
            .filter_map(|e| {
                let m = e.metadata().ok()?;
                let modified = m.modified().ok()?;
                m.is_file().then(|| (modified, m.len(), e.path()))
            })
            .collect();
        let mut total: u64 = entries.iter().map(|(_, n, _)| n).sum();
        entries.sort();
        let mut removed = 0;
        for (_, len, path) in entries {
            if total <= max_bytes {
                break;
            }
            if keep.contains(&path) {
                continue;
            }
            if std::fs::remove_file(&path).is_ok() {
                total -= len;
                removed += 1;
            }
        }
        Ok((removed, total))
    }

    /// The one cache-hit prologue every job shares: `<key>.<ext>` when it exists, else `make`
    /// writes the staging path, which is then committed under the key. A failed `make` leaves
    /// no staging file behind.
    pub fn produce(
        &self,
        key: &str,
        ext: &str,
        make: impl FnOnce(&Path) -> Result<(), BuildError>,
    ) -> Result<Outcome, BuildError> {
        let started = Instant::now();
        let dest = self.path(key, ext);
        if dest.is_file() {
            touch(&dest);
            return Ok(Outcome {
                output: dest,
                cached: true,
                elapsed: started.elapsed(),
                prebuilt: false,
            });
        }
        let staging = self.staging(key, ext);
        if let Err(e) = make(&staging) {
            let _ = std::fs::remove_file(&staging);
            return Err(e);
        }
        let output = self.commit(&staging, key, ext)?;
        Ok(Outcome {
            output,
            cached: false,
            elapsed: started.elapsed(),
            prebuilt: false,
        })
    }
}

/// Marks an entry used now: eviction takes the least recently used first.
pub(crate) fn touch(path: &Path) {
    if let Ok(f) = std::fs::File::options().append(true).open(path) {
        let _ = f.set_modified(std::time::SystemTime::now());
    }
}

/// Gives `existing`'s bytes a second name in the cache (a hard link; a copy where links fail).
pub(crate) fn alias(existing: &Path, name: &Path) -> Result<(), BuildError> {
    if name.is_file() {
        touch(name);
        return Ok(());
    }
    let tmp = name.with_extension(format!("alias.{}", std::process::id()));
    if std::fs::hard_link(existing, &tmp).is_err() {
        std::fs::copy(existing, &tmp).map_err(io(format!("copying {}", existing.display())))?;
    }
    std::fs::rename(&tmp, name).map_err(io(format!("storing {}", name.display())))
}

/// What happened to one job.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// The cache entry holding the job's output.
    pub output: PathBuf,
    /// Whether the output came from the cache rather than a run.
    pub cached: bool,
    /// Time taken, for the progress line (near zero on a hit).
    pub elapsed: Duration,
    /// Taken from a prebuilt directory ([`crate::prebuilt`]) rather than run or cached.
    pub prebuilt: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eviction_drops_the_least_recently_used_and_keeps_this_builds_entries() {
        let d = tempfile::tempdir().unwrap();
        let cache = Cache::new(d.path().to_path_buf()).unwrap();
        let t0 = std::time::SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let mut paths = Vec::new();
        for (i, name) in ["old", "kept-old", "mid", "new"].iter().enumerate() {
            let p = cache.path(name, "cubin");
            std::fs::write(&p, [0u8; 100]).unwrap();
            let f = std::fs::File::options().append(true).open(&p).unwrap();
            f.set_modified(t0 + Duration::from_secs(i as u64)).unwrap();
            paths.push(p);
        }
        let keep = [paths[1].clone()].into_iter().collect();
        let (removed, left) = cache.evict(250, &keep).unwrap();
        assert_eq!((removed, left), (2, 200));
        let exists: Vec<bool> = paths.iter().map(|p| p.exists()).collect();
        assert_eq!(exists, [false, true, false, true]);
        // Under the cap nothing goes.
        assert_eq!(cache.evict(1000, &Default::default()).unwrap(), (0, 200));
    }

    #[test]
    fn fields_are_delimited() {
        let a = KeyBuilder::new("k")
            .field("x", "ab")
            .field("y", "c")
            .finish();
        let b = KeyBuilder::new("k")
            .field("x", "a")
            .field("y", "bc")
            .finish();
        assert_ne!(a, b);
        let again = KeyBuilder::new("k")
            .field("x", "ab")
            .field("y", "c")
            .finish();
        assert_eq!(a, again);
        let quoted = KeyBuilder::new("k").field("x\",[\"y", "c");
        assert_eq!(
            quoted.document(),
            r#"["kiln-build key v2","k",["x\",[\"y","c"]]"#
        );
    }

    /// The document is the one Nix writes with `builtins.toJSON` and hashes with
    /// `builtins.hashString "sha256"`; a file is `"sha256:" + builtins.hashFile "sha256"`.
    /// (The same document through real Nix: tools/xtask/tests/kernel_jobs.rs.)
    #[test]
    fn the_key_is_the_sha256_of_a_compact_json_document() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("a.cu"), "x").unwrap();
        let k = KeyBuilder::new("compile")
            .field("nvcc", "13.0.88")
            .file("source", &d.path().join("a.cu"))
            .unwrap();
        // sha256("x")
        let x = "2d711642b726b04401627ca9fbac32f5c8530fb1903cc4db02258717921a4881";
        assert_eq!(
            k.document(),
            format!(
                r#"["kiln-build key v2","compile",["nvcc","13.0.88"],["source","sha256:{x}"]]"#
            )
        );
        let doc = k.document();
        assert_eq!(k.finish(), hex::encode(Sha256::digest(doc.as_bytes())));
    }
}
