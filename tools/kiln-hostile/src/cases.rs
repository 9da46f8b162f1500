//! The hostile cases, each with the verdict `kiln audit` must give. Classes follow issue 17:
//! `zip` (parser differentials), `sniff` (content classification, polyglots), `elf` (linkage
//! as ld.so sees it), `device` (device code judged by its payload), `special` (special and
//! unreadable files), `bounds` (cost), `escape` (what reaches the terminal), and `baseline`
//! (clean inputs that must pass: the limits and rules cannot be satisfied by failing everything).

use base64::Engine;
use sha2::Digest;

use crate::elfs::{self, Elfs, MISSING_SONAME};
use crate::zipw::{self, Body, Member};

pub const WHEEL_NAME: &str = "demo-1.0-py3-none-linux_x86_64.whl";
/// The value of the environment variable a `${VAR}` case tries to leak into the report.
pub const SECRET_VAR: &str = "KILN_HOSTILE_SECRET";
pub const SECRET: &str = "s3cr3t-f0r-the-audit-to-keep";

pub enum Input {
    /// One file named `name`.
    File { name: String, bytes: Vec<u8> },
    /// A directory tree (relative path, bytes).
    Dir(Vec<(String, Vec<u8>)>),
    /// A directory tree (relative path, bytes) with symbolic links (relative path, target).
    DirWithLinks(Vec<(String, Vec<u8>)>, Vec<(String, String)>),
    /// A FIFO as the input itself.
    Fifo,
    /// A directory holding one regular file and one FIFO.
    DirWithFifo,
    /// A wheel file its reader may not open (mode 000).
    UnreadableFile,
    /// A directory holding one regular file and one the reader may not open (mode 000).
    DirWithUnreadable,
}

impl Input {
    /// Only a reader without root's override sees mode 000 as unreadable: run as `nobody`.
    pub fn needs_unprivileged_reader(&self) -> bool {
        matches!(self, Input::UnreadableFile | Input::DirWithUnreadable)
    }
}

pub struct Case {
    pub name: String,
    pub class: &'static str,
    pub input: Input,
    /// Extra `kiln audit` flags.
    pub args: Vec<String>,
    /// Exit code: 0 clean, 1 findings, 2 refused.
    pub exit: i32,
    /// Rule ids that must be among the JSON findings.
    pub rules: Vec<&'static str>,
}

impl Case {
    /// The wheel bytes, when the input is a wheel file.
    pub fn wheel(&self) -> Option<&[u8]> {
        match &self.input {
            Input::File { name, bytes } if name.ends_with(".whl") && bytes.starts_with(b"PK") => {
                Some(bytes)
            }
            _ => None,
        }
    }
}

fn record_hash(data: &[u8]) -> String {
    let d = sha2::Sha256::digest(data);
    format!(
        "sha256={}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(d)
    )
}

/// A RECORD listing `members` with their real hashes (and itself without one).
pub fn record(members: &[Member], dist_info: &str) -> Member {
    let mut text = String::new();
    for m in members {
        let name = String::from_utf8_lossy(&m.name);
        if !name.ends_with('/') {
            text += &format!("{name},{},{}\n", record_hash(&m.data), m.data.len());
        }
    }
    text += &format!("{dist_info}/RECORD,,\n");
    Member::file(&format!("{dist_info}/RECORD"), text.as_bytes())
}

const DIST: &str = "demo-1.0.dist-info";
const WHEEL_FILE: &str = "Wheel-Version: 1.0\nGenerator: kiln-hostile\nRoot-Is-Purelib: false\nTag: py3-none-linux_x86_64\n";
const METADATA: &str = "Metadata-Version: 2.1\nName: demo\nVersion: 1.0\n";

/// A well-formed wheel's members: a package, `extra`, WHEEL, METADATA (+ `metadata_extra`
/// header lines), and a RECORD that is right for all of them.
fn members(extra: Vec<Member>, metadata_extra: &str) -> Vec<Member> {
    members_with_wheel_file(extra, WHEEL_FILE, metadata_extra)
}

/// [`members`] with `wheel_file` as the WHEEL text.
fn members_with_wheel_file(
    extra: Vec<Member>,
    wheel_file: &str,
    metadata_extra: &str,
) -> Vec<Member> {
    let mut m = vec![Member::file("demo/__init__.py", b"")];
    m.extend(extra);
    m.push(Member::file(
        &format!("{DIST}/WHEEL"),
        wheel_file.as_bytes(),
    ));
    m.push(Member::file(
        &format!("{DIST}/METADATA"),
        format!("{METADATA}{metadata_extra}").as_bytes(),
    ));
    let r = record(&m, DIST);
    m.push(r);
    m
}

fn wheel(members: &[Member]) -> Vec<u8> {
    zipw::write(members).bytes
}

fn file(name: &str, bytes: Vec<u8>) -> Input {
    Input::File {
        name: name.into(),
        bytes,
    }
}

struct Cases(Vec<Case>);

impl Cases {
    fn add(
        &mut self,
        class: &'static str,
        name: &str,
        input: Input,
        exit: i32,
        rules: &[&'static str],
    ) {
        self.add_args(class, name, input, &[], exit, rules);
    }
    fn add_args(
        &mut self,
        class: &'static str,
        name: &str,
        input: Input,
        args: &[&str],
        exit: i32,
        rules: &[&'static str],
    ) {
        self.0.push(Case {
            name: format!("{class}/{name}"),
            class,
            input,
            args: args.iter().map(|s| s.to_string()).collect(),
            exit,
            rules: rules.to_vec(),
        });
    }
}

/// Every case. `fatbin` is a real nvcc fatbin holding an sm_80 cubin and compute_120 PTX.
pub fn all(elfs: &Elfs, fatbin: &[u8]) -> Vec<Case> {
    let mut c = Cases(Vec::new());
    baseline(&mut c, elfs);
    zip(&mut c, elfs);
    sniff(&mut c, elfs);
    elf(&mut c, elfs);
    device(&mut c, fatbin);
    special(&mut c);
    bounds(&mut c, elfs);
    raw_cubins_in_rodata(&mut c, elfs, fatbin);
    facts_growth(&mut c);
    escape(&mut c);
    c.0
}

fn lib(name: &str, data: &[u8]) -> Member {
    Member {
        unix_mode: 0o100755,
        ..Member::file(name, data)
    }
}

fn baseline(c: &mut Cases, e: &Elfs) {
    c.add(
        "baseline",
        "pure",
        file(WHEEL_NAME, wheel(&members(vec![], ""))),
        0,
        &[],
    );
    c.add(
        "baseline",
        "with-library",
        file(
            WHEEL_NAME,
            wheel(&members(vec![lib("demo/libplain.so", &e.plain)], "")),
        ),
        0,
        &[],
    );
    c.add(
        "baseline",
        "origin-bundled",
        file(
            WHEEL_NAME,
            wheel(&members(
                vec![
                    lib("demo/libneeds.so", &e.needs_missing),
                    lib(&format!("demo/{MISSING_SONAME}"), &e.missing),
                ],
                "",
            )),
        ),
        0,
        &[],
    );
    let stored: Vec<Member> = members(vec![lib("demo/libplain.so", &e.plain)], "")
        .into_iter()
        .map(|m| Member {
            body: Body::Stored,
            ..m
        })
        .collect();
    c.add(
        "baseline",
        "stored",
        file(WHEEL_NAME, wheel(&stored)),
        0,
        &[],
    );
    c.add(
        "baseline",
        "lone-elf",
        file("libplain.so", e.plain.clone()),
        0,
        &[],
    );
    c.add(
        "baseline",
        "directory",
        Input::Dir(vec![
            ("demo/libplain.so".into(), e.plain.clone()),
            ("demo/__init__.py".into(), vec![]),
        ]),
        0,
        &[],
    );
}

fn zip(c: &mut Cases, e: &Elfs) {
    let clean = members(vec![lib("demo/libplain.so", &e.plain)], "");
    // Duplicate names: Python keeps the last entry, a reader may keep the first.
    for (i, dup) in [
        "demo/libplain.so",
        "demo/__init__.py",
        &format!("{DIST}/METADATA"),
    ]
    .iter()
    .enumerate()
    {
        let mut m = clean.clone();
        let evil = if i == 0 {
            e.needs_missing.clone()
        } else {
            b"import os\n".to_vec()
        };
        m.push(Member::file(dup, &evil));
        c.add(
            "zip",
            &format!("duplicate-name-{i}"),
            file(WHEEL_NAME, wheel(&m)),
            1,
            &["wheel/zip-differential"],
        );
    }
    // The local header names another file than the central directory.
    for (i, local) in [
        "demo/evil.so",
        "demo/libplain.sO",
        "demo/libplain.so\0",
        "../../x.so",
    ]
    .iter()
    .enumerate()
    {
        let m: Vec<Member> = clean
            .iter()
            .map(|m| {
                if m.name == b"demo/libplain.so" {
                    Member {
                        local_name: Some(local.as_bytes().to_vec()),
                        ..m.clone()
                    }
                } else {
                    m.clone()
                }
            })
            .collect();
        c.add(
            "zip",
            &format!("local-name-differs-{i}"),
            file(WHEEL_NAME, wheel(&m)),
            1,
            &["wheel/zip-differential"],
        );
    }
    // Two central entries pointing at one local entry (overlap), under two names.
    for (i, second) in ["demo/libother.so", "demo/zz.so"].iter().enumerate() {
        let w = zipw::write(&clean);
        let mut bytes = w.bytes[..w.eocd_offset as usize].to_vec();
        let idx = clean
            .iter()
            .position(|m| m.name == b"demo/libplain.so")
            .unwrap();
        let src = &clean[idx];
        let stored = {
            let mut en =
                flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::default());
            std::io::Write::write_all(&mut en, &src.data).unwrap();
            en.finish().unwrap()
        };
        let alias = Member::file(second, &src.data);
        bytes.extend_from_slice(&zipw::central_entry(
            &alias,
            8,
            zipw::crc32(&src.data),
            stored.len() as u32,
            src.data.len() as u32,
            w.offsets[idx],
        ));
        let cd_size = bytes.len() as u32 - w.cd_offset;
        bytes.extend_from_slice(&zipw::eocd(
            clean.len() as u16 + 1,
            cd_size,
            w.cd_offset,
            b"",
        ));
        c.add(
            "zip",
            &format!("overlapping-members-{i}"),
            file(WHEEL_NAME, bytes),
            1,
            &["wheel/zip-differential"],
        );
    }
    // A second archive appended after a clean one: Python reads the last EOCD.
    for (i, comment) in [b"".as_slice(), b"trailing comment"].iter().enumerate() {
        let good = zipw::write(&clean).bytes;
        let evil_members = members(vec![lib("demo/libplain.so", &e.needs_missing)], "");
        let evil = zipw::write(&evil_members);
        let mut bytes = good.clone();
        let shift = bytes.len() as u32;
        bytes.extend_from_slice(&evil.bytes[..evil.eocd_offset as usize]);
        let cd_size = evil.eocd_offset - evil.cd_offset;
        // Offsets in the appended directory are relative to its own start (Python adds concat).
        bytes.extend_from_slice(&zipw::eocd(
            evil_members.len() as u16,
            cd_size,
            evil.cd_offset,
            comment,
        ));
        let _ = shift;
        c.add(
            "zip",
            &format!("two-end-records-{i}"),
            file(WHEEL_NAME, bytes),
            1,
            &[],
        );
    }
    // Data prepended to a wheel (Python shifts every offset by it).
    {
        let mut bytes = b"#!/bin/sh\nexit 0\n".to_vec();
        bytes.extend_from_slice(&wheel(&clean));
        c.add("zip", "prepended-data", file(WHEEL_NAME, bytes), 2, &[]);
    }
    // Truncated at several points: never a pass.
    let whole = wheel(&clean);
    for (i, frac) in [1, 5, 10, 25, 50, 75, 90, 99].iter().enumerate() {
        let cut = whole.len() * frac / 100;
        c.add(
            "zip",
            &format!("truncated-{i}"),
            file(WHEEL_NAME, whole[..cut].to_vec()),
            2,
            &[],
        );
    }
    {
        let mut bytes = whole.clone();
        bytes.truncate(whole.len() - 1);
        c.add(
            "zip",
            "truncated-eocd-byte",
            file(WHEEL_NAME, bytes),
            2,
            &[],
        );
    }
    // Directory entries with unsafe paths are extracted too.
    for (i, d) in ["../evil/", "/abs/dir/", "demo/../../up/", "C:/win/"]
        .iter()
        .enumerate()
    {
        let mut m = clean.clone();
        m.insert(
            0,
            Member {
                body: Body::Stored,
                ..Member::file(d, b"")
            },
        );
        c.add(
            "zip",
            &format!("unsafe-directory-{i}"),
            file(WHEEL_NAME, wheel(&m)),
            1,
            &["wheel/unsafe-path"],
        );
    }
    // A symlink named like the soname a library NEEDs: pip writes a text file there.
    for (i, target) in ["/usr/lib/x86_64-linux-gnu/libc.so.6", "libplain.so"]
        .iter()
        .enumerate()
    {
        let link = Member {
            unix_mode: 0o120777,
            body: Body::Stored,
            ..Member::file(&format!("demo/{MISSING_SONAME}"), target.as_bytes())
        };
        let m = members(vec![lib("demo/libneeds.so", &e.needs_missing), link], "");
        c.add(
            "zip",
            &format!("symlink-satisfies-needed-{i}"),
            file(WHEEL_NAME, wheel(&m)),
            1,
            &["wheel/symlink-member", "linkage/unresolved-needed"],
        );
    }
    // Encrypted member (flag bit 0).
    {
        let m: Vec<Member> = clean
            .iter()
            .map(|m| {
                if m.name == b"demo/libplain.so" {
                    Member {
                        flags: 0x801,
                        ..m.clone()
                    }
                } else {
                    m.clone()
                }
            })
            .collect();
        c.add(
            "zip",
            "encrypted-member",
            file(WHEEL_NAME, wheel(&m)),
            1,
            &["input/unreadable-member"],
        );
    }
    // dist-info rules.
    {
        let mut m = clean.clone();
        m.push(Member::file(
            "other-2.0.dist-info/METADATA",
            METADATA.as_bytes(),
        ));
        m.push(Member::file(
            "other-2.0.dist-info/WHEEL",
            WHEEL_FILE.as_bytes(),
        ));
        c.add(
            "zip",
            "two-dist-info",
            file(WHEEL_NAME, wheel(&m)),
            1,
            &["wheel/bad-dist-info"],
        );
    }
    for (i, d) in ["evil-1.0.dist-info", "demo-2.0.dist-info"]
        .iter()
        .enumerate()
    {
        let m: Vec<Member> = clean
            .iter()
            .map(|m| {
                let n = String::from_utf8_lossy(&m.name).replace(DIST, d);
                Member {
                    name: n.into_bytes(),
                    ..m.clone()
                }
            })
            .collect();
        c.add(
            "zip",
            &format!("dist-info-misnamed-{i}"),
            file(WHEEL_NAME, wheel(&m)),
            1,
            &["wheel/bad-dist-info"],
        );
    }
    for (i, drop) in ["WHEEL", "METADATA"].iter().enumerate() {
        let mut m: Vec<Member> = members(vec![], "")
            .into_iter()
            .filter(|m| m.name != format!("{DIST}/{drop}").as_bytes())
            .collect();
        m.pop();
        let r = record(&m, DIST);
        m.push(r);
        c.add(
            "zip",
            &format!("missing-{}", drop.to_lowercase()),
            file(WHEEL_NAME, wheel(&m)),
            1,
            &["wheel/bad-dist-info"],
        );
        let _ = i;
    }
    for (i, v) in [
        "Wheel-Version: 2.0\n",
        "Generator: x\n",
        "Wheel-Version: x.y\n",
    ]
    .iter()
    .enumerate()
    {
        let m = members_with_wheel_file(vec![], &format!("{v}Tag: py3-none-linux_x86_64\n"), "");
        c.add(
            "zip",
            &format!("wheel-version-{i}"),
            file(WHEEL_NAME, wheel(&m)),
            1,
            &["wheel/bad-dist-info"],
        );
    }
    c.add(
        "zip",
        "no-dist-info",
        file(WHEEL_NAME, wheel(&[Member::file("demo/__init__.py", b"")])),
        1,
        &["wheel/no-dist-info"],
    );
}

fn sniff(c: &mut Cases, e: &Elfs) {
    // The ELF's deflate stream starts with a stored block of 1..3 bytes: the first read()
    // returns fewer than the 4 magic bytes.
    for first in 1..=3 {
        let raw = zipw::deflate_split(&e.needs_missing, first);
        let so = Member {
            body: Body::RawDeflate(raw),
            ..lib("demo/libneeds.so", &e.needs_missing)
        };
        c.add(
            "sniff",
            &format!("short-first-read-{first}"),
            file(WHEEL_NAME, wheel(&members(vec![so], ""))),
            1,
            &["linkage/unresolved-needed"],
        );
    }
    // An ELF with a wheel appended, named .whl; and the same named .so; and a bare ELF named .whl.
    let mut poly = e.plain.clone();
    poly.extend_from_slice(&wheel(&members(vec![], "")));
    c.add(
        "sniff",
        "elf-plus-zip-as-whl",
        file(WHEEL_NAME, poly.clone()),
        2,
        &[],
    );
    c.add(
        "sniff",
        "elf-plus-zip-as-so",
        file("libpoly.so", poly),
        2,
        &[],
    );
    c.add(
        "sniff",
        "elf-named-whl",
        file(WHEEL_NAME, e.plain.clone()),
        2,
        &[],
    );
    c.add(
        "sniff",
        "not-anything",
        file(WHEEL_NAME, b"hello".to_vec()),
        2,
        &[],
    );
    c.add("sniff", "empty", file(WHEEL_NAME, Vec::new()), 2, &[]);
}

fn elf(c: &mut Cases, e: &Elfs) {
    // Lone ELFs: nothing beside them, so libkilnmissing.so.1 never resolves.
    c.add(
        "elf",
        "needs-missing",
        file("libneeds.so", e.needs_missing.clone()),
        1,
        &["linkage/unresolved-needed"],
    );
    c.add(
        "elf",
        "section-table-stripped",
        file("libneeds.so", elfs::strip_section_table(&e.needs_missing)),
        1,
        &["linkage/unresolved-needed"],
    );
    c.add(
        "elf",
        "dynamic-decoy",
        file("libneeds.so", elfs::decoy_dynamic(&e.needs_missing)),
        1,
        &["linkage/unresolved-needed", "elf/dynamic-mismatch"],
    );
    c.add(
        "elf",
        "needed-path",
        file("libpath.so", e.needs_path.clone()),
        1,
        &["linkage/needed-path"],
    );
    for (i, m) in [183u16, 3, 40].iter().enumerate() {
        let so = lib("demo/libplain.so", &elfs::set_machine(&e.plain, *m));
        c.add(
            "elf",
            &format!("machine-mismatch-{i}"),
            file(WHEEL_NAME, wheel(&members(vec![so], ""))),
            1,
            &["tags/machine-mismatch"],
        );
    }
    for (i, (count, next)) in [(u32::MAX, 1u32), (u32::MAX, 16), (1 << 20, 2)]
        .iter()
        .enumerate()
    {
        let so = lib(
            "demo/libneeds.so",
            &elfs::verneed_loop(&e.needs_missing, *count, *next),
        );
        let mut m = members(vec![so], "");
        m.insert(1, lib(&format!("demo/{MISSING_SONAME}"), &e.missing));
        let r = record(&m[..m.len() - 1], DIST);
        *m.last_mut().unwrap() = r;
        c.add(
            "elf",
            &format!("verneed-loop-{i}"),
            file(WHEEL_NAME, wheel(&m)),
            1,
            &["elf/unreadable"],
        );
    }
    for (i, frac) in [10, 30, 50, 70, 95].iter().enumerate() {
        let cut = e.plain.len() * frac / 100;
        let so = lib("demo/libplain.so", &e.plain[..cut]);
        c.add(
            "elf",
            &format!("truncated-{i}"),
            file(WHEEL_NAME, wheel(&members(vec![so], ""))),
            1,
            &["elf/unreadable"],
        );
    }
}

/// The container header and each entry's (header + payload) bytes of the first container.
fn split_fatbin(fatbin: &[u8]) -> Vec<(kiln_fatbin::container::EntryKind, u32, Vec<u8>)> {
    let containers = kiln_fatbin::container::parse(fatbin).expect("kiln's own fatbin parses");
    let first = &containers[0];
    let end = 16 + u64::from_le_bytes(fatbin[8..16].try_into().unwrap()) as usize;
    let mut out = Vec::new();
    for (i, en) in first.entries.iter().enumerate() {
        let stop = first.entries.get(i + 1).map(|n| n.offset).unwrap_or(end);
        out.push((en.kind, en.sm, fatbin[en.offset..stop].to_vec()));
    }
    out
}

fn container(entries: &[Vec<u8>]) -> Vec<u8> {
    let body = entries.concat();
    let mut out = Vec::new();
    out.extend_from_slice(&kiln_fatbin::container::MAGIC.to_le_bytes());
    out.extend_from_slice(&1u16.to_le_bytes());
    out.extend_from_slice(&16u16.to_le_bytes());
    out.extend_from_slice(&(body.len() as u64).to_le_bytes());
    out.extend_from_slice(&body);
    out
}

/// One fatbin entry: a 64-byte header (layout in kiln-fatbin's container.rs) and its payload;
/// `compressed` is the zstd frame stored for a payload that inflates to `inflated` bytes.
fn entry(kind: u16, sm: u32, payload: &[u8], compressed: Option<u64>) -> Vec<u8> {
    let mut h = vec![0u8; 64];
    h[0..2].copy_from_slice(&kind.to_le_bytes());
    h[4..8].copy_from_slice(&64u32.to_le_bytes());
    h[8..16].copy_from_slice(&(payload.len() as u64).to_le_bytes());
    h[24..26].copy_from_slice(&0u16.to_le_bytes());
    h[26..28].copy_from_slice(&8u16.to_le_bytes());
    h[28..32].copy_from_slice(&sm.to_le_bytes());
    if let Some(inflated) = compressed {
        h[16..20].copy_from_slice(&(payload.len() as u32).to_le_bytes());
        h[40..48].copy_from_slice(&kiln_fatbin::container::FLAG_COMPRESSED.to_le_bytes());
        h[56..64].copy_from_slice(&inflated.to_le_bytes());
    }
    h.extend_from_slice(payload);
    h
}

/// PTX text with `.target sm_<sm>` and one `.entry` line per name.
fn ptx_text<'a>(sm: u32, names: impl Iterator<Item = &'a str>) -> String {
    let mut t = format!(".version 8.0\n.target sm_{sm}\n.address_size 64\n");
    for n in names {
        t += ".visible .entry ";
        t += n;
        t += "()\n{\nret;\n}\n";
    }
    t
}

/// A zstd PTX entry whose text is `.target sm_<sm>` and `count` `.entry` lines, `name(i)` each;
/// streamed through the encoder so this process never holds the text (a child forked from it
/// inherits its peak RSS: run.rs).
fn zstd_ptx_entry(sm: u32, count: usize, name: impl Fn(usize) -> String) -> Vec<u8> {
    use std::io::Write;
    let mut enc = zstd::stream::Encoder::new(Vec::new(), 3).expect("zstd encoder");
    let mut inflated = 0u64;
    let mut put = |enc: &mut zstd::stream::Encoder<Vec<u8>>, text: &str| {
        enc.write_all(text.as_bytes()).expect("in memory");
        inflated += text.len() as u64;
    };
    put(&mut enc, &ptx_text(sm, std::iter::empty()));
    for i in 0..count {
        put(
            &mut enc,
            &format!(".visible .entry {}()\n{{\nret;\n}}\n", name(i)),
        );
    }
    let frame = enc.finish().expect("in memory");
    entry(1, sm, &frame, Some(inflated))
}

fn relabel(entry: &[u8], sm: u32, flags_or: u64) -> Vec<u8> {
    let mut e = entry.to_vec();
    e[28..32].copy_from_slice(&sm.to_le_bytes());
    let flags = u64::from_le_bytes(e[40..48].try_into().unwrap()) | flags_or;
    e[40..48].copy_from_slice(&flags.to_le_bytes());
    e
}

fn device(c: &mut Cases, fatbin: &[u8]) {
    use kiln_fatbin::container::EntryKind;
    let entries = split_fatbin(fatbin);
    let sass80 = entries
        .iter()
        .find(|(k, sm, _)| *k == EntryKind::Elf && *sm == 80)
        .map(|e| e.2.clone())
        .expect("an sm_80 cubin");
    let ptx = entries
        .iter()
        .find(|(k, _, _)| *k == EntryKind::Ptx)
        .map(|e| e.2.clone())
        .expect("a PTX entry");
    let matrix = ["80", "86", "89", "90", "100", "120"];
    let expect = ["--expect-sass", "80,86,89,90,100,120"];
    // The issue's example: six sm_80 cubins labelled sm_80 … sm_120.
    let six: Vec<Vec<u8>> = matrix
        .iter()
        .map(|sm| relabel(&sass80, sm.parse().unwrap(), 0))
        .collect();
    c.add_args(
        "device",
        "six-relabelled-cubins",
        file("k.fatbin", container(&six)),
        &expect,
        1,
        &["fatbin/target-mismatch", "arch/missing-sass"],
    );
    // Each target alone relabelled.
    for sm in &matrix[1..] {
        let one = vec![relabel(&sass80, sm.parse().unwrap(), 0)];
        c.add_args(
            "device",
            &format!("relabelled-as-sm{sm}"),
            file("k.fatbin", container(&one)),
            &["--expect-sass", sm],
            1,
            &["fatbin/target-mismatch", "arch/missing-sass"],
        );
    }
    // The real cubin under its own label: must pass its own target.
    c.add_args(
        "device",
        "true-label",
        file("k.fatbin", container(std::slice::from_ref(&sass80))),
        &["--expect-sass", "80"],
        0,
        &[],
    );
    // PTX whose header names another target than its `.target` line.
    let ptx_sm = entries
        .iter()
        .find(|(k, _, _)| *k == EntryKind::Ptx)
        .map(|e| e.1)
        .unwrap();
    c.add_args(
        "device",
        "ptx-relabelled",
        file("k.fatbin", container(&[relabel(&ptx, 100, 0)])),
        &["--expect-ptx", "100"],
        1,
        &["fatbin/target-mismatch", "arch/missing-ptx"],
    );
    c.add_args(
        "device",
        "ptx-variant-added",
        file(
            "k.fatbin",
            container(&[relabel(
                &ptx,
                ptx_sm,
                kiln_fatbin::container::FLAG_ARCH_SPECIFIC,
            )]),
        ),
        &[],
        1,
        &["fatbin/target-mismatch"],
    );
    c.add_args(
        "device",
        "ptx-true-label",
        file("k.fatbin", container(std::slice::from_ref(&ptx))),
        &["--expect-ptx", &ptx_sm.to_string()],
        0,
        &[],
    );
    // A cubin's a/f variant is in its toolkit note only (e_flags are the same for sm_90 and
    // sm_90a): the header's variant bit added to a plain cubin is a lie the note shows.
    for (sm, flag, name) in [
        (90, kiln_fatbin::container::FLAG_ARCH_SPECIFIC, "90a"),
        (100, kiln_fatbin::container::FLAG_FAMILY, "100f"),
    ] {
        let plain = entries
            .iter()
            .find(|(k, s, _)| *k == EntryKind::Elf && *s == sm)
            .map(|e| e.2.clone())
            .expect("a plain cubin");
        c.add_args(
            "device",
            &format!("cubin-variant-added-{name}"),
            file("k.fatbin", container(&[relabel(&plain, sm, flag)])),
            &["--expect-sass", name],
            1,
            &["fatbin/target-mismatch", "arch/missing-sass"],
        );
    }
    // Many tiny zstd entries each claiming a large inflated size (budget, not 32k x each).
    let frame = {
        let mut f = vec![0x28, 0xB5, 0x2F, 0xFD];
        f.extend_from_slice(&[0; 60]);
        f
    };
    let mut bombs = Vec::new();
    for _ in 0..2000 {
        let mut h = vec![0u8; 64];
        h[0..2].copy_from_slice(&2u16.to_le_bytes());
        h[4..8].copy_from_slice(&64u32.to_le_bytes());
        h[8..16].copy_from_slice(&(frame.len() as u64).to_le_bytes());
        h[16..20].copy_from_slice(&(frame.len() as u32).to_le_bytes());
        h[28..32].copy_from_slice(&80u32.to_le_bytes());
        h[40..48].copy_from_slice(&0x8000u64.to_le_bytes());
        h[56..64].copy_from_slice(&((frame.len() as u64) * 30000).to_le_bytes());
        h.extend_from_slice(&frame);
        bombs.push(h);
    }
    c.add(
        "device",
        "zstd-claims",
        file("k.fatbin", container(&bombs)),
        1,
        &["fatbin/bad-entry"],
    );
    // Truncated fatbins.
    let one = container(&[sass80]);
    for (i, frac) in [5, 40, 80].iter().enumerate() {
        c.add(
            "device",
            &format!("truncated-{i}"),
            file("k.fatbin", one[..one.len() * frac / 100].to_vec()),
            1,
            &["fatbin/malformed"],
        );
    }
}

fn special(c: &mut Cases) {
    c.add("special", "fifo-input", Input::Fifo, 2, &[]);
    c.add(
        "special",
        "fifo-in-directory",
        Input::DirWithFifo,
        1,
        &["input/unreadable-member"],
    );
    c.add("special", "unreadable-input", Input::UnreadableFile, 2, &[]);
    c.add(
        "special",
        "unreadable-in-directory",
        Input::DirWithUnreadable,
        1,
        &["input/unreadable-member"],
    );
}

fn bounds(c: &mut Cases, e: &Elfs) {
    let req = |line: String| members(vec![], &format!("Requires-Dist: {line}\n"));
    // Nested markers: a recursive parser overflows its stack.
    for depth in [100, 5000, 100_000] {
        let line = format!(
            "x; {}python_version > '3'{}",
            "(".repeat(depth),
            ")".repeat(depth)
        );
        c.add(
            "bounds",
            &format!("nested-marker-{depth}"),
            file(WHEEL_NAME, wheel(&req(line))),
            0,
            &["metadata/bad-requires-dist"],
        );
    }
    // Wide markers: DNF simplification is exponential in the clauses.
    for clauses in [12, 24, 60] {
        let m = (0..clauses)
            .map(|i| format!("(python_version == '3.{i}' or extra == 'e{i}')"))
            .collect::<Vec<_>>()
            .join(" and ");
        c.add(
            "bounds",
            &format!("wide-marker-{clauses}"),
            file(WHEEL_NAME, wheel(&req(format!("x; {m}")))),
            0,
            &[],
        );
    }
    c.add(
        "bounds",
        "env-var-in-url",
        file(
            WHEEL_NAME,
            wheel(&req(format!(
                "x @ https://example.invalid/${{{SECRET_VAR}}}/x.whl"
            ))),
        ),
        0,
        &["metadata/bad-requires-dist"],
    );
    c.add(
        "bounds",
        "env-var-home",
        file(WHEEL_NAME, wheel(&req("x @ file:///${HOME}/x.whl".into()))),
        0,
        &["metadata/bad-requires-dist"],
    );
    // A WHEEL Tag line expanding to 27 M tags.
    {
        let many = |p: &str| {
            (0..300)
                .map(|i| format!("{p}{i}"))
                .collect::<Vec<_>>()
                .join(".")
        };
        let tag = format!("{}-{}-{}", many("py"), many("abi"), many("linux_x86_64_"));
        let m = members_with_wheel_file(
            vec![],
            &format!("Wheel-Version: 1.0\nTag: {tag}\nTag: py3-none-linux_x86_64\n"),
            "",
        );
        c.add(
            "bounds",
            "tag-expansion",
            file(WHEEL_NAME, wheel(&m)),
            1,
            &["input/over-limit"],
        );
    }
    // 1,500 dist-info directories.
    {
        let mut m = members(vec![], "");
        for i in 0..1500 {
            m.push(Member::file(
                &format!("d{i}-1.0.dist-info/RECORD"),
                b"x,,\n",
            ));
        }
        c.add(
            "bounds",
            "many-dist-info",
            file(WHEEL_NAME, wheel(&m)),
            1,
            &["wheel/bad-dist-info"],
        );
    }
    // 20k RECORD rows naming members that do not exist.
    {
        let mut m = members(vec![], "");
        let mut text = String::from_utf8(m.last().unwrap().data.clone()).unwrap();
        for i in 0..20_000 {
            text += &format!("demo/gone{i}.py,sha256=AAAA,1\n");
        }
        let last = m.len() - 1;
        m[last] = Member::file(&format!("{DIST}/RECORD"), text.as_bytes());
        c.add(
            "bounds",
            "record-rows",
            file(WHEEL_NAME, wheel(&m)),
            1,
            &["wheel/record-mismatch"],
        );
    }
    // Thousands of tiny (truncated) ELF members.
    {
        let head = &e.plain[..64];
        let libs: Vec<Member> = (0..6000)
            .map(|i| Member {
                body: Body::Stored,
                ..lib(&format!("demo/l{i}.so"), head)
            })
            .collect();
        c.add(
            "bounds",
            "many-tiny-elfs",
            file(WHEEL_NAME, wheel(&members(libs, ""))),
            1,
            &["elf/unreadable"],
        );
    }
    // Members claiming size 0 that inflate to 4 MiB, against --max-total-size 1 MiB: inflation
    // stops one byte past the claim (Python's zipfile reads the declared size), so the lie is a
    // zip differential and the budget is never approached.
    {
        let big = vec![0u8; 4 << 20];
        let m: Vec<Member> = (0..4)
            .map(|i| Member {
                declared_size: Some(0),
                ..Member::file(&format!("demo/z{i}.bin"), &big)
            })
            .collect();
        c.add_args(
            "bounds",
            "inflated-past-total",
            file(WHEEL_NAME, wheel(&members(m, ""))),
            &["--max-total-size", "1048576"],
            1,
            &["wheel/zip-differential"],
        );
    }
    // One member inflating past --max-member-size.
    {
        let big = vec![0u8; 8 << 20];
        let m = vec![Member::file("demo/big.bin", &big)];
        c.add_args(
            "bounds",
            "member-bomb",
            file(WHEEL_NAME, wheel(&members(m, ""))),
            &["--max-member-size", "1048576"],
            1,
            &["wheel/member-too-large"],
        );
    }
    // Directory input over --max-total-size.
    c.add_args(
        "bounds",
        "directory-too-large",
        Input::Dir(vec![("a.bin".into(), vec![1u8; 3 << 20])]),
        &["--max-total-size", "1048576"],
        2,
        &[],
    );
    // 511 central entries naming one 64 MiB deflate stream (64 KiB stored): 32 GiB declared
    // and inflated (just under the default --max-total-size) from a 100 KiB file unless the
    // overlap is refused before inflating. CPython 3.12+ refuses it ("Overlapped entries").
    c.add(
        "bounds",
        "overlap-bomb",
        file(WHEEL_NAME, overlap_bomb(510, 64 << 20)),
        1,
        &["wheel/zip-differential"],
    );
    // 30,000 tiny libraries each with an unresolved NEEDED (a 58 MB wheel): the audit's memory
    // per binary and per finding must stay small (it held ~17 KiB each: 1,078 MiB).
    {
        let raw = zipw::deflate_split(&e.needs_missing, 0);
        let libs: Vec<Member> = (0..30_000)
            .map(|i| Member {
                body: Body::RawDeflate(raw.clone()),
                ..lib(&format!("demo/l{i}/libneeds.so"), &e.needs_missing)
            })
            .collect();
        c.add(
            "bounds",
            "many-unresolved-needed",
            file(WHEEL_NAME, wheel(&members(libs, ""))),
            1,
            &["linkage/unresolved-needed"],
        );
    }
    // A NEEDED soname that is a symbolic link in a directory (libkilnmissing.so.1 ->
    // libkilnmissing.so.1.0): ld.so follows it, so it resolves. One that leads nowhere, or out
    // of the tree, does not.
    for (i, (target, exit)) in [
        ("libkilnmissing.so.1.0", 0),
        ("libkilnmissing.so.9.9", 1),
        ("/usr/lib/x86_64-linux-gnu/libc.so.6", 1),
    ]
    .iter()
    .enumerate()
    {
        c.add(
            "bounds",
            &format!("symlinked-needed-{i}"),
            Input::DirWithLinks(
                vec![
                    ("demo/libneeds.so".into(), e.needs_missing.clone()),
                    ("demo/libkilnmissing.so.1.0".into(), e.missing.clone()),
                    ("demo/__init__.py".into(), vec![]),
                ],
                vec![(format!("demo/{MISSING_SONAME}"), target.to_string())],
            ),
            *exit,
            if *exit == 0 {
                &[]
            } else {
                &["linkage/unresolved-needed"]
            },
        );
    }
    // Many Requires-Dist lines.
    {
        let lines: String = (0..20_000)
            .map(|i| format!("Requires-Dist: p{i} (>=1,<2); extra == 'x{i}'\n"))
            .collect();
        c.add(
            "bounds",
            "many-requires",
            file(WHEEL_NAME, wheel(&members(vec![], &lines))),
            1,
            &["input/over-limit"],
        );
    }
}

/// A library whose `.rodata` holds 256 MiB: noise with 64 copies of a real sm_80 cubin (the
/// nvcc fatbin's), stored uncompressed (a 268 MB wheel). Every page of it used to be resident
/// at once (the soname search touched them all before handing any back): the peak passed the
/// 256 MiB ceiling.
fn raw_cubins_in_rodata(c: &mut Cases, e: &Elfs, fatbin: &[u8]) {
    let containers = kiln_fatbin::container::parse(fatbin).expect("kiln's own fatbin parses");
    let mut buf = Vec::new();
    let cubin = containers
        .iter()
        .flat_map(|c| &c.entries)
        .find(|en| en.kind == kiln_fatbin::container::EntryKind::Elf)
        .map(|en| {
            en.decompress_with(&mut buf)
                .expect("the cubin decodes")
                .to_vec()
        })
        .expect("the fatbin has a cubin");
    const SIZE: usize = 256 << 20;
    let mut blob = vec![0u8; SIZE];
    // xorshift64: incompressible, deterministic, fast.
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    for chunk in blob.chunks_exact_mut(8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        chunk.copy_from_slice(&x.to_le_bytes());
    }
    for k in 0..64 {
        let at = k * (SIZE / 64);
        blob[at..at + cubin.len()].copy_from_slice(&cubin);
    }
    let lib = crate::elfs::with_section(&e.dir, &e.plain, ".rodata.kiln_cubins", &blob)
        .unwrap_or_else(|err| panic!("{err}"));
    drop(blob);
    let m = vec![Member {
        body: Body::Stored,
        ..self::lib("demo/libcubins.so", &lib)
    }];
    c.add(
        "bounds",
        "raw-cubins-in-rodata",
        file(WHEEL_NAME, wheel(&members(m, ""))),
        0,
        &[],
    );
}

/// A wheel whose `aliases` extra central entries all point at one member of `size` zero bytes
/// (declared honestly), after a clean wheel's members.
fn overlap_bomb(aliases: usize, size: usize) -> Vec<u8> {
    let zeros = vec![0u8; size];
    let mut clean = members(vec![], "");
    clean.insert(1, Member::file("demo/z.bin", &zeros));
    let w = zipw::write(&clean);
    let crc = zipw::crc32(&zeros);
    let stored = {
        let mut en = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::default());
        std::io::Write::write_all(&mut en, &zeros).unwrap();
        en.finish().unwrap()
    };
    let mut bytes = w.bytes[..w.eocd_offset as usize].to_vec();
    for i in 0..aliases {
        let alias = Member::file(&format!("demo/z{i}.bin"), b"");
        bytes.extend_from_slice(&zipw::central_entry(
            &alias,
            8,
            crc,
            stored.len() as u32,
            size as u32,
            w.offsets[1],
        ));
    }
    let cd_size = bytes.len() as u32 - w.cd_offset;
    bytes.extend_from_slice(&zipw::eocd(
        (clean.len() + aliases) as u16,
        cd_size,
        w.cd_offset,
        b"",
    ));
    bytes
}

/// Fatbins whose facts outgrow their bytes: the JSON report, the coverage matrix and the kernel
/// lists must stay bounded (issue 17: <= 1 MiB of output for a 1 MB input).
fn facts_growth(c: &mut Cases) {
    // 7,000 PTX entries, each its own target and kernel: a kernels x targets matrix would be
    // 49 M cells.
    let wide: Vec<Vec<u8>> = (0..7000u32)
        .map(|i| {
            let name = format!("k{i}");
            entry(
                1,
                1000 + i,
                ptx_text(1000 + i, [name.as_str()].into_iter()).as_bytes(),
                None,
            )
        })
        .collect();
    c.add(
        "bounds",
        "coverage-wide",
        file("k.fatbin", container(&wide)),
        0,
        &[],
    );
    // One zstd PTX repeating one `.entry` 1 M times (38 MiB of text from ~4 KiB).
    c.add(
        "bounds",
        "ptx-repeated-kernel",
        file(
            "k.fatbin",
            container(&[zstd_ptx_entry(80, 1 << 20, |_| "same_kernel".into())]),
        ),
        0,
        &[],
    );
    // zstd PTX with 400 k distinct kernel names sharing a long prefix: ~13 MiB of names from a
    // few hundred KiB; listing them all in JSON would be ~17 MiB.
    let prefix = "k".repeat(24);
    c.add(
        "bounds",
        "ptx-many-kernels",
        file(
            "k.fatbin",
            container(&[zstd_ptx_entry(80, 400_000, |i| format!("{prefix}{i}"))]),
        ),
        0,
        &[],
    );
}

fn escape(c: &mut Cases) {
    // Strings that redraw the terminal or reorder text; the human report must show them escaped.
    let tricks = [
        ("ansi", "\u{1b}[2J\u{1b}[H\u{1b}[32mPASS: all good\u{1b}[0m"),
        ("bidi", "lib\u{202E}os.evil"),
        ("cr", "x\rPASS"),
        ("isolate", "a\u{2066}b\u{2069}"),
    ];
    for (name, t) in tricks {
        // In a member name (not in RECORD: a finding names it).
        let mut m = members(vec![], "");
        m.insert(0, Member::file(&format!("demo/{t}.py"), b"x"));
        c.add(
            "escape",
            &format!("member-name-{name}"),
            file(WHEEL_NAME, wheel(&m)),
            1,
            &["wheel/record-missing"],
        );
        // In a RECORD row naming a member that is not there.
        let mut m = members(vec![], "");
        let last = m.len() - 1;
        let mut text = String::from_utf8(m[last].data.clone()).unwrap();
        text += &format!("demo/{t},sha256=AAAA,1\n");
        m[last] = Member::file(&format!("{DIST}/RECORD"), text.as_bytes());
        c.add(
            "escape",
            &format!("record-path-{name}"),
            file(WHEEL_NAME, wheel(&m)),
            1,
            &["wheel/record-mismatch"],
        );
        // In a Requires-Dist value.
        let m = members(vec![], &format!("Requires-Dist: !{t}\n"));
        c.add(
            "escape",
            &format!("requires-dist-{name}"),
            file(WHEEL_NAME, wheel(&m)),
            0,
            &["metadata/bad-requires-dist"],
        );
    }
}
