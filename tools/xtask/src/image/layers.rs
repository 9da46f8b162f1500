//! The image's layers above the base, and the image itself, made without a Dockerfile so that
//! every byte is decided here:
//!
//! - the runtime layer: pip (pinned) and the NVIDIA runtime wheels kiln's Requires-Dist names,
//!   at the exact releases the pins' `version` gives, installed by pip *inside* a container of
//!   the base (so the paths are Debian python3's own scheme, /usr/local/lib/python3.X/dist-packages)
//!   from a wheelhouse mounted read-only, with no network. Cached by the base's diff ID and the
//!   wheel files' hashes: it is ~1.8 GB and changes only when a pin does.
//! - the kiln layer: kiln's ops wheel (pip, same way, `--no-deps`) and the `kiln` CLI binary
//!   at /usr/local/bin/kiln.
//!
//! Each layer is a tarball normalized by GNU tar (names sorted, times clamped to
//! SOURCE_DATE_EPOCH, owners numeric) and the image is a `docker save`-format archive (config,
//! manifest, layers) given to `docker load` — the format nixpkgs' dockerTools writes too. The
//! image ID is the hash of a config that holds no build-time clock, so the same inputs give the
//! same ID.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{bail, ensure, Context, Result};
use sha2::{Digest, Sha256};

use super::docker;

/// The pip the image carries (and that installs the layers, run from its own wheel).
pub const PIP: &str = "25.0.1";

pub enum TarOwner {
    /// Keep each file's numeric owner (the Debian base).
    Keep,
    /// Everything root:root (what pip installed as root anyway).
    Root,
}

/// `dir`'s contents as a normalized tarball at `out`.
pub fn tar_dir(dir: &Path, out: &Path, epoch: u64, owner: TarOwner) -> Result<()> {
    let mut cmd = Command::new("tar");
    cmd.arg("--create")
        .arg("--file")
        .arg(out)
        .arg("--directory")
        .arg(dir)
        .args(["--sort=name", "--format=gnu", "--numeric-owner"])
        .arg(format!("--mtime=@{epoch}"))
        .arg("--clamp-mtime");
    if let TarOwner::Root = owner {
        cmd.args(["--owner=0", "--group=0"]);
    }
    cmd.arg(".");
    crate::toolchain::run_checked(&mut cmd).context("GNU tar (--sort=name needs tar >= 1.28)")?;
    Ok(())
}

pub fn sha256_file(path: &Path) -> Result<String> {
    let mut f = std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    Ok(h.finalize().iter().map(|b| format!("{b:02x}")).collect())
}

/// A layer tarball and its diff ID.
#[derive(Clone)]
pub struct Layer {
    pub tar: PathBuf,
    pub diff_id: String,
    pub bytes: u64,
    /// What made it (the image's history entry).
    pub created_by: String,
    pub cached: bool,
    /// The engine has this layer (under the layers below it), so `docker load` needs no bytes
    /// of it: the archive carries an empty placeholder, and the engine, finding the layer chain,
    /// never reads it (a missing chain fails the load on its diff ID, never silently).
    pub in_engine: bool,
}

impl Layer {
    fn from_tar(tar: PathBuf, created_by: String, cached: bool) -> Result<Layer> {
        let sum = tar.with_extension("tar.sha256");
        let digest = match std::fs::read_to_string(&sum) {
            Ok(s) if cached && s.trim().len() == 64 => s.trim().to_string(),
            _ => {
                let d = sha256_file(&tar)?;
                std::fs::write(&sum, format!("{d}\n"))?;
                d
            }
        };
        Ok(Layer {
            bytes: std::fs::metadata(&tar)?.len(),
            tar,
            diff_id: format!("sha256:{digest}"),
            created_by,
            cached,
            in_engine: false,
        })
    }
}

/// The Python of the base image, as pip needs to know it to download for it.
pub struct Python {
    /// "3.11"
    pub version: String,
    /// glibc (major, minor) of the base.
    pub glibc: (u32, u32),
    /// Where pip installs (Debian: /usr/local/lib/python3.X/dist-packages).
    pub site: String,
}

pub fn base_python(image: &str) -> Result<Python> {
    let out = docker::checked(&[
        "run",
        "--rm",
        "--network",
        "none",
        image,
        "python3",
        "-c",
        "import sys, sysconfig, platform; print('%d.%d' % sys.version_info[:2]); \
         print(platform.libc_ver()[1]); print(sysconfig.get_path('purelib'))",
    ])?;
    let text = String::from_utf8_lossy(&out.stdout);
    let mut lines = text.lines().map(str::trim);
    let version = lines.next().unwrap_or_default().to_string();
    let glibc = lines.next().unwrap_or_default();
    let site = lines.next().unwrap_or_default().to_string();
    let glibc = glibc
        .split_once('.')
        .and_then(|(a, b)| Some((a.parse().ok()?, b.parse().ok()?)))
        .with_context(|| format!("the base's python3 reports glibc {glibc:?}"))?;
    ensure!(
        version.starts_with("3.") && site.starts_with('/'),
        "the base's python3 printed {text:?}"
    );
    Ok(Python {
        version,
        glibc,
        site,
    })
}

/// Requires-Dist of the wheel, each pinned to the pins' exact `version` where the pins name the
/// distribution (the release the tests use), else as declared.
pub fn pinned_requirements(
    requires_dist: &[String],
    pins: &kiln_pins::Pins,
) -> Vec<(String, bool)> {
    requires_dist
        .iter()
        .map(|r| {
            let name: String = r
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
                .collect();
            let norm = |s: &str| s.to_ascii_lowercase().replace('_', "-");
            match pins
                .runtime
                .values()
                .find(|l| norm(&l.wheel) == norm(&name))
            {
                Some(lib) => (format!("{}=={}", lib.wheel, lib.version), true),
                None => (r.clone(), false),
            }
        })
        .collect()
}

/// Where the wheelhouse lives: `KILN_IMAGE_WHEELHOUSE`, else the machine's cache
/// (`$XDG_CACHE_HOME/kiln/image-wheelhouse`, `~/.cache/kiln/image-wheelhouse`), so a fresh clone
/// does not download ~1.1 GB again; `target/image/wheelhouse` only with no home. Not pip's own
/// HTTP cache: behind this machine's proxy the wheels come without Cache-Control, ETag or
/// Last-Modified, so pip stores nothing there (`pip cache info`: 0 files). The wheels are pinned
/// exact releases and checked by name and hash (the runtime key), so one directory serves every
/// checkout.
pub fn wheelhouse_dir(work: &Path) -> PathBuf {
    if let Some(dir) = std::env::var_os("KILN_IMAGE_WHEELHOUSE").filter(|d| !d.is_empty()) {
        return PathBuf::from(dir);
    }
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME")
                .filter(|d| !d.is_empty())
                .map(|h| PathBuf::from(h).join(".cache"))
        });
    match cache {
        Some(c) => c.join("kiln/image-wheelhouse"),
        None => work.join("wheelhouse"),
    }
}

/// The wheel files for `requirements` (and pip) in `dir`: taken from `dir` alone when it already
/// holds them, else downloaded by the host's pip for the base's Python and glibc.
pub fn wheelhouse(dir: &Path, requirements: &[String], py: &Python) -> Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir)?;
    let python = std::env::var("KILN_PYTHON").unwrap_or_else(|_| "python3".into());
    let mut reqs = vec![format!("pip=={PIP}")];
    reqs.extend(requirements.iter().cloned());
    let abi = format!("cp{}", py.version.replace('.', ""));
    let mut platforms = vec!["manylinux2014_x86_64".to_string()];
    for minor in 17..=py.glibc.1 {
        platforms.push(format!("manylinux_2_{minor}_x86_64"));
    }
    let pip = |offline: bool| {
        let mut c = Command::new(&python);
        c.args([
            "-m",
            "pip",
            "download",
            "--disable-pip-version-check",
            "--quiet",
        ])
        .args(["--only-binary=:all:", "--implementation", "cp"])
        .args([
            "--python-version",
            &py.version,
            "--abi",
            &abi,
            "--abi",
            "abi3",
            "--abi",
            "none",
        ])
        .arg("--dest")
        .arg(dir)
        .env_remove("PYTHONPATH");
        for p in &platforms {
            c.args(["--platform", p]);
        }
        if offline {
            c.arg("--no-index").arg("--find-links").arg(dir);
        }
        c.args(&reqs).stdin(Stdio::null());
        c
    };
    let offline_ok = pip(true)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if offline_ok {
        eprintln!(
            "image: wheelhouse: reused {} (holds every requirement; no download)",
            dir.display()
        );
    } else {
        eprintln!(
            "image: wheelhouse: pip download {} (for CPython {} on glibc {}.{}) into {}",
            reqs.join(" "),
            py.version,
            py.glibc.0,
            py.glibc.1,
            dir.display()
        );
        let status = pip(false)
            .stdout(std::io::stderr())
            .status()
            .context("running pip download")?;
        ensure!(status.success(), "pip download failed ({status})");
    }
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "whl"))
        .collect();
    files.sort();
    Ok(files)
}

/// Hex digest of the wheel files (name and bytes) and what is asked of them: the runtime
/// layer's cache key, with the base under it.
pub fn runtime_key(
    base_diff_id: &str,
    wheels: &[PathBuf],
    requirements: &[String],
) -> Result<String> {
    let mut h = Sha256::new();
    h.update(format!(
        "layer 1\n{base_diff_id}\npip=={PIP}\n{}\n",
        requirements.join("\n")
    ));
    for w in wheels {
        h.update(format!(
            "{} {}\n",
            w.file_name().unwrap_or_default().to_string_lossy(),
            wheel_digest(w)?
        ));
    }
    Ok(h.finalize()[..8]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect())
}

/// A wheel's sha256, remembered beside it (`NAME.whl.sha256`: digest, size, mtime) so that a
/// warm run does not hash 1 GB of wheels again; recomputed when the size or mtime differ.
fn wheel_digest(wheel: &Path) -> Result<String> {
    let meta = std::fs::metadata(wheel)?;
    let mtime = meta
        .modified()?
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let stamp = format!("{} {mtime}", meta.len());
    let mut side = wheel.as_os_str().to_owned();
    side.push(".sha256");
    let side = PathBuf::from(side);
    if let Ok(text) = std::fs::read_to_string(&side) {
        if let Some((digest, rest)) = text.trim().split_once(' ') {
            if rest == stamp && digest.len() == 64 {
                return Ok(digest.to_string());
            }
        }
    }
    let digest = sha256_file(wheel)?;
    std::fs::write(&side, format!("{digest} {stamp}\n"))?;
    Ok(digest)
}

/// pip inside a container of `base_image`, no network: `requirements` from the wheelhouse (and
/// `extra` mounted at /extra) into `stage` as its root. The pip that runs is the pinned pip's
/// wheel itself (`python3 pip-X.whl/pip`), so the base needs no pip.
pub fn pip_install(
    base_image: &str,
    wheelhouse: &Path,
    extra: Option<&Path>,
    stage: &Path,
    requirements: &[String],
    no_deps: bool,
) -> Result<()> {
    if stage.exists() {
        std::fs::remove_dir_all(stage)?;
    }
    std::fs::create_dir_all(stage)?;
    let pip_whl = format!("/wheelhouse/pip-{PIP}-py3-none-any.whl/pip");
    let mut cmd = docker::docker();
    cmd.args(["run", "--rm", "--network", "none"])
        .arg("-v")
        .arg(docker::mount(wheelhouse, "/wheelhouse", true)?)
        .arg("-v")
        .arg(docker::mount(stage, "/out", false)?);
    let mut find_links = vec!["--find-links", "/wheelhouse"];
    if let Some(extra) = extra {
        cmd.arg("-v").arg(docker::mount(extra, "/extra", true)?);
        find_links.extend(["--find-links", "/extra"]);
    }
    cmd.args([base_image, "python3", &pip_whl, "install"])
        .args([
            "--no-index",
            "--root",
            "/out",
            "--no-compile",
            "--no-cache-dir",
        ])
        .args([
            "--disable-pip-version-check",
            "--no-warn-script-location",
            "--root-user-action=ignore",
            "--quiet",
        ])
        .args(&find_links);
    if no_deps {
        cmd.arg("--no-deps");
    }
    cmd.args(requirements);
    let status = cmd
        .stdout(std::io::stderr())
        .status()
        .context("running pip in a container")?;
    ensure!(
        status.success(),
        "pip install {} in the base container failed ({status})",
        requirements.join(" ")
    );
    Ok(())
}

/// The runtime layer (pip and the NVIDIA runtime wheels), from the cache or built.
pub fn runtime_layer(
    work: &Path,
    base_image: &str,
    base_diff_id: &str,
    wheelhouse: &Path,
    wheels: &[PathBuf],
    requirements: &[String],
    epoch: u64,
) -> Result<Layer> {
    let key = runtime_key(base_diff_id, wheels, requirements)?;
    let dir = work.join("layers");
    std::fs::create_dir_all(&dir)?;
    let tar = dir.join(format!("runtime-{key}.tar"));
    let created_by = format!(
        "pip install --no-index pip=={PIP} {} (python3 -m pip from the pinned pip's wheel, no network)",
        requirements.join(" ")
    );
    if let Some(diff_id) = runtime_in_engine(&key, base_diff_id) {
        eprintln!(
            "image: runtime layer: reused from the engine ({RUNTIME_TAG} is labelled {RUNTIME_KEY_LABEL}={key}: same base, wheels and requirements); no pip install"
        );
        return Ok(Layer {
            bytes: docker::image_label(RUNTIME_TAG, RUNTIME_BYTES_LABEL)
                .and_then(|b| b.parse().ok())
                .unwrap_or(0),
            tar,
            diff_id,
            created_by,
            cached: true,
            in_engine: true,
        });
    }
    if tar.is_file() && tar.with_extension("tar.sha256").is_file() {
        eprintln!("image: runtime layer: reused from {}", tar.display());
        return Layer::from_tar(tar, created_by, true);
    }
    eprintln!(
        "image: runtime layer (key {key}: neither {RUNTIME_TAG} with that label nor {} exists): {created_by}",
        tar.display()
    );
    let stage = work.join("stage/runtime");
    let mut reqs = vec![format!("pip=={PIP}")];
    reqs.extend(requirements.iter().cloned());
    pip_install(base_image, wheelhouse, None, &stage, &reqs, false)?;
    eprintln!("image: runtime layer: writing {}", tar.display());
    let partial = tar.with_extension("tar.partial");
    tar_dir(&stage, &partial, epoch, TarOwner::Root)?;
    std::fs::rename(&partial, &tar)?;
    std::fs::remove_dir_all(&stage)?;
    Layer::from_tar(tar, created_by, false)
}

/// The engine's image of the base and the runtime layer, labelled with the runtime key: how a
/// fresh clone (an empty target/) finds the runtime layer without pip.
pub const RUNTIME_TAG: &str = "kiln-runtime:bookworm";
const RUNTIME_KEY_LABEL: &str = "dev.kiln.runtime.key";
const RUNTIME_BYTES_LABEL: &str = "dev.kiln.runtime.bytes";

/// The runtime layer's diff ID when the engine's [`RUNTIME_TAG`] has `key` on `base_diff_id`.
fn runtime_in_engine(key: &str, base_diff_id: &str) -> Option<String> {
    if docker::image_label(RUNTIME_TAG, RUNTIME_KEY_LABEL).as_deref() != Some(key) {
        return None;
    }
    match docker::image_layers(RUNTIME_TAG)?.as_slice() {
        [base, runtime] if base == base_diff_id => Some(runtime.clone()),
        _ => None,
    }
}

/// Tags base + runtime in the engine as [`RUNTIME_TAG`], labelled with `key`, unless it is
/// already; called after the image is loaded, so the engine has both layers and the archive
/// carries only placeholders.
pub fn label_runtime(work: &Path, key: &str, base: &Layer, runtime: &Layer) -> Result<bool> {
    if runtime_in_engine(key, &base.diff_id).as_deref() == Some(runtime.diff_id.as_str()) {
        return Ok(false);
    }
    let config = serde_json::json!({
        "architecture": "amd64",
        "os": "linux",
        "created": rfc3339(0),
        "config": {
            "Env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8"],
            "Labels": {
                RUNTIME_KEY_LABEL: key,
                RUNTIME_BYTES_LABEL: runtime.bytes.to_string(),
            },
        },
        "rootfs": { "type": "layers", "diff_ids": [&base.diff_id, &runtime.diff_id] },
        "history": [
            { "created": rfc3339(0), "created_by": base.created_by },
            { "created": rfc3339(0), "created_by": runtime.created_by },
        ],
    });
    let mut b = base.clone();
    let mut r = runtime.clone();
    b.in_engine = true;
    r.in_engine = true;
    load(work, RUNTIME_TAG, &config, &[&b, &r])?;
    Ok(true)
}

/// The kiln layer: the ops wheel (pip, `--no-deps`: the runtime layer holds its dependencies)
/// and the `kiln` binary.
pub fn kiln_layer(
    work: &Path,
    base_image: &str,
    wheelhouse: &Path,
    wheel: &Path,
    kiln_bin: &Path,
    epoch: u64,
) -> Result<Layer> {
    let stage = work.join("stage/kiln");
    let wheel_dir = work.join("stage/kiln-wheel");
    if wheel_dir.exists() {
        std::fs::remove_dir_all(&wheel_dir)?;
    }
    std::fs::create_dir_all(&wheel_dir)?;
    let name = wheel.file_name().context("the wheel has no file name")?;
    std::fs::copy(wheel, wheel_dir.join(name))?;
    let dist = name
        .to_string_lossy()
        .split('-')
        .take(2)
        .collect::<Vec<_>>()
        .join("==");
    pip_install(
        base_image,
        wheelhouse,
        Some(&wheel_dir),
        &stage,
        std::slice::from_ref(&dist),
        true,
    )?;
    let bin = stage.join("usr/local/bin");
    std::fs::create_dir_all(&bin)?;
    std::fs::copy(kiln_bin, bin.join("kiln"))
        .with_context(|| format!("copying {}", kiln_bin.display()))?;
    let dir = work.join("layers");
    std::fs::create_dir_all(&dir)?;
    let tar = dir.join("kiln.tar");
    tar_dir(&stage, &tar, epoch, TarOwner::Root)?;
    std::fs::remove_dir_all(&stage)?;
    std::fs::remove_dir_all(&wheel_dir)?;
    Layer::from_tar(
        tar,
        format!(
            "pip install --no-index --no-deps {dist} ({}); kiln CLI at /usr/local/bin/kiln",
            name.to_string_lossy()
        ),
        false,
    )
}

/// What the image's config says besides its layers.
pub struct ImageConfig<'a> {
    pub epoch: u64,
    pub version: &'a str,
    pub revision: &'a str,
    pub base_created_by: String,
}

/// The image config (its hash is the image ID) for `layers`, bottom first.
pub fn config(cfg: &ImageConfig, layers: &[(&str, &str)]) -> serde_json::Value {
    let created = rfc3339(cfg.epoch);
    let history: Vec<serde_json::Value> = std::iter::once(cfg.base_created_by.as_str())
        .chain(layers.iter().skip(1).map(|l| l.1))
        .map(|by| serde_json::json!({ "created": created, "created_by": by }))
        .collect();
    serde_json::json!({
        "architecture": "amd64",
        "os": "linux",
        "created": created,
        "config": {
            "Env": [
                "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                "LANG=C.UTF-8",
                // Debian's python3 is "externally managed" (PEP 668); in an image, pip
                // installs into /usr/local as the image's own layers do.
                "PIP_BREAK_SYSTEM_PACKAGES=1",
                // What the NVIDIA container toolkit reads: expose the GPUs and mount the
                // driver's compute libraries (libcuda.so.1) and nvidia-smi at run time.
                "NVIDIA_VISIBLE_DEVICES=all",
                "NVIDIA_DRIVER_CAPABILITIES=compute,utility",
            ],
            "Cmd": ["kiln", "doctor", "--runtime-only"],
            "Labels": {
                "org.opencontainers.image.title": "kiln",
                "org.opencontainers.image.version": cfg.version,
                "org.opencontainers.image.revision": cfg.revision,
                "org.opencontainers.image.base.name": "debian:bookworm (debootstrap --variant=minbase)",
            },
        },
        "rootfs": {
            "type": "layers",
            "diff_ids": layers.iter().map(|l| l.0).collect::<Vec<_>>(),
        },
        "history": history,
    })
}

/// Writes the `docker save` layout (layers as links to the cached tarballs) and pipes it, with
/// the links followed, into `docker load`, unless the engine has this image ID already. Returns
/// the image ID and whether it was loaded.
pub fn load(
    work: &Path,
    tag: &str,
    config: &serde_json::Value,
    layers: &[&Layer],
) -> Result<(String, bool)> {
    let bytes = serde_json::to_vec(config)?;
    let hex: String = Sha256::digest(&bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let id = format!("sha256:{hex}");
    if docker::image_id(&id).is_some() {
        docker::checked(&["tag", &id, tag])?;
        return Ok((id, false));
    }
    let dir = work.join("archive");
    if dir.exists() {
        std::fs::remove_dir_all(&dir)?;
    }
    std::fs::create_dir_all(&dir)?;
    std::fs::write(dir.join(format!("{hex}.json")), &bytes)?;
    let mut names = Vec::new();
    for layer in layers {
        let d = layer.diff_id.trim_start_matches("sha256:");
        std::fs::create_dir_all(dir.join(d))?;
        if layer.in_engine {
            std::fs::write(dir.join(d).join("layer.tar"), b"")?;
        } else {
            std::os::unix::fs::symlink(layer.tar.canonicalize()?, dir.join(d).join("layer.tar"))?;
        }
        names.push(format!("{d}/layer.tar"));
    }
    let manifest = serde_json::json!([{ "Config": format!("{hex}.json"), "RepoTags": [tag], "Layers": names }]);
    std::fs::write(dir.join("manifest.json"), serde_json::to_vec(&manifest)?)?;
    let total: u64 = layers
        .iter()
        .filter(|l| !l.in_engine)
        .map(|l| l.bytes)
        .sum();
    eprintln!(
        "image: docker load of {tag} ({:.0} MiB; {} of {} layers already in the engine, sent as placeholders)",
        total as f64 / 1048576.0,
        layers.iter().filter(|l| l.in_engine).count(),
        layers.len()
    );
    let mut tar = Command::new("tar")
        .arg("--create")
        .arg("--dereference")
        .arg("--directory")
        .arg(&dir)
        .args(["--format=gnu", "."])
        .stdout(Stdio::piped())
        .spawn()
        .context("starting tar")?;
    let stdout = tar.stdout.take().context("tar's stdout")?;
    let load = Command::new("docker")
        .arg("load")
        .stdin(stdout)
        .output()
        .context("running docker load")?;
    let tar_status = tar.wait()?;
    if !load.status.success() || !tar_status.success() {
        bail!(
            "docker load failed ({}; tar {tar_status}): {}",
            load.status,
            String::from_utf8_lossy(&load.stderr).trim()
        );
    }
    std::fs::remove_dir_all(&dir)?;
    let loaded = docker::image_id(tag);
    ensure!(
        loaded.as_deref() == Some(id.as_str()),
        "docker load gave {tag} the ID {loaded:?}, not the config's hash {id}"
    );
    Ok((id, true))
}

/// `1970-01-01T00:00:00Z` for a Unix time (UTC; civil-from-days, proleptic Gregorian).
pub fn rfc3339(epoch: u64) -> String {
    let days = (epoch / 86400) as i64;
    let secs = epoch % 86400;
    let z = days + 719468;
    let era = z.div_euclid(146097);
    let doe = z - era * 146097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        secs / 3600,
        secs / 60 % 60,
        secs % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_of_known_times() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(951782400), "2000-02-29T00:00:00Z");
        assert_eq!(rfc3339(1798761599), "2026-12-31T23:59:59Z");
    }

    #[test]
    fn requirements_take_the_pins_exact_release() {
        let pins = crate::toolchain::pins().unwrap();
        let cudnn = &pins.runtime["cudnn"];
        let got = pinned_requirements(
            &[
                format!("{}{}", cudnn.wheel, cudnn.requires),
                "numpy>=2".into(),
            ],
            &pins,
        );
        assert_eq!(
            got[0],
            (format!("{}=={}", cudnn.wheel, cudnn.version), true)
        );
        assert_eq!(got[1], ("numpy>=2".to_string(), false));
    }

    #[test]
    fn the_config_hash_has_no_clock_in_it() {
        let cfg = ImageConfig {
            epoch: 1_700_000_000,
            version: "0.1.0",
            revision: "abc",
            base_created_by: "debootstrap".into(),
        };
        let layers = [("sha256:aa", "base"), ("sha256:bb", "pip install")];
        let a = serde_json::to_vec(&config(&cfg, &layers)).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(1100));
        let b = serde_json::to_vec(&config(&cfg, &layers)).unwrap();
        assert_eq!(a, b);
        let v: serde_json::Value = serde_json::from_slice(&a).unwrap();
        assert_eq!(v["created"], "2023-11-14T22:13:20Z");
        assert_eq!(v["history"][1]["created_by"], "pip install");
        assert!(!String::from_utf8(a).unwrap().contains("libcuda"));
    }
}
