//! `cargo xtask sandbox`: the commands of the flake's checks and wheel, run without Nix the way
//! the Nix build sandbox runs them, so that CI (which has no Nix) proves them:
//!
//! - on the flake's source set (nix/crates.nix's fileset, evaluated by Nix against the test
//!   doubles and copied out), never the checkout: no `.toolchain/`, no `target/`, no
//!   `checks/nix/`, nothing git ignores;
//! - with HOME unwritable — a regular file, so that not even root can create anything under it
//!   (Nix's /homeless-shelter) — and cargo offline after one `cargo fetch`;
//! - with the CUDA tools found through the environment (CUDA_HOME, PATH), as the Nix
//!   derivation provides them, never through `.toolchain/` paths;
//! - the test suite of nix/checks/nextest.nix (the workspace without xtask; cargo test in the dev
//!   profile, where crane runs nextest in release), then nix/wheel-build.sh — the very script
//!   `nix build .#wheel` runs — and `kiln audit` of that wheel against the pins
//!   (nix/checks/audit.nix).
//!
//! Before each step a probe (`mkdir -p "$HOME/.cache/kiln-probe"`) must fail, and after the
//! steps HOME must still be the untouched file: the proof that nothing wrote to HOME.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use sha2::Digest;

use crate::toolchain::{repo_root, run_status, Layout};

#[derive(clap::Args)]
pub struct Args {
    /// Run the tests only, not the wheel step.
    #[arg(long)]
    pub no_wheel: bool,
}

/// What HOME holds: a file, so `$HOME/anything` can be neither created nor written.
const HOME_MARK: &str =
    "kiln sandbox: HOME is unwritable here, as /homeless-shelter is in the Nix sandbox\n";

/// The sandbox's directories: a copy of the source, HOME, TMPDIR (outside the checkout).
pub struct Sandbox {
    pub src: PathBuf,
    pub home: PathBuf,
    pub tmp: PathBuf,
    /// CARGO_TARGET_DIR: the checkout's own target/, so registry dependencies and kiln-build's
    /// kernel cache are shared, which keeps CI's time down. The copy's workspace members get the
    /// checkout's unit names (cargo hashes a member's path relative to its workspace root); the
    /// copy's newer mtimes make them rebuild, and what they leave is built from the same files,
    /// so a later checkout build that takes it as fresh gets the same code.
    pub target: PathBuf,
}

impl Sandbox {
    pub fn at(root: &Path, target: PathBuf) -> Sandbox {
        Sandbox {
            src: root.join("src"),
            home: root.join("homeless-shelter"),
            tmp: root.join("tmp"),
            target,
        }
    }

    /// A fresh copy of `source` in `src/`, writable (store paths are read-only), and the HOME
    /// file; TMPDIR emptied.
    pub fn prepare(&self, source: &Path) -> Result<()> {
        for d in [&self.src, &self.tmp] {
            if d.exists() {
                make_writable(d)?;
                std::fs::remove_dir_all(d).with_context(|| format!("removing {}", d.display()))?;
            }
        }
        copy_tree(source, &self.src)?;
        make_writable(&self.src)?;
        std::fs::create_dir_all(&self.tmp)?;
        if self.home.is_dir() {
            std::fs::remove_dir_all(&self.home)?;
        }
        std::fs::write(&self.home, HOME_MARK)?;
        for absent in [".toolchain", "target", "checks/nix", ".git"] {
            if self.src.join(absent).exists() {
                bail!(
                    "the flake's source set contains {absent}/ ({}): nix/crates.nix's fileset must leave it out",
                    self.src.join(absent).display()
                );
            }
        }
        Ok(())
    }

    /// The environment every step runs with: the toolchain's variables (CUDA_HOME, PATH,
    /// LIBCLANG_PATH, …) as the derivation sets them, HOME unwritable, cargo's and rustup's
    /// homes named explicitly (crane sets CARGO_HOME; HOME is not theirs), TMPDIR private.
    pub fn command(&self, layout: &Layout, program: impl Into<OsString>) -> Command {
        let mut cmd = Command::new(program.into());
        layout.apply(&mut cmd);
        let home = std::env::var_os("HOME")
            .map(PathBuf::from)
            .unwrap_or_default();
        let cargo_home = std::env::var_os("CARGO_HOME")
            .map(PathBuf::from)
            .unwrap_or_else(|| home.join(".cargo"));
        let rustup_home = std::env::var_os("RUSTUP_HOME")
            .map(PathBuf::from)
            .unwrap_or_else(|| home.join(".rustup"));
        cmd.current_dir(&self.src)
            .env("HOME", &self.home)
            .env("CARGO_HOME", cargo_home)
            .env("RUSTUP_HOME", rustup_home)
            .env("TMPDIR", &self.tmp)
            .env("CARGO_TARGET_DIR", &self.target)
            .env_remove("XDG_CACHE_HOME")
            .env_remove("XDG_CONFIG_HOME")
            .env_remove("CARGO");
        cmd
    }

    /// Fails unless HOME is still exactly the file `prepare` wrote.
    pub fn home_untouched(&self) -> Result<()> {
        let meta = std::fs::symlink_metadata(&self.home)
            .with_context(|| format!("HOME {} is gone", self.home.display()))?;
        if !meta.is_file() || std::fs::read_to_string(&self.home)? != HOME_MARK {
            bail!("something replaced or wrote HOME ({})", self.home.display());
        }
        Ok(())
    }

    /// The probe: creating a directory under HOME must fail in this environment.
    pub fn home_is_unwritable(&self, layout: &Layout) -> Result<()> {
        let out = self
            .command(layout, "sh")
            .args(["-c", "mkdir -p \"$HOME/.cache/kiln-probe\""])
            .output()
            .context("running the HOME probe")?;
        if out.status.success() {
            bail!(
                "HOME {} is writable in the sandbox environment",
                self.home.display()
            );
        }
        Ok(())
    }
}

fn copy_tree(from: &Path, to: &Path) -> Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from).with_context(|| format!("reading {}", from.display()))? {
        let entry = entry?;
        let dest = to.join(entry.file_name());
        let ty = entry.file_type()?;
        if ty.is_dir() {
            copy_tree(&entry.path(), &dest)?;
        } else if ty.is_symlink() {
            std::os::unix::fs::symlink(std::fs::read_link(entry.path())?, &dest)?;
        } else {
            std::fs::copy(entry.path(), &dest)
                .with_context(|| format!("copying {}", entry.path().display()))?;
        }
    }
    Ok(())
}

fn make_writable(dir: &Path) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let meta = std::fs::symlink_metadata(dir)?;
    if meta.file_type().is_symlink() {
        return Ok(());
    }
    let mut perm = meta.permissions();
    perm.set_mode(perm.mode() | 0o200);
    std::fs::set_permissions(dir, perm)?;
    if meta.is_dir() {
        for entry in std::fs::read_dir(dir)? {
            make_writable(&entry?.path())?;
        }
    }
    Ok(())
}

fn step(name: &str, cmd: &mut Command) -> Result<()> {
    eprintln!("sandbox: {name}");
    let t = Instant::now();
    run_status(cmd, format_args!("sandbox step `{name}` failed"))?;
    eprintln!("sandbox: ok {name} ({:.0} s)", t.elapsed().as_secs_f64());
    Ok(())
}

pub fn run(args: Args, layout: &Layout) -> Result<()> {
    let repo = repo_root();
    let source = crate::nix_check::flake_source(&repo)?;
    // Outside the checkout, as /build is in the Nix sandbox: nothing above the copy may be a
    // Cargo workspace (tools that discover their workspace by walking up would find the
    // checkout's). Stable per checkout, so cargo's incremental state survives between runs.
    let tag: String = sha2::Sha256::digest(repo.to_string_lossy().as_bytes())
        .iter()
        .take(6)
        .map(|b| format!("{b:02x}"))
        .collect();
    let sb = Sandbox::at(
        &std::env::temp_dir().join(format!("kiln-sandbox-{tag}")),
        repo.join("target"),
    );
    sb.prepare(&source)?;
    eprintln!(
        "sandbox: the flake's source set {} copied to {}; HOME={} (a file), no .toolchain/",
        source.display(),
        sb.src.display(),
        sb.home.display()
    );
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());

    // Like crane's vendoring: dependencies fetched once, everything after that offline.
    sb.home_is_unwritable(layout)?;
    step(
        "cargo fetch --locked",
        sb.command(layout, &cargo).args(["fetch", "--locked"]),
    )?;

    // nix/checks/nextest.nix: the workspace without xtask. (crane builds it in the release
    // profile; here the dev profile, which CI's other cargo commands share: the tests are the
    // same, the optimisation level is not.)
    sb.home_is_unwritable(layout)?;
    step(
        "cargo test --locked --offline --workspace --exclude xtask",
        sb.command(layout, &cargo).args([
            "test",
            "--locked",
            "--offline",
            "--workspace",
            "--exclude",
            "xtask",
        ]),
    )?;

    if !args.no_wheel {
        // nix/wheel.nix: its build step is nix/wheel-build.sh, with the same inputs.
        let pins = kiln_pins::Pins::load(&sb.src.join("Cargo.toml"))?;
        let recipe = crate::wheel::recipe(&pins, &sb.src)?;
        // The kiln CLI the script's finalize step and the audit use, as nix/wheel.nix takes
        // the kiln package.
        let kiln = crate::wheel::build_kiln_binary(layout, &repo)?;
        sb.home_is_unwritable(layout)?;
        step(
            "bash nix/wheel-build.sh (what `nix build .#wheel` runs)",
            sb.command(layout, "bash")
                // From the checkout, as Nix takes it (`${./wheel-build.sh}`): nix/ is not part
                // of the source set.
                .arg(repo.join("nix/wheel-build.sh"))
                .env("manylinux", &recipe.manylinux)
                .env("KILN", &kiln)
                .env("CARGO_NET_OFFLINE", "true"),
        )?;
        let wheel = std::fs::read_dir(sb.src.join("dist"))?
            .flatten()
            .map(|e| e.path())
            .find(|p| p.extension().is_some_and(|e| e == "whl"))
            .context("nix/wheel-build.sh left no wheel in dist/")?;
        // nix/checks/audit.nix: the release gate over that wheel.
        step(
            "kiln audit WHEEL --policy Cargo.toml",
            sb.command(layout, kiln)
                .arg("audit")
                .arg(&wheel)
                .arg("--policy")
                .arg(sb.src.join("Cargo.toml")),
        )?;
        eprintln!("sandbox: wheel {}", wheel.display());
    }
    sb.home_untouched()?;
    eprintln!("sandbox: HOME untouched, .toolchain/ absent from the source: the steps ran as in the Nix sandbox");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The sandbox really denies HOME (even to root) and really lacks .toolchain/: a command
    /// that writes under HOME fails, one that reads .toolchain/ finds nothing, and
    /// `home_untouched` notices a replaced HOME.
    #[test]
    fn home_is_unwritable_and_the_source_has_no_toolchain() {
        let dir = tempfile::tempdir().unwrap();
        let source = dir.path().join("source");
        std::fs::create_dir_all(source.join("crates/a")).unwrap();
        std::fs::write(source.join("Cargo.toml"), "[workspace]\n").unwrap();
        std::fs::write(source.join("crates/a/lib.rs"), "").unwrap();
        let sb = Sandbox::at(&dir.path().join("sb"), dir.path().join("target"));
        sb.prepare(&source).unwrap();
        let layout = crate::toolchain::checkout_layout();
        sb.home_is_unwritable(&layout).unwrap();
        for script in [
            "mkdir -p \"$HOME/.cache/zig\"",
            "echo x > \"$HOME/.config\"",
            "test -e .toolchain || test -e ../.toolchain",
        ] {
            let st = sb
                .command(&layout, "sh")
                .args(["-c", script])
                .status()
                .unwrap();
            assert!(!st.success(), "{script} succeeded in the sandbox");
        }
        assert!(sb.src.join("crates/a/lib.rs").is_file());
        sb.home_untouched().unwrap();
        std::fs::write(&sb.home, "changed").unwrap();
        assert!(sb.home_untouched().is_err());

        // A source set that carries .toolchain/ is refused.
        std::fs::create_dir_all(source.join(".toolchain")).unwrap();
        let e = sb.prepare(&source).unwrap_err().to_string();
        assert!(e.contains(".toolchain"), "{e}");
    }
}
