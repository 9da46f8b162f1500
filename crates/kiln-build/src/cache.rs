//! Content-addressed cache of nvcc/nvlink outputs: the key covers everything that can change
//! the bytes (source, every project header it includes, flags, target, nvcc version), so a
//! no-op rebuild compiles nothing and an edit recompiles only the jobs that read the edit.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

use crate::error::{io, BuildError};

/// Accumulates the inputs of one job into a key.
pub struct KeyBuilder(Sha256);

impl KeyBuilder {
    /// Starts a key for one kind of job, so jobs of different kinds over the same inputs differ.
    pub fn new(kind: &str) -> KeyBuilder {
        let mut h = Sha256::new();
        h.update(b"kiln-build cache v1\0");
        h.update(kind.as_bytes());
        KeyBuilder(h)
    }

    /// Adds a labelled field; labels and lengths keep distinct inputs from colliding.
    pub fn field(mut self, label: &str, value: &[u8]) -> KeyBuilder {
        self.0.update((label.len() as u64).to_le_bytes());
        self.0.update(label.as_bytes());
        self.0.update((value.len() as u64).to_le_bytes());
        self.0.update(value);
        self
    }

    /// Adds a file's contents as a labelled field.
    pub fn file(self, label: &str, path: &Path) -> Result<KeyBuilder, BuildError> {
        let bytes = std::fs::read(path).map_err(io(format!("reading {}", path.display())))?;
        Ok(self.field(label, &bytes))
    }

    /// The key: the hex SHA-256 of everything added.
    pub fn finish(self) -> String {
        hex::encode(self.0.finalize())
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
            .field("x", b"ab")
            .field("y", b"c")
            .finish();
        let b = KeyBuilder::new("k")
            .field("x", b"a")
            .field("y", b"bc")
            .finish();
        assert_ne!(a, b);
        assert_eq!(
            a,
            KeyBuilder::new("k")
                .field("x", b"ab")
                .field("y", b"c")
                .finish()
        );
    }
}
