//! One wheel member read: inflated in chunks (on a second thread for a large one), hashed for
//! RECORD, and kept only when it is analysed (an ELF, a dist-info text), under the member and
//! total size limits; what it inflates to is compared with what the central directory declares.

use std::io::Read;
use std::sync::atomic::{AtomicU64, Ordering};

use kiln_wheel::record::{Hasher, MemberDigest};

use crate::facts::{Binary, ReadProblem};
use crate::options::{Options, Progress};
use crate::read::binary::analyse_with;
use crate::read::dist_info::{is_dist_info_file, DIST_INFO_TEXT_LIMIT};
use crate::read::elf;
use crate::read::source;
use crate::read::spill;

/// What reading one member gave: its digest, its facts (an ELF) or text (a dist-info file), or
/// the problem that stopped it.
pub(crate) struct MemberResult {
    pub(crate) name: String,
    pub(crate) digest: Option<MemberDigest>,
    pub(crate) binary: Option<Binary>,
    pub(crate) text: Option<Vec<u8>>,
    pub(crate) problem: Option<ReadProblem>,
}

impl MemberResult {
    fn named(name: String) -> MemberResult {
        MemberResult {
            name,
            digest: None,
            binary: None,
            text: None,
            problem: None,
        }
    }

    fn failed(name: String, problem: ReadProblem) -> MemberResult {
        MemberResult {
            problem: Some(problem),
            ..MemberResult::named(name)
        }
    }
}

/// Reads member `i`: inflated in one pass into a [`Sink`] (on two threads past
/// [`spill::IN_MEMORY`]), then [`finish`]ed.
pub(crate) fn read_member(
    ar: &mut zip::ZipArchive<source::SourceReader<'_>>,
    i: usize,
    opts: &Options,
    inflated: &AtomicU64,
    progress: &dyn Progress,
) -> MemberResult {
    let fallback_name = ar.name_for_index(i).unwrap_or("?").to_string();
    let mut file = match ar.by_index(i) {
        Ok(f) => f,
        Err(e) => {
            let problem = ReadProblem::UnreadableMember {
                member: fallback_name.clone(),
                action: "read",
                error: e.to_string(),
            };
            return MemberResult::failed(fallback_name, problem);
        }
    };
    let name = file.name().to_string();
    let compressed = file.compressed_size();
    let declared = file.size();
    if declared > opts.max_member_size {
        let problem = ReadProblem::MemberTooLarge {
            member: name.clone(),
            declared: Some(declared),
            limit: opts.max_member_size,
        };
        return MemberResult::failed(name, problem);
    }
    let mut sink = Sink::new(&name, declared, opts, inflated);
    // Python's zipfile reads exactly the declared size: inflating one byte past it proves the
    // claim false, and bounds the work by the declared sizes, which were checked against
    // --max-total-size before anything was inflated (a member claiming 0 bytes that inflates
    // to 4 GiB costs one byte, not 4 GiB).
    let mut limited = (&mut file).take(declared + 1);
    // A large member is inflated on this thread and hashed and kept on a second one: NCCL's
    // 240 MB library was a third of its audit, and hashing and spilling took 0.2 s of its 0.55.
    let drained = if declared > spill::IN_MEMORY as u64 {
        drain_pipelined(&mut limited, |data| sink.consume(data))
    } else {
        drain(&mut limited, |data| sink.consume(data))
    };
    if let Err(e) = drained {
        let problem = unreadable_member(&name, "decompress", e);
        return MemberResult::failed(name, problem);
    }
    if sink.over_total {
        return MemberResult::named(name);
    }
    if let Some(problem) = sink.stop.take() {
        return MemberResult::failed(name, problem);
    }
    progress.advance(compressed);
    finish(name, declared, sink, opts)
}

/// The consumer of one member's inflated bytes: hashes every chunk while it is in cache, keeps
/// the bytes only for members that are analysed (ELF files, dist-info metadata), and stops at
/// the limits. Whether a member is an ELF is decided from its first 4 bytes, however few bytes
/// the first read returns.
struct Sink<'a> {
    name: String,
    dist_info: bool,
    keep_limit: u64,
    opts: &'a Options,
    inflated: &'a AtomicU64,
    kept: spill::Keeper,
    hasher: Hasher,
    keep: Option<bool>,
    /// What stopped the inflation, when a limit or the spill did.
    stop: Option<ReadProblem>,
    /// The wheel's inflated total passed `--max-total-size` (the wheel-level problem names it).
    over_total: bool,
}

impl<'a> Sink<'a> {
    fn new(name: &str, declared: u64, opts: &'a Options, inflated: &'a AtomicU64) -> Sink<'a> {
        let dist_info = is_dist_info_file(name);
        Sink {
            name: name.to_string(),
            dist_info,
            keep_limit: if dist_info {
                DIST_INFO_TEXT_LIMIT
            } else {
                opts.max_member_size
            },
            opts,
            inflated,
            kept: spill::Keeper::for_size(declared),
            hasher: Hasher::default(),
            keep: None,
            stop: None,
            over_total: false,
        }
    }

    /// Takes one chunk; false stops the inflation.
    fn consume(&mut self, data: &[u8]) -> bool {
        self.hasher.update(data);
        let total = self
            .inflated
            .fetch_add(data.len() as u64, Ordering::Relaxed)
            + data.len() as u64;
        if total > self.opts.max_total_size {
            // Counted in `inflated`; the wheel-level problem names the total.
            self.over_total = true;
            return false;
        }
        if let Err(e) = self.store(data) {
            self.stop = Some(unreadable_member(
                &self.name,
                "spill to a temporary file",
                e,
            ));
            return false;
        }
        if self.keep == Some(true) && self.kept.len() > self.keep_limit {
            self.stop = Some(ReadProblem::MemberTooLarge {
                member: self.name.clone(),
                declared: None,
                limit: self.keep_limit,
            });
            return false;
        }
        true
    }

    /// Keeps `data` when the member is analysed, deciding that from its first 4 bytes.
    fn store(&mut self, data: &[u8]) -> std::io::Result<()> {
        match self.keep {
            Some(true) => self.kept.extend(data),
            Some(false) => Ok(()),
            None => {
                let s = self.kept.extend(data);
                if self.kept.len() >= 4 {
                    let k = elf::is_elf(self.kept.head(4)) || self.dist_info;
                    if !k {
                        self.kept.stop();
                    }
                    self.keep = Some(k);
                }
                s
            }
        }
    }
}

/// A member inflated whole: its size against the member limit and the declared size, its
/// digest, and its facts (an ELF) or text (a dist-info file).
fn finish(name: String, declared: u64, sink: Sink, opts: &Options) -> MemberResult {
    let Sink {
        hasher,
        kept,
        dist_info,
        ..
    } = sink;
    let size = hasher.size();
    if size > opts.max_member_size {
        let problem = ReadProblem::MemberTooLarge {
            member: name.clone(),
            declared: None,
            limit: opts.max_member_size,
        };
        return MemberResult::failed(name, problem);
    }
    let mut r = MemberResult::named(name);
    // Python's zipfile reads exactly the declared size and checks its CRC over it: a member
    // that inflates to another size is one pip refuses (or installs cut short).
    if size != declared {
        let inflates = if size > declared {
            "to more bytes (inflation stopped one past the claim)".to_string()
        } else {
            format!("to {size} bytes")
        };
        r.problem = Some(ReadProblem::ZipDifferential {
            member: r.name.clone(),
            why: format!(
                "it inflates {inflates}, but the central directory declares {declared} (Python's zipfile reads {declared} and checks its CRC over them)"
            ),
        });
    }
    r.digest = Some(hasher.finish());
    let bytes = match kept.finish() {
        Ok(b) => b,
        Err(e) => {
            r.problem = Some(unreadable_member(&r.name, "map the spilled member", e));
            return r;
        }
    };
    if elf::is_elf(&bytes) {
        r.binary = Some(analyse_with(&r.name, &bytes, opts, bytes.is_mapped()));
        bytes.recycle();
    } else if dist_info {
        r.text = Some(bytes.into_vec());
    }
    r
}

pub(crate) fn unreadable_member(
    member: &str,
    action: &'static str,
    e: std::io::Error,
) -> ReadProblem {
    ReadProblem::UnreadableMember {
        member: member.to_string(),
        action,
        error: e.to_string(),
    }
}

/// Bytes inflated per chunk.
const CHUNK: usize = 256 << 10;

/// Fills `chunk` from `reader` as far as it goes; the count is short only at the end.
fn fill(reader: &mut impl Read, chunk: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < chunk.len() {
        match reader.read(&mut chunk[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

/// Reads `reader` to its end, handing each chunk to `consume` until it returns false.
fn drain(reader: &mut impl Read, mut consume: impl FnMut(&[u8]) -> bool) -> std::io::Result<()> {
    thread_local! {
        // One chunk per worker thread: a fresh 256 KiB buffer per member is mapped, faulted in
        // and unmapped each time (cupy has 2,438 members).
        static CHUNK_BUF: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
    }
    CHUNK_BUF.with_borrow_mut(|chunk| {
        chunk.resize(CHUNK, 0);
        loop {
            let n = fill(reader, chunk)?;
            if n == 0 || !consume(&chunk[..n]) {
                return Ok(());
            }
        }
    })
}

/// [`drain`] with `consume` on a second thread, fed whole chunks through a few recycled
/// buffers (the inflater's reads return ~10 KB each; handing those over one by one cost more
/// than the overlap saved).
fn drain_pipelined(
    reader: &mut impl Read,
    mut consume: impl FnMut(&[u8]) -> bool + Send,
) -> std::io::Result<()> {
    use std::sync::mpsc::sync_channel;
    const BUFFERS: usize = 4;
    let (full_tx, full_rx) = sync_channel::<(Vec<u8>, usize)>(BUFFERS);
    let (empty_tx, empty_rx) = sync_channel::<Vec<u8>>(BUFFERS);
    for _ in 0..BUFFERS {
        empty_tx
            .send(vec![0u8; CHUNK])
            .expect("room for every buffer");
    }
    // `move`: the reader's channel ends are dropped when this closure returns (on an error too),
    // before the scope waits for the consumer, whose loop ends with them.
    std::thread::scope(move |scope| {
        scope.spawn(move || {
            for (chunk, n) in full_rx {
                // Returning drops `full_rx`, which ends the reader's loop below.
                if !consume(&chunk[..n]) {
                    return;
                }
                // Fails once the reader is done; the chunks still queued are consumed all the
                // same.
                let _ = empty_tx.send(chunk);
            }
        });
        // A closed channel means the consumer stopped: the member's outcome is its to tell.
        while let Ok(mut chunk) = empty_rx.recv() {
            let n = fill(reader, &mut chunk)?;
            if n == 0 || full_tx.send((chunk, n)).is_err() {
                break;
            }
        }
        Ok(())
    })
}
