//! The bytes of one input, read with positioned reads rather than a memory map: a file that is
//! truncated while it is being read gives a short read (an error value), not SIGBUS. A source
//! held in memory (fuzzing, tests) reads the same way.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::FileExt;
use std::sync::Arc;

use crate::read::error::ReadError;

#[derive(Clone)]
pub enum Source<'a> {
    Memory(&'a [u8]),
    /// The file and its length when it was opened.
    File(Arc<File>, u64),
}

impl Source<'_> {
    pub fn len(&self) -> u64 {
        match self {
            Source::Memory(b) => b.len() as u64,
            Source::File(_, len) => *len,
        }
    }

    /// Up to `buf.len()` bytes at `offset` (fewer only at the end).
    pub fn read_at(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Source::Memory(b) => {
                let start = usize::try_from(offset).unwrap_or(usize::MAX).min(b.len());
                let n = buf.len().min(b.len() - start);
                buf[..n].copy_from_slice(&b[start..start + n]);
                Ok(n)
            }
            Source::File(f, _) => {
                let mut done = 0;
                while done < buf.len() {
                    match f.read_at(&mut buf[done..], offset + done as u64) {
                        Ok(0) => break,
                        Ok(n) => done += n,
                        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                        Err(e) => return Err(e),
                    }
                }
                Ok(done)
            }
        }
    }

    /// Exactly `len` bytes at `offset`, or None when the source is shorter (or unreadable).
    pub fn bytes_at(&self, offset: u64, len: usize) -> Option<Vec<u8>> {
        let mut buf = vec![0u8; len];
        match self.read_at(offset, &mut buf) {
            Ok(n) if n == len => Some(buf),
            _ => None,
        }
    }

    /// Err (saying how) when the file is no longer what it was when opened: another length or
    /// modification time. An input rewritten under a running audit was not audited.
    pub fn check_unchanged(&self, opened: &Stamp) -> Result<(), ReadError> {
        let Source::File(f, _) = self else {
            return Ok(());
        };
        let now = Stamp::of(f).map_err(ReadError::Restat)?;
        if now == *opened {
            return Ok(());
        }
        Err(ReadError::Changed {
            opened: opened.len,
            now: now.len,
            modified: now.modified != opened.modified,
        })
    }

    /// A reader for the zip crate: cloneable (one per worker), each with its own position.
    pub fn reader(&self) -> SourceReader<'_> {
        SourceReader {
            source: self.clone(),
            pos: 0,
        }
    }
}

/// A file's length and modification time, to tell whether it changed under the audit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stamp {
    len: u64,
    modified: Option<std::time::SystemTime>,
}

impl Stamp {
    pub fn of(f: &File) -> std::io::Result<Stamp> {
        let m = f.metadata()?;
        Ok(Stamp {
            len: m.len(),
            modified: m.modified().ok(),
        })
    }
}

#[derive(Clone)]
pub struct SourceReader<'a> {
    source: Source<'a>,
    pos: u64,
}

impl Read for SourceReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.source.read_at(self.pos, buf)?;
        self.pos += n as u64;
        Ok(n)
    }
}

impl Seek for SourceReader<'_> {
    fn seek(&mut self, to: SeekFrom) -> std::io::Result<u64> {
        let base = match to {
            SeekFrom::Start(p) => Some(p),
            SeekFrom::End(d) => self.source.len().checked_add_signed(d),
            SeekFrom::Current(d) => self.pos.checked_add_signed(d),
        };
        self.pos = base.ok_or_else(|| {
            std::io::Error::new(std::io::ErrorKind::InvalidInput, "seek before the start")
        })?;
        Ok(self.pos)
    }
}

/// Opens `path` for reading without blocking (a FIFO would otherwise wait forever for a
/// writer) and refuses anything that is not a regular file.
pub fn open_regular(path: &std::path::Path) -> Result<(File, u64), OpenError> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(OpenError::Io)?;
    let meta = file.metadata().map_err(OpenError::Io)?;
    if !meta.file_type().is_file() {
        return Err(OpenError::NotRegular(file_kind(&meta.file_type())));
    }
    Ok((file, meta.len()))
}

#[derive(Debug)]
pub enum OpenError {
    Io(std::io::Error),
    NotRegular(&'static str),
}

impl std::fmt::Display for OpenError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            OpenError::Io(e) => e.fmt(f),
            OpenError::NotRegular(kind) => write!(f, "not a regular file ({kind})"),
        }
    }
}

/// What a non-regular file is, in words.
pub fn file_kind(ft: &std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if ft.is_dir() {
        "a directory"
    } else if ft.is_symlink() {
        "a symbolic link"
    } else if ft.is_fifo() {
        "a FIFO"
    } else if ft.is_socket() {
        "a socket"
    } else if ft.is_block_device() {
        "a block device"
    } else if ft.is_char_device() {
        "a character device"
    } else {
        "a regular file"
    }
}
