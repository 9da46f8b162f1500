//! The base: Debian bookworm from Debian's own packages (`debootstrap --variant=minbase`, plus
//! Debian's python3), as one normalized tarball — no image registry is needed or used. It is
//! cached under `target/image/base/`, keyed by the suite, variant, mirror and package list, so
//! only the first run pays for debootstrap; `docker import` makes it `kiln-base:bookworm`, the
//! `FROM` of the consumer's build container, and the same tarball is the image's first layer.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{bail, ensure, Context, Result};
use sha2::{Digest, Sha256};

use super::docker;
use super::layers::{sha256_file, tar_dir, TarOwner};

pub const SUITE: &str = "bookworm";
pub const VARIANT: &str = "minbase";
/// Where the packages come from: debootstrap's own default (no mirror argument), named in the
/// cache key and the summary.
pub const MIRROR: &str = "debootstrap default mirror";
/// Debian packages added to minbase: the image's Python.
pub const INCLUDE: &[&str] = &["python3"];
/// The tag `docker import` gives the base.
pub const TAG: &str = "kiln-base:bookworm";
/// The label on the imported base that names its cache key.
const KEY_LABEL: &str = "dev.kiln.base.key";
/// Bumped when the clean-up or the tarball's normalization changes.
const FORMAT: u32 = 2;

/// The cached base tarball.
pub struct Base {
    pub tar: PathBuf,
    /// `sha256:…` of the tarball: the layer's diff ID.
    pub diff_id: String,
    pub bytes: u64,
    pub key: String,
    /// Whether it came from the cache (no debootstrap ran).
    pub cached: bool,
    /// Where the cache was: the tarball under target/, or only the engine's `kiln-base` image
    /// whose key label matches (a fresh clone on a machine that built it before; `tar` is then
    /// absent, and the engine has the layer).
    pub from_engine: bool,
    /// `name version` of every package in it (dpkg-query), beside the tarball.
    pub packages: PathBuf,
    pub seconds: f64,
}

pub fn key() -> String {
    let mut h = Sha256::new();
    h.update(format!(
        "{FORMAT}\n{SUITE}\n{VARIANT}\n{MIRROR}\n{}\n",
        INCLUDE.join(",")
    ));
    hex16(&h.finalize())
}

fn hex16(bytes: &[u8]) -> String {
    bytes[..8].iter().map(|b| format!("{b:02x}")).collect()
}

/// The base tarball for [`key`], made by debootstrap when it is not cached (or `refresh`).
pub fn ensure(dir: &Path, epoch: u64, refresh: bool) -> Result<Base> {
    let started = Instant::now();
    let key = key();
    std::fs::create_dir_all(dir)?;
    let tar = dir.join(format!("{SUITE}-{VARIANT}-{key}.tar"));
    let sum = tar.with_extension("tar.sha256");
    let packages = tar.with_extension("packages");
    let cached = !refresh && tar.is_file() && sum.is_file() && packages.is_file();
    if !cached && !refresh {
        if let Some(base) = from_engine(&key, &packages)? {
            return Ok(Base {
                tar,
                seconds: started.elapsed().as_secs_f64(),
                ..base
            });
        }
    }
    if !cached {
        debootstrap(dir, &tar, &packages, epoch)?;
        let digest = sha256_file(&tar)?;
        std::fs::write(&sum, format!("{digest}\n"))?;
    }
    let diff_id = format!("sha256:{}", std::fs::read_to_string(&sum)?.trim());
    let bytes = std::fs::metadata(&tar)?.len();
    Ok(Base {
        tar,
        diff_id,
        bytes,
        key,
        cached,
        from_engine: false,
        packages,
        seconds: started.elapsed().as_secs_f64(),
    })
}

/// The base as the engine has it: `kiln-base:bookworm` labelled with `key` (what [`import`]
/// wrote), its one layer's diff ID (docker import's digest of the same tarball) and its package
/// list (dpkg-query in it, written to `packages`).
fn from_engine(key: &str, packages: &Path) -> Result<Option<Base>> {
    if docker::image_label(TAG, KEY_LABEL).as_deref() != Some(key) {
        return Ok(None);
    }
    let layers = docker::image_layers(TAG).unwrap_or_default();
    let [diff_id] = layers.as_slice() else {
        return Ok(None);
    };
    let list = docker::checked(&[
        "run",
        "--rm",
        "--network",
        "none",
        TAG,
        "dpkg-query",
        "-W",
        "-f",
        "${Package} ${Version}\\n",
    ])?;
    std::fs::write(packages, &list.stdout)?;
    let bytes = docker::image_size(TAG).unwrap_or(0);
    Ok(Some(Base {
        tar: PathBuf::new(),
        diff_id: diff_id.clone(),
        bytes,
        key: key.to_string(),
        cached: true,
        from_engine: true,
        packages: packages.to_path_buf(),
        seconds: 0.0,
    }))
}

fn debootstrap(dir: &Path, tar: &Path, packages: &Path, epoch: u64) -> Result<()> {
    if Command::new("debootstrap")
        .arg("--version")
        .output()
        .is_err()
    {
        bail!("debootstrap is not installed (Debian/Ubuntu: apt-get install debootstrap; .ci/run installs it)");
    }
    // SAFETY: geteuid has no preconditions.
    ensure!(
        unsafe { libc::geteuid() } == 0,
        "debootstrap must run as root (it unpacks packages with their owners and runs their scripts in a chroot)"
    );
    let rootfs = dir.join("rootfs.tmp");
    if rootfs.exists() {
        std::fs::remove_dir_all(&rootfs)
            .with_context(|| format!("removing the unfinished {}", rootfs.display()))?;
    }
    eprintln!(
        "image: base: debootstrap --variant={VARIANT} --include={} {SUITE} (first run only: a few minutes; its progress follows)",
        INCLUDE.join(",")
    );
    let t = Instant::now();
    let status = Command::new("debootstrap")
        .arg(format!("--variant={VARIANT}"))
        .arg(format!("--include={}", INCLUDE.join(",")))
        .arg(SUITE)
        .arg(&rootfs)
        .stdout(std::io::stderr())
        .status()
        .context("running debootstrap")?;
    ensure!(status.success(), "debootstrap failed ({status})");
    eprintln!(
        "image: base: debootstrap done in {:.0} s",
        t.elapsed().as_secs_f64()
    );
    let list = crate::toolchain::run_checked(
        Command::new("dpkg-query")
            .arg(format!(
                "--admindir={}",
                rootfs.join("var/lib/dpkg").display()
            ))
            .args(["-W", "-f", "${Package} ${Version}\\n"]),
    )
    .context("listing the base's packages")?;
    std::fs::write(packages, &list.stdout)?;
    clean(&rootfs, epoch)?;
    eprintln!("image: base: writing {}", tar.display());
    // Owners kept (Debian has root:shadow and the like); times clamped; sorted.
    tar_dir(&rootfs, tar, epoch, TarOwner::Keep)?;
    std::fs::remove_dir_all(&rootfs)?;
    Ok(())
}

/// What a container image does not carry: the downloaded .debs and package lists (apt-get
/// update fetches them again), logs, and what the engine provides at run time (/dev,
/// resolv.conf, hostname). The one date debootstrap writes into a file, each account's "last
/// password change" day in /etc/shadow, becomes SOURCE_DATE_EPOCH's day.
fn clean(rootfs: &Path, epoch: u64) -> Result<()> {
    let shadow = rootfs.join("etc/shadow");
    if let Ok(text) = std::fs::read_to_string(&shadow) {
        std::fs::write(&shadow, shadow_at(&text, epoch / 86400))?;
    }
    for dir in [
        "var/cache/apt/archives",
        "var/lib/apt/lists",
        "var/log",
        "dev",
        "run",
        "tmp",
    ] {
        let d = rootfs.join(dir);
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            let keep_dir = e.file_type().is_ok_and(|t| t.is_dir())
                && matches!(
                    p.file_name().and_then(|n| n.to_str()),
                    Some("partial" | "apt")
                );
            if keep_dir {
                continue;
            }
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                std::fs::remove_dir_all(&p)?;
            } else {
                std::fs::remove_file(&p)?;
            }
        }
    }
    for f in [
        "var/cache/apt/pkgcache.bin",
        "var/cache/apt/srcpkgcache.bin",
        "etc/resolv.conf",
        "etc/hostname",
        "etc/machine-id",
        "var/cache/ldconfig/aux-cache",
    ] {
        let _ = std::fs::remove_file(rootfs.join(f));
    }
    Ok(())
}

/// `docker import` of the base as [`TAG`], unless the engine has it for this key and diff ID
/// already. Either way the engine has the base layer afterwards (the image's load relies on it).
pub fn import(base: &Base) -> Result<()> {
    if docker::image_label(TAG, KEY_LABEL).as_deref() == Some(base.key.as_str())
        && docker::image_layers(TAG).unwrap_or_default() == [base.diff_id.clone()]
    {
        return Ok(());
    }
    eprintln!("image: base: docker import as {TAG}");
    let tar = base.tar.display().to_string();
    docker::checked(&[
        "import",
        "--change",
        &format!("LABEL {KEY_LABEL}={}", base.key),
        "--change",
        "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "--change",
        "ENV LANG=C.UTF-8",
        "--change",
        "CMD [\"bash\"]",
        &tar,
        TAG,
    ])?;
    Ok(())
}

/// /etc/shadow with every numeric "last change" field (the third) set to `day`.
fn shadow_at(text: &str, day: u64) -> String {
    text.lines()
        .map(|line| {
            let mut fields: Vec<&str> = line.split(':').collect();
            let day = day.to_string();
            if fields.len() > 2
                && !fields[2].is_empty()
                && fields[2].bytes().all(|b| b.is_ascii_digit())
            {
                fields[2] = &day;
                return fields.join(":");
            }
            line.to_string()
        })
        .map(|l| l + "\n")
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn shadow_days_are_the_epochs() {
        let got = super::shadow_at("root:*:20793:0:99999:7:::\nnobody:*::0:99999:7:::\n", 19000);
        assert_eq!(got, "root:*:19000:0:99999:7:::\nnobody:*::0:99999:7:::\n");
    }

    #[test]
    fn the_key_names_the_package_list() {
        let k = super::key();
        assert_eq!(k.len(), 16);
        assert!(k.chars().all(|c| c.is_ascii_hexdigit()));
    }
}
