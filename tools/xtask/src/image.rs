//! `cargo xtask image`: kiln's container image without Nix (the flake's `packages.image` is the
//! Nix route), loaded into the local Docker engine, then checked without a GPU.
//!
//! 1. The base (`image/base.rs`): `debootstrap --variant=minbase --include=python3 bookworm`
//!    from Debian's mirror (there is no image registry), a normalized tarball cached under
//!    `target/image/base/`, `docker import`ed as `kiln-base:bookworm` labelled with its key; a
//!    fresh clone (empty target/) reuses that engine image when the label matches.
//! 2. The layers (`image/layers.rs`): pip and the NVIDIA runtime wheels the ops wheel's
//!    Requires-Dist names, at the pins' exact releases (cached, ~1.8 GB, under target/ and as the
//!    engine's `kiln-runtime:bookworm` labelled with its key), then kiln's wheel and
//!    the `kiln` CLI; no file that provides `libcuda`. Assembled as a `docker save` archive with
//!    SOURCE_DATE_EPOCH times and `docker load`ed as `kiln:<version>`.
//! 3. The checks (`image/verify.rs`): the image's file list has no `libcuda.so*`; `kiln doctor
//!    --runtime-only` in it says why it cannot run (no driver) and exits 1, with no stub found;
//!    `import kiln` and the no-driver error; `kiln audit` of its site-packages.
//! 4. With `--consumer` (`image/consumer.rs`): checks/consumer's kernels built in a container
//!    with no driver, the kernel cache on a volume, twice; the second reuses every kernel.
//!
//! Needs a running Docker engine (`docker info`), root (debootstrap), GNU tar, and, the first
//! time, Debian's mirror and PyPI. `--json` prints what was built and checked on stdout.

mod base;
mod consumer;
mod docker;
mod layers;
mod verify;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use serde_json::{json, Value};

use crate::toolchain::{pins, repo_root, Layout};
use crate::wheel;

#[derive(clap::Args)]
pub struct Args {
    /// kiln's ops wheel (default: build one with `cargo xtask wheel --no-audit`).
    #[arg(long)]
    pub wheel: Option<PathBuf>,
    /// The image's tag (default: kiln:<the wheel's version>).
    #[arg(long)]
    pub tag: Option<String>,
    /// Run debootstrap again even when the base tarball is cached.
    #[arg(long)]
    pub refresh_base: bool,
    /// Build and load the image, check nothing.
    #[arg(long)]
    pub no_verify: bool,
    /// Also build checks/consumer's kernels in a container with no driver, twice, with the kernel
    /// cache on a volume (the second build must compile nothing).
    #[arg(long)]
    pub consumer: bool,
    /// With --consumer: keep the cache volume's contents (by default it is emptied first, so the
    /// first build compiles every kernel).
    #[arg(long)]
    pub keep_cache: bool,
    /// Build nothing: run the image checks (libcuda scan, doctor, import, audit) on this image,
    /// e.g. one derived `FROM kiln:<version>`.
    #[arg(long, value_name = "IMAGE", conflicts_with_all = ["wheel", "consumer", "no_verify"])]
    pub check: Option<String>,
    /// Print a JSON summary on stdout (progress stays on stderr).
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: Args, layout: &Layout) -> Result<()> {
    let started = Instant::now();
    let engine = docker::engine()?;
    let root = repo_root();
    let work = wheel::target_dir().join("image");
    std::fs::create_dir_all(&work)?;
    let epoch = source_date_epoch(&root);
    let revision = git(&root, &["rev-parse", "HEAD"]).unwrap_or_else(|| "unknown".into());
    if let Some(image) = &args.check {
        return check_only(image, &root, args.json);
    }
    let mut times = serde_json::Map::new();
    let mut lap = {
        let mut t = Instant::now();
        move |what: &str, times: &mut serde_json::Map<String, Value>| {
            let s = t.elapsed().as_secs_f64();
            times.insert(what.into(), json!((s * 10.0).round() / 10.0));
            t = Instant::now();
        }
    };

    // 1. The base.
    let base = base::ensure(&work.join("base"), epoch, args.refresh_base)?;
    base::import(&base)?;
    let base_how = if base.from_engine {
        format!(
            "reused from the engine: {} is labelled with this key {} (suite, variant, mirror, packages), no tarball under target/ needed",
            base::TAG,
            base.key
        )
    } else if base.cached {
        format!("reused from {}", base.tar.display())
    } else {
        format!("debootstrapped now into {}", base.tar.display())
    };
    eprintln!(
        "image: base {} ({:.0} MiB in {:.0} s): {base_how}",
        base.diff_id,
        base.bytes as f64 / 1048576.0,
        base.seconds,
    );
    lap("base", &mut times);

    // 2. The layers and the image.
    let kiln_bin = wheel::build_kiln_binary(layout, &root)?;
    let wheel_path = match &args.wheel {
        Some(w) => w.clone(),
        None => {
            wheel::build(&wheel::Args {
                out: Some(work.join("wheel")),
                no_audit: true,
                test: false,
                offline: false,
            })?
            .wheel
        }
    };
    let (version, requires_dist) = wheel_metadata(&wheel_path)?;
    lap("kiln binary and wheel", &mut times);
    let py = layers::base_python(base::TAG)?;
    let pinned = layers::pinned_requirements(&requires_dist, &pins()?);
    for (req, exact) in &pinned {
        if !exact {
            eprintln!("image: note: {req} is not in the pins; installed as the wheel declares it");
        }
    }
    let requirements: Vec<String> = pinned.into_iter().map(|p| p.0).collect();
    let wheelhouse = layers::wheelhouse_dir(&work);
    let wheels = layers::wheelhouse(&wheelhouse, &requirements, &py)?;
    lap("wheelhouse", &mut times);
    let runtime = layers::runtime_layer(
        &work,
        base::TAG,
        &base.diff_id,
        &wheelhouse,
        &wheels,
        &requirements,
        epoch,
    )?;
    lap("runtime layer", &mut times);
    let kiln = layers::kiln_layer(&work, base::TAG, &wheelhouse, &wheel_path, &kiln_bin, epoch)?;
    lap("kiln layer", &mut times);
    let tag = args
        .tag
        .clone()
        .unwrap_or_else(|| format!("kiln:{version}"));
    let base_layer = layers::Layer {
        tar: base.tar.clone(),
        diff_id: base.diff_id.clone(),
        bytes: base.bytes,
        created_by: format!(
            "debootstrap --variant={} --include={} {} {} (packages: {})",
            base::VARIANT,
            base::INCLUDE.join(","),
            base::SUITE,
            base::MIRROR,
            base.packages.display()
        ),
        cached: base.cached,
        // base::import made sure the engine has it.
        in_engine: true,
    };
    let all = [&base_layer, &runtime, &kiln];
    let ids: Vec<(&str, &str)> = all
        .iter()
        .map(|l| (l.diff_id.as_str(), l.created_by.as_str()))
        .collect();
    let config = layers::config(
        &layers::ImageConfig {
            epoch,
            version: &version,
            revision: &revision,
            base_created_by: base_layer.created_by.clone(),
        },
        &ids,
    );
    let (id, loaded) = layers::load(&work, &tag, &config, &all)?;
    let runtime_key = layers::runtime_key(&base.diff_id, &wheels, &requirements)?;
    if layers::label_runtime(&work, &runtime_key, &base_layer, &runtime)? {
        eprintln!(
            "image: tagged base + runtime layer as {} (label key {runtime_key}) for the next run",
            layers::RUNTIME_TAG
        );
    }
    lap("load", &mut times);
    eprintln!(
        "image: {tag} = {id} ({}; layers: base {:.0} MiB, runtime {:.0} MiB{}, kiln {:.0} MiB)",
        if loaded {
            "loaded"
        } else {
            "already in the engine"
        },
        base_layer.bytes as f64 / 1048576.0,
        runtime.bytes as f64 / 1048576.0,
        if runtime.cached { " cached" } else { "" },
        kiln.bytes as f64 / 1048576.0
    );

    let mut summary = json!({
        "engine": engine,
        "image": tag,
        "id": id,
        "loaded": loaded,
        "source_date_epoch": epoch,
        "wheel": wheel_path,
        "requirements": requirements,
        "python": py.version,
        "site_packages": py.site,
        "layers": all.iter().map(|l| json!({
            "diff_id": l.diff_id, "bytes": l.bytes, "cached": l.cached, "created_by": l.created_by,
        })).collect::<Vec<_>>(),
        "base": { "key": base.key, "debootstrapped": !base.cached, "from_engine": base.from_engine, "packages": base.packages },
        "runtime": { "key": runtime_key, "pip_installed": !runtime.cached, "from_engine": runtime.in_engine },
    });

    // 3. The checks.
    let mut failed = Vec::new();
    if !args.no_verify {
        let mut checks = serde_json::Map::new();
        let mut check =
            |name: &str, r: Result<Value>, times: &mut serde_json::Map<String, Value>| {
                match r {
                    Ok(v) => {
                        checks.insert(name.into(), v);
                    }
                    Err(e) => {
                        eprintln!("image: FAILED {name}: {e:#}");
                        checks.insert(name.into(), json!({ "error": format!("{e:#}") }));
                        failed.push(name.to_string());
                    }
                }
                lap(name, times);
            };
        check("libcuda-scan", verify::scan(&tag), &mut times);
        check("doctor", verify::doctor(&tag), &mut times);
        check("import", verify::import(&tag, &version), &mut times);
        check(
            "audit",
            verify::audit(&tag, &py.site, &root.join("Cargo.toml")),
            &mut times,
        );
        if args.consumer {
            check(
                "consumer-container",
                consumer::run(&work, layout, &kiln_bin, args.keep_cache),
                &mut times,
            );
        }
        summary["checks"] = Value::Object(checks);
    } else if args.consumer {
        summary["consumer-container"] = consumer::run(&work, layout, &kiln_bin, args.keep_cache)?;
        lap("consumer-container", &mut times);
    }
    summary["seconds"] = Value::Object(times);
    summary["total_seconds"] = json!((started.elapsed().as_secs_f64() * 10.0).round() / 10.0);
    summary["failed"] = json!(failed);
    if args.json {
        println!("{}", serde_json::to_string_pretty(&summary)?);
    }
    eprintln!(
        "image: {} in {:.0} s",
        if failed.is_empty() {
            "all done".to_string()
        } else {
            format!("FAILED: {}", failed.join(", "))
        },
        started.elapsed().as_secs_f64()
    );
    if !failed.is_empty() {
        bail!("image checks failed: {}", failed.join(", "));
    }
    Ok(())
}

/// `--check IMAGE`: the checks alone, on an image the engine has.
fn check_only(image: &str, root: &Path, print_json: bool) -> Result<()> {
    docker::image_id(image).with_context(|| format!("the Docker engine has no image {image}"))?;
    let py = layers::base_python(image)?;
    let version = docker::image_label(image, "org.opencontainers.image.version")
        .with_context(|| format!("{image} has no org.opencontainers.image.version label (not made by cargo xtask image?)"))?;
    let mut checks = serde_json::Map::new();
    let mut failed = Vec::new();
    let results = [
        ("libcuda-scan", verify::scan(image)),
        ("doctor", verify::doctor(image)),
        ("import", verify::import(image, &version)),
        (
            "audit",
            verify::audit(image, &py.site, &root.join("Cargo.toml")),
        ),
    ];
    for (name, r) in results {
        match r {
            Ok(v) => {
                checks.insert(name.into(), v);
            }
            Err(e) => {
                eprintln!("image: FAILED {name}: {e:#}");
                checks.insert(name.into(), json!({ "error": format!("{e:#}") }));
                failed.push(name);
            }
        }
    }
    if print_json {
        println!(
            "{}",
            serde_json::to_string_pretty(
                &json!({ "image": image, "checks": checks, "failed": failed })
            )?
        );
    }
    if !failed.is_empty() {
        bail!("image checks failed on {image}: {}", failed.join(", "));
    }
    eprintln!("image: every check passed on {image}");
    Ok(())
}

/// SOURCE_DATE_EPOCH, else the commit's time, else 0.
fn source_date_epoch(root: &Path) -> u64 {
    std::env::var("SOURCE_DATE_EPOCH")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .or_else(|| git(root, &["log", "-1", "--format=%ct"])?.parse().ok())
        .unwrap_or(0)
}

fn git(root: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .current_dir(root)
        .args(args)
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
        .filter(|s| !s.is_empty())
}

/// The wheel's Version and Requires-Dist (its METADATA).
fn wheel_metadata(wheel: &Path) -> Result<(String, Vec<String>)> {
    let file =
        std::fs::File::open(wheel).with_context(|| format!("opening {}", wheel.display()))?;
    let mut zip = zip::ZipArchive::new(file)
        .with_context(|| format!("{} is not a wheel (zip)", wheel.display()))?;
    let name = (0..zip.len())
        .filter_map(|i| zip.name_for_index(i).map(String::from))
        .find(|n| n.ends_with(".dist-info/METADATA") && n.matches('/').count() == 1)
        .with_context(|| format!("{} has no .dist-info/METADATA", wheel.display()))?;
    let mut text = String::new();
    zip.by_name(&name)?.read_to_string(&mut text)?;
    let header = |key: &str| -> Vec<String> {
        text.lines()
            .take_while(|l| !l.is_empty())
            .filter_map(|l| l.strip_prefix(key).map(|v| v.trim().to_string()))
            .collect()
    };
    let version = header("Version:")
        .into_iter()
        .next()
        .with_context(|| format!("{name} has no Version"))?;
    Ok((version, header("Requires-Dist:")))
}
