//! `cargo xtask consumer`: kiln used by another project, as README.md documents it.
//!
//! Runs README's "Use kiln in your project" build-dependency block as written, with bash, in a
//! fresh directory outside this checkout (`KILN` = the checkout): `cargo install` of `kiln`, a
//! copy of `checks/consumer`, its toolchain by `kiln bootstrap` (not the checkout's xtask), the
//! copy pointed at kiln's crates (kiln-build, kiln-embed), its wheel by maturin, `kiln audit` against the
//! copy's own Cargo.toml and `kiln doctor`. Then checks what
//! the block cannot say by itself:
//! - the wheel's fatbin holds exactly the targets of the consumer's matrix (which must differ
//!   from kiln's, or the test would prove nothing), and the same wheel fails against kiln's own
//!   pins (so the clean audit did judge the project's table);
//! - the deliberate break: one kernel compiled out for sm_89 (`#if __CUDA_ARCH__ != 890`) fails
//!   kiln-build, naming the kernel and the target; and a wheel whose sm_89 code comes from that
//!   source by another route (nvcc, then fatbinary into the good wheel) fails `kiln audit`
//!   with `arch/kernel-missing-sass`.
//!
//! Shared, so a second run rebuilds little: CARGO_TARGET_DIR is the checkout's `target/` (kiln's
//! own release build of `kiln`, the registry crates the consumer shares with kiln's lock, and
//! the content-addressed kernel cache), and XDG_DATA_HOME is `target/consumer-data`, so
//! `kiln bootstrap` installs the toolchain once and verifies it on later runs.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, ensure, Context, Result};
use kiln_fatbin::container::EntryKind;
use kiln_pins::Pins;
use object::{Object, ObjectSection};

use crate::audit_fixture::Wheel;
use crate::toolchain::{repo_root, run_checked, run_status, single_wheel, Layout};

#[derive(clap::Args)]
pub struct Args {
    /// Keep the fresh directory (printed at the end) instead of deleting it.
    #[arg(long)]
    pub keep: bool,
}

/// The marker line right above the README block this suite runs.
const BLOCK_MARKER: &str = "<!-- run by `cargo xtask consumer` -->";
/// The kernel the break compiles out, and for which target.
const BROKEN_KERNEL: &str = "consumer_scale_f32";
const BROKEN_ARCH: u32 = 89;

pub fn run(args: Args, layout: &Layout) -> Result<()> {
    let root = repo_root();
    let readme = std::fs::read_to_string(root.join("README.md")).context("reading README.md")?;
    let block = readme_block(&readme)?;
    // Outside the checkout: inside it, cargo would take the copy for a member of kiln's workspace.
    let work = tempfile::Builder::new()
        .prefix("kiln-consumer-")
        .tempdir()
        .context("creating the fresh directory")?;
    let install = work.path().join("cargo-install");
    let started = std::time::Instant::now();

    eprintln!(
        "consumer: README block in {}:\n{block}",
        work.path().display()
    );
    let mut sh = Command::new("bash");
    sh.args(["-euo", "pipefail", "-c", &block])
        .current_dir(work.path())
        .env("KILN", &root)
        .env("CARGO_TARGET_DIR", root.join("target"))
        .env("CARGO_INSTALL_ROOT", &install)
        .env("XDG_DATA_HOME", root.join("target/consumer-data"))
        .env("PATH", consumer_path(&install.join("bin"), &root));
    // The toolchain only as the block gets it (`kiln bootstrap`, then
    // `source "$(kiln bootstrap --env-file)"`), not from the environment `cargo xtask test`
    // gives its suites nor from the checkout's `.toolchain/`.
    for (var, _) in layout.vars() {
        if var != "PATH" {
            sh.env_remove(var);
        }
    }
    run_status(
        &mut sh,
        "README's consumer block, run as written from a fresh directory, failed",
    )?;
    eprintln!(
        "consumer: README block passed in {:.0} s",
        started.elapsed().as_secs_f64()
    );

    let project = work.path().join("my-kernels");
    let wheel = single_wheel(&project.join("dist"))?;
    check_matrix(&project, &root, &wheel)?;
    check_policy_is_the_projects(&install.join("bin/kiln"), &wheel, &root)?;
    check_break(&project, &root, &wheel, &install.join("bin/kiln"), layout)?;
    eprintln!(
        "consumer: all checks passed in {:.0} s",
        started.elapsed().as_secs_f64()
    );
    if args.keep {
        eprintln!("kept {}", work.keep().display());
    }
    Ok(())
}

/// The ```sh block that follows [`BLOCK_MARKER`].
fn readme_block(readme: &str) -> Result<String> {
    block_after(readme, BLOCK_MARKER)
}

/// The ```sh block that follows the line `marker` in README.md's text.
pub(crate) fn block_after(readme: &str, marker: &str) -> Result<String> {
    let after = readme
        .split_once(marker)
        .map(|(_, rest)| rest)
        .with_context(|| format!("README.md has no {marker} line"))?;
    let body = after
        .trim_start()
        .strip_prefix("```sh\n")
        .context("the README marker is not followed by a ```sh block")?;
    let (body, _) = body
        .split_once("\n```")
        .context("the README block is not closed")?;
    Ok(format!("{body}\n"))
}

/// `dir` (where `cargo install` puts `kiln`), then PATH without the checkout's `.toolchain/`.
fn consumer_path(dir: &Path, root: &Path) -> std::ffi::OsString {
    let old = std::env::var_os("PATH").unwrap_or_default();
    let toolchain = root.join(".toolchain");
    let kept = std::env::split_paths(&old).filter(|p| !p.starts_with(&toolchain));
    std::env::join_paths(std::iter::once(dir.to_path_buf()).chain(kept))
        .expect("PATH entries have no ':'")
}

/// The one ELF member of the wheel with a `.nv_fatbin` section: its name and section bytes.
fn device_member(wheel: &Wheel) -> Result<(String, Vec<u8>)> {
    for (name, data) in &wheel.members {
        let Ok(elf) = object::File::parse(data.as_slice()) else {
            continue;
        };
        if let Some(section) = elf.section_by_name(".nv_fatbin") {
            let bytes = section.data().context("reading .nv_fatbin")?.to_vec();
            return Ok((name.clone(), bytes));
        }
    }
    bail!("no member of the wheel has a .nv_fatbin section")
}

/// Target names (`sm_89`, `compute_90`) of every fatbin entry.
fn fatbin_targets(section: &[u8]) -> Result<BTreeSet<String>> {
    let containers =
        kiln_fatbin::container::parse(section).map_err(|e| anyhow::anyhow!("fatbin: {e}"))?;
    let mut names = BTreeSet::new();
    for c in &containers {
        for e in &c.entries {
            let prefix = match e.kind {
                EntryKind::Elf => "sm",
                EntryKind::Ptx => "compute",
                EntryKind::Other(k) => bail!("fatbin entry of kind {k}"),
            };
            names.insert(format!("{prefix}_{}{}", e.sm, e.variant.suffix()));
        }
    }
    Ok(names)
}

/// The kernels were compiled for exactly the consumer's matrix, which is not kiln's.
fn check_matrix(project: &Path, root: &Path, wheel: &Path) -> Result<()> {
    let consumer = Pins::load(&project.join("Cargo.toml"))?;
    let kiln = Pins::load(&root.join("Cargo.toml"))?;
    let names =
        |p: &Pins| -> BTreeSet<String> { p.matrix.targets().iter().map(|t| t.name()).collect() };
    let want = names(&consumer);
    ensure!(
        want != names(&kiln),
        "the consumer's matrix equals kiln's ({want:?}): it would not show whose table was read"
    );
    let (member, section) = device_member(&Wheel::read(wheel)?)?;
    let got = fatbin_targets(&section)?;
    ensure!(
        got == want,
        "{member}: the fatbin holds {got:?}, the consumer's Cargo.toml asks for {want:?}"
    );
    eprintln!("consumer: {member} holds exactly the consumer's matrix {want:?}");
    Ok(())
}

/// The clean audit in the block judged the project's table: the same wheel against kiln's own
/// Cargo.toml (sm_80 … sm_120 + compute_120) is missing SASS, so the gate did read `--policy`.
fn check_policy_is_the_projects(kiln: &Path, wheel: &Path, root: &Path) -> Result<()> {
    let audit = audit_json(kiln, wheel, &root.join("Cargo.toml"))?;
    let rule = "arch/missing-sass";
    ensure!(
        audit.exit == Some(1) && audit.rules().iter().any(|r| r == rule),
        "the consumer's wheel against kiln's own pins: expected exit 1 with {rule}, got {:?} {:?}",
        audit.exit,
        audit.rules()
    );
    eprintln!("consumer: the same wheel against kiln's own pins fails with {rule}, as it must");
    Ok(())
}

/// `kiln audit WHEEL --policy POLICY --json`: its exit code and report.
struct Audit {
    exit: Option<i32>,
    report: serde_json::Value,
}

impl Audit {
    fn findings(&self) -> impl Iterator<Item = &serde_json::Value> {
        self.report["findings"].as_array().into_iter().flatten()
    }

    fn rules(&self) -> Vec<String> {
        self.findings()
            .filter_map(|f| f["rule"].as_str().map(String::from))
            .collect()
    }
}

fn audit_json(kiln: &Path, wheel: &Path, policy: &Path) -> Result<Audit> {
    let out = Command::new(kiln)
        .arg("audit")
        .arg(wheel)
        .arg("--policy")
        .arg(policy)
        .arg("--json")
        .output()
        .with_context(|| format!("running {}", kiln.display()))?;
    let report = serde_json::from_slice(&out.stdout).with_context(|| {
        format!(
            "kiln audit --json: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    })?;
    Ok(Audit {
        exit: out.status.code(),
        report,
    })
}

/// One kernel compiled out for one target: kiln-build refuses to build it, and the gate
/// refuses a wheel that carries it.
fn check_break(
    project: &Path,
    root: &Path,
    good: &Path,
    kiln: &Path,
    layout: &Layout,
) -> Result<()> {
    let source = project.join("kernels/scale.cu");
    let text = std::fs::read_to_string(&source)?;
    let head = format!("extern \"C\" __global__ void {BROKEN_KERNEL}(");
    let start = text
        .find(&head)
        .with_context(|| format!("{} has no {head}", source.display()))?;
    let end = start
        + text[start..]
            .find("\n}\n")
            .context("the kernel's closing brace")?
        + 3;
    let broken = format!(
        "{}#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ != {BROKEN_ARCH}0\n{}#endif\n{}",
        &text[..start],
        &text[start..end],
        &text[end..]
    );
    std::fs::write(&source, broken)?;

    // 1. The build: kiln-build's own check of the linked outputs.
    let mut cargo = crate::toolchain::cargo();
    cargo
        .args(["build", "--release", "--locked"])
        .current_dir(project)
        .env("CARGO_TARGET_DIR", root.join("target"));
    layout.apply(&mut cargo);
    let out = cargo.output().context("running cargo build")?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    let expected = format!("{BROKEN_KERNEL} missing for sm_{BROKEN_ARCH}");
    ensure!(
        !out.status.success() && stderr.contains(&expected),
        "the broken consumer: expected cargo build to fail with {expected:?}, got {} and:\n{stderr}",
        out.status
    );
    eprintln!("consumer: break: kiln-build refused it ({expected})");

    // 2. The gate: the same source's sm_89 code in the good wheel, as a build that skipped
    //    kiln-build would ship it.
    let tmp = tempfile::tempdir()?;
    let cubin = tmp.path().join(format!("sm_{BROKEN_ARCH}.cubin"));
    let cuda = layout.cuda_home();
    run_checked(
        Command::new(cuda.join("bin/nvcc"))
            .arg("-cubin")
            .arg(format!("-arch=sm_{BROKEN_ARCH}"))
            .args(["-std=c++17", "-O3"])
            .arg(format!("-I{}", project.join("kernels/include").display()))
            .arg(&source)
            .arg("-o")
            .arg(&cubin),
    )?;
    let mut wheel = Wheel::read(good)?;
    let (member, section) = device_member(&wheel)?;
    let so = tmp.path().join("member.so");
    std::fs::write(&so, wheel.get(&member).context("member")?)?;
    let new_section = refatbin_with(&cuda, tmp.path(), &section, BROKEN_ARCH, &cubin)?;
    run_checked(
        Command::new("objcopy")
            .arg(format!(
                "--update-section=.nv_fatbin={}",
                new_section.display()
            ))
            .arg(&so),
    )?;
    wheel.set(&member, std::fs::read(&so)?);
    wheel.regenerate_record()?;
    let bad_dir = tmp.path().join("bad");
    std::fs::create_dir_all(&bad_dir)?;
    let bad = wheel.write(&bad_dir)?;
    let audit = audit_json(kiln, &bad, &project.join("Cargo.toml"))?;
    let rule = "arch/kernel-missing-sass";
    let hit = audit
        .findings()
        .any(|f| f["rule"] == rule && f.to_string().contains(BROKEN_KERNEL));
    ensure!(
        audit.exit == Some(1) && hit,
        "the broken wheel: expected exit 1 with {rule} for {BROKEN_KERNEL}, got {:?} and {:#}",
        audit.exit,
        audit.report
    );
    eprintln!(
        "consumer: break: kiln audit failed it with {rule} ({BROKEN_KERNEL}, sm_{BROKEN_ARCH})"
    );
    Ok(())
}

/// `.nv_fatbin` rebuilt by fatbinary from its own entries, the `sm` ELF entry replaced by `cubin`.
fn refatbin_with(
    cuda: &Path,
    tmp: &Path,
    section: &[u8],
    sm: u32,
    cubin: &Path,
) -> Result<PathBuf> {
    let containers =
        kiln_fatbin::container::parse(section).map_err(|e| anyhow::anyhow!("fatbin: {e}"))?;
    ensure!(containers.len() == 1, "expected one fatbin container");
    let mut cmd = Command::new(cuda.join("bin/fatbinary"));
    let out = tmp.join("section.bin");
    cmd.arg(format!("--create={}", out.display())).arg("-64");
    let mut replaced = false;
    for (i, e) in containers[0].entries.iter().enumerate() {
        let (kind, file) = match e.kind {
            EntryKind::Elf if e.sm == sm => {
                replaced = true;
                ("elf", cubin.to_path_buf())
            }
            EntryKind::Elf | EntryKind::Ptx => {
                let (kind, ext) = if e.kind == EntryKind::Elf {
                    ("elf", "cubin")
                } else {
                    ("ptx", "ptx")
                };
                let file = tmp.join(format!("e{i}.{ext}"));
                let payload = e.decompress().map_err(|e| anyhow::anyhow!("{e}"))?;
                std::fs::write(&file, &payload)?;
                (kind, file)
            }
            EntryKind::Other(k) => bail!("fatbin entry of kind {k}"),
        };
        cmd.arg(format!(
            "--image3=kind={kind},sm={}{},file={}",
            e.sm,
            e.variant.suffix(),
            file.display()
        ));
    }
    ensure!(replaced, "the fatbin has no sm_{sm} cubin to replace");
    run_checked(&mut cmd)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_readme_block_is_found_and_closed() {
        let readme =
            std::fs::read_to_string(crate::toolchain::repo_root().join("README.md")).unwrap();
        let block = super::readme_block(&readme).unwrap();
        // The template names kiln-build and kiln-embed relative to kiln's tree; the copy points
        // both at the checkout in one edit (two `cargo add`s would each fail to resolve the
        // other, still relative, path).
        assert!(
            block.contains("sed -i \"s#\\\"\\.\\./\\.\\./crates/#"),
            "{block}"
        );
        // The toolchain comes from `kiln bootstrap`, not from a kiln checkout's xtask.
        assert!(block.contains("\nkiln bootstrap"), "{block}");
        assert!(!block.contains("xtask"), "{block}");
        assert!(
            block.contains("kiln audit dist/*.whl --policy Cargo.toml"),
            "{block}"
        );
        assert!(!block.contains("```"), "{block}");
        let e = super::readme_block("no marker").unwrap_err().to_string();
        assert!(e.contains("no <!--"), "{e}");
    }
}
