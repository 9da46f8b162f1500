//! The zip archive: which member paths are safe, which are bytecode, and a wheel held in memory
//! for tools that edit members and write it back with a RECORD that matches.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use crate::{Error, Result};

/// Why a member path must not be extracted, or None when it is safe.
pub fn unsafe_path(name: &str) -> Option<&'static str> {
    if name.starts_with('/') || name.starts_with('\\') {
        return Some("absolute path");
    }
    if name.len() >= 2 && name.as_bytes()[1] == b':' {
        return Some("drive-letter path");
    }
    if name.contains('\0') {
        return Some("NUL in path");
    }
    if name.split(['/', '\\']).any(|c| c == "..") {
        return Some("`..` component");
    }
    None
}

/// `__pycache__/` entries and compiled bytecode: they come from local runs and make a wheel
/// unreproducible.
pub fn is_bytecode(name: &str) -> bool {
    name.split('/').any(|c| c == "__pycache__") || name.ends_with(".pyc") || name.ends_with(".pyo")
}

/// The top-level `<name>-<version>.dist-info` among member names.
pub fn dist_info<'a>(names: impl IntoIterator<Item = &'a str>) -> Option<String> {
    names
        .into_iter()
        .filter_map(|n| n.split_once('/').map(|(d, _)| d))
        .find(|d| d.ends_with(".dist-info"))
        .map(String::from)
}

fn io(path: &Path, e: std::io::Error) -> Error {
    Error::Io(path.display().to_string(), e)
}
fn zip_err(path: &Path, e: zip::result::ZipError) -> Error {
    Error::Zip(path.display().to_string(), e)
}

/// A wheel held in memory: its file name and members in archive order.
#[derive(Clone)]
pub struct Wheel {
    /// The wheel's file name (no directory).
    pub file_name: String,
    /// (path, bytes) of every file member, in archive order.
    pub members: Vec<(String, Vec<u8>)>,
}

impl Wheel {
    /// Reads every file member of the wheel at `path`.
    pub fn read(path: &Path) -> Result<Wheel> {
        let file = std::fs::File::open(path).map_err(|e| io(path, e))?;
        let mut zip = zip::ZipArchive::new(file).map_err(|e| zip_err(path, e))?;
        let mut members = Vec::new();
        for i in 0..zip.len() {
            let mut f = zip.by_index(i).map_err(|e| zip_err(path, e))?;
            if f.is_dir() {
                continue;
            }
            let mut data = Vec::new();
            f.read_to_end(&mut data).map_err(|e| io(path, e))?;
            members.push((f.name().to_string(), data));
        }
        let file_name = path
            .file_name()
            .ok_or_else(|| Error::Invalid(format!("{} has no file name", path.display())))?
            .to_string_lossy()
            .into_owned();
        Ok(Wheel { file_name, members })
    }

    /// The bytes of member `name`.
    pub fn get(&self, name: &str) -> Option<&Vec<u8>> {
        self.members.iter().find(|(n, _)| n == name).map(|(_, d)| d)
    }

    /// Replaces member `name`, or appends it.
    pub fn set(&mut self, name: &str, data: Vec<u8>) {
        match self.members.iter_mut().find(|(n, _)| n == name) {
            Some(m) => m.1 = data,
            None => self.members.push((name.to_string(), data)),
        }
    }

    /// Drops member `name`.
    pub fn remove(&mut self, name: &str) {
        self.members.retain(|(n, _)| n != name);
    }

    /// `<name>-<version>.dist-info` (the one holding WHEEL).
    pub fn dist_info(&self) -> Result<String> {
        self.members
            .iter()
            .find_map(|(n, _)| {
                n.strip_suffix("/WHEEL")
                    .filter(|d| d.ends_with(".dist-info") && !d.contains('/'))
            })
            .map(String::from)
            .ok_or_else(|| Error::Invalid("wheel has no .dist-info/WHEEL".into()))
    }

    /// RECORD rewritten from the members' real content (moved to the end of the archive).
    pub fn regenerate_record(&mut self) -> Result<()> {
        let record = format!("{}/RECORD", self.dist_info()?);
        let text = crate::record::generate(
            self.members.iter().map(|(n, d)| (n.as_str(), d.as_slice())),
            &record,
        );
        self.remove(&record);
        self.members.push((record, text.into_bytes()));
        Ok(())
    }

    /// Writes the archive as is (RECORD untouched) into `dir`; ELF members are executable.
    pub fn write(&self, dir: &Path) -> Result<PathBuf> {
        let path = dir.join(&self.file_name);
        let file = std::fs::File::create(&path).map_err(|e| io(&path, e))?;
        let mut zip = zip::ZipWriter::new(file);
        for (name, data) in &self.members {
            let mode = if data.starts_with(b"\x7fELF") {
                0o755
            } else {
                0o644
            };
            let opts = zip::write::SimpleFileOptions::default()
                .compression_method(zip::CompressionMethod::Deflated)
                .unix_permissions(mode);
            zip.start_file(name.as_str(), opts)
                .map_err(|e| zip_err(&path, e))?;
            zip.write_all(data).map_err(|e| io(&path, e))?;
        }
        zip.finish().map_err(|e| zip_err(&path, e))?;
        Ok(path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unsafe_paths() {
        for bad in ["../x", "a/../../x", "/etc/passwd", "C:/x", "a\\..\\b"] {
            assert!(unsafe_path(bad).is_some(), "{bad}");
        }
        for ok in ["a/b.so", "a..b/c", "pkg.libs/libx.so.1"] {
            assert!(unsafe_path(ok).is_none(), "{ok}");
        }
    }

    #[test]
    fn bytecode_is_recognised() {
        assert!(is_bytecode("kiln/__pycache__/_errors.cpython-311.pyc"));
        assert!(is_bytecode("kiln/x.pyc"));
        assert!(!is_bytecode("kiln/_errors.py") && !is_bytecode("kiln/_kiln.abi3.so"));
    }
}
