//! `cargo xtask repro`: build the wheel twice from clean target directories, at different
//! times, and demand byte-identical results. On a mismatch, name the differing members and
//! where in them the bytes first differ (ELF section, for the extension): `kiln_wheel::diff`, the
//! comparison `kiln wheel diff A.whl B.whl` prints for any two wheels.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{bail, Context, Result};

use crate::toolchain::repo_root;
use crate::wheel;

#[derive(clap::Args)]
pub struct Args {
    /// Where the two builds go (each in its own fresh target directory below it).
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// KEY=VALUE set for the second build only: a deliberate difference, to see the check fail.
    #[arg(long = "second-env", value_name = "KEY=VALUE")]
    pub second_env: Vec<String>,
    /// Print the comparison as JSON (`kiln wheel diff --json`'s).
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: Args) -> Result<()> {
    let dir = args
        .dir
        .clone()
        .unwrap_or_else(|| repo_root().join("target/repro"));
    let mut wheels = Vec::new();
    for (i, name) in ["first", "second"].into_iter().enumerate() {
        let target = dir.join(name);
        if target.exists() {
            std::fs::remove_dir_all(&target)
                .with_context(|| format!("cleaning {}", target.display()))?;
        }
        std::fs::create_dir_all(&target)?;
        let mut extra: Vec<(String, String)> = Vec::new();
        if i == 1 {
            for kv in &args.second_env {
                let (k, v) = kv
                    .split_once('=')
                    .with_context(|| format!("--second-env {kv:?} is not KEY=VALUE"))?;
                extra.push((k.to_string(), v.to_string()));
            }
        }
        let started = Instant::now();
        eprintln!("repro: {name} clean build in {}", target.display());
        let built = build_in(&target.join("cargo-target"), &target.join("wheels"), &extra)?;
        eprintln!(
            "repro: {name} build took {:.0} s",
            started.elapsed().as_secs_f64()
        );
        wheels.push(built);
    }
    report(
        &kiln_wheel::diff::wheels(&wheels[0], &wheels[1])?,
        args.json,
    )
}

fn report(report: &kiln_wheel::diff::Report, json: bool) -> Result<()> {
    if json {
        println!("{}", serde_json::to_string_pretty(&report.to_json())?);
    } else {
        println!("{report}");
    }
    if !report.identical() {
        bail!("the two builds differ: the wheel is not reproducible");
    }
    Ok(())
}

/// `cargo xtask wheel` with its own target directory and extra environment.
fn build_in(
    target_dir: &std::path::Path,
    out: &std::path::Path,
    extra: &[(String, String)],
) -> Result<PathBuf> {
    let saved: Vec<(String, Option<std::ffi::OsString>)> =
        std::iter::once("CARGO_TARGET_DIR".to_string())
            .chain(extra.iter().map(|(k, _)| k.clone()))
            .map(|k| {
                let v = std::env::var_os(&k);
                (k, v)
            })
            .collect();
    std::env::set_var("CARGO_TARGET_DIR", target_dir);
    for (k, v) in extra {
        std::env::set_var(k, v);
    }
    let args = wheel::Args {
        out: Some(out.to_path_buf()),
        no_audit: true,
        test: false,
        offline: true,
    };
    let built = wheel::build(&args);
    for (k, v) in saved {
        match v {
            Some(v) => std::env::set_var(&k, v),
            None => std::env::remove_var(&k),
        }
    }
    Ok(built?.wheel)
}
