//! `cargo xtask cli-wheel WHEEL`: the `kiln` CLI as users get it from PyPI (`kiln-cuda-cli`).
//!
//! Builds crates/kiln's binary wheel (maturin `bindings = "bin"`, `--zig --compatibility
//! manylinux_2_28`: py3-none, any Python), installs it with pip into a fresh venv, and from
//! there runs `kiln audit` on the CLI wheel itself and on WHEEL (kiln's own wheel, the one the
//! `repro` suite built) with `--json`. Checks:
//! - the CLI wheel's tag is `py3-none-manylinux_2_28_x86_64`, and the audit's computed glibc
//!   floor (the highest `GLIBC_x.y` its binary needs) is within 2.28;
//! - kiln's wheel audits clean against the pins, declares the pins' manylinux tag, and its
//!   computed glibc floor is within what that tag promises;
//! - both JSON reports validate against docs/audit-json-schema.json (the schema derived from the
//!   report types: `kiln audit --json-schema`, which crates/kiln/tests/report.rs keeps it equal to).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{ensure, Context, Result};

use crate::toolchain::{pins, repo_root, run_checked, run_status, Layout};

#[derive(clap::Args)]
pub struct Args {
    /// kiln's own wheel (`cargo xtask wheel` / the repro suite's), audited by the installed CLI.
    pub wheel: PathBuf,
}

/// The CLI wheel's glibc baseline: torch's (manylinux_2_28), so it installs wherever torch does.
pub const CLI_MANYLINUX: &str = "manylinux_2_28";

pub fn run(args: Args, layout: &Layout) -> Result<()> {
    let started = Instant::now();
    let root = repo_root();
    let cli_wheel = build(layout, &root)?;
    let name = cli_wheel.file_name().unwrap_or_default().to_string_lossy();
    let tag = format!("-py3-none-{CLI_MANYLINUX}_x86_64.whl");
    ensure!(
        name.starts_with("kiln_cuda_cli-") && name.ends_with(&tag),
        "the CLI wheel is {name}, expected kiln_cuda_cli-*{tag}"
    );
    eprintln!(
        "cli-wheel: built {name} in {:.0} s",
        started.elapsed().as_secs_f64()
    );

    // A fresh venv and pip, as `pipx`/`uvx` make one; the wheel has no dependencies.
    let tmp = tempfile::Builder::new()
        .prefix("kiln-cli-wheel-")
        .tempdir()?;
    let venv = tmp.path().join("venv");
    let python = std::env::var("KILN_PYTHON").unwrap_or_else(|_| "python3".into());
    run_checked(Command::new(&python).args(["-m", "venv"]).arg(&venv))?;
    run_checked(
        Command::new(venv.join("bin/python"))
            .args(["-m", "pip", "install", "--no-index", "--quiet"])
            .arg(&cli_wheel),
    )
    .context("pip install of the CLI wheel")?;
    let kiln = venv.join("bin/kiln");
    let version = run_checked(Command::new(&kiln).arg("--version"))?;
    eprintln!(
        "cli-wheel: pip installed {} ({})",
        kiln.display(),
        String::from_utf8_lossy(&version.stdout).trim()
    );

    let schema: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(repo_root().join("docs/audit-json-schema.json"))
            .context("the committed schema")?,
    )?;
    let validator = jsonschema::draft202012::new(&schema)
        .map_err(|e| anyhow::anyhow!("docs/audit-json-schema.json is not a valid schema: {e}"))?;

    // The CLI wheel through its own audit: the tag it declares holds for its binary.
    let own = audit_json(&kiln, &cli_wheel, None)?;
    validate(&validator, &own, "the CLI wheel's report")?;
    ensure!(
        own.exit == Some(0),
        "kiln audit of the CLI wheel: exit {:?}",
        own.exit
    );
    check_glibc(&own.report, CLI_MANYLINUX)?;

    // kiln's wheel, against the pins, by the pip-installed CLI.
    let pins = pins()?;
    let declared = pins
        .wheel
        .as_ref()
        .map(|w| w.manylinux.clone())
        .context("Cargo.toml has no [workspace.metadata.kiln.wheel]")?;
    let ops = audit_json(&kiln, &args.wheel, Some(&root.join("Cargo.toml")))?;
    validate(&validator, &ops, "kiln's wheel's report")?;
    ensure!(
        ops.exit == Some(0),
        "kiln audit (pip-installed) of {}: exit {:?}, findings {}",
        args.wheel.display(),
        ops.exit,
        ops.report["findings"]
    );
    check_glibc(&ops.report, &declared)?;
    eprintln!(
        "cli-wheel: all checks passed in {:.0} s",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// maturin's bin wheel of crates/kiln into `target/cli-wheel`, the one wheel there.
fn build(layout: &Layout, root: &Path) -> Result<PathBuf> {
    let target = crate::wheel::target_dir();
    let out = target.join("cli-wheel");
    if out.exists() {
        std::fs::remove_dir_all(&out)?;
    }
    let mut cmd = Command::new(layout.py_site().join("bin/maturin"));
    cmd.current_dir(root)
        .args(["build", "--release", "--locked", "--zig"])
        .args(["--manifest-path", "crates/kiln/Cargo.toml"])
        .args(["--compatibility", CLI_MANYLINUX])
        .arg("--out")
        .arg(&out)
        // cargo-zigbuild and zig keep caches under XDG_CACHE_HOME (else $HOME/.cache) and
        // ZIG_GLOBAL_CACHE_DIR: in the target directory, not the user's home.
        .env("XDG_CACHE_HOME", target.join("xdg-cache"))
        .env("ZIG_GLOBAL_CACHE_DIR", target.join("zig-cache"));
    layout.apply(&mut cmd);
    run_status(&mut cmd, "maturin build of the CLI wheel failed")?;
    crate::toolchain::single_wheel(&out)
}

struct Audit {
    exit: Option<i32>,
    report: serde_json::Value,
}

fn audit_json(kiln: &Path, wheel: &Path, policy: Option<&Path>) -> Result<Audit> {
    let mut cmd = Command::new(kiln);
    cmd.arg("audit").arg(wheel).arg("--json");
    if let Some(p) = policy {
        cmd.arg("--policy").arg(p);
    }
    let out = cmd
        .output()
        .with_context(|| format!("running {}", kiln.display()))?;
    let report = serde_json::from_slice(&out.stdout).with_context(|| {
        format!(
            "kiln audit {} --json printed no JSON: {}",
            wheel.display(),
            String::from_utf8_lossy(&out.stderr)
        )
    })?;
    Ok(Audit {
        exit: out.status.code(),
        report,
    })
}

fn validate(validator: &jsonschema::Validator, audit: &Audit, what: &str) -> Result<()> {
    let errors: Vec<String> = validator
        .iter_errors(&audit.report)
        .take(10)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect();
    ensure!(
        errors.is_empty(),
        "{what} does not match docs/audit-json-schema.json:\n  {}",
        errors.join("\n  ")
    );
    Ok(())
}

/// The wheel declares `manylinux` (its file name's tags), and the glibc its binaries need
/// (the audit's `max_glibc`, computed from the ELF symbol versions) is within that tag.
fn check_glibc(report: &serde_json::Value, manylinux: &str) -> Result<()> {
    let tags = report["wheel"]["tags"]
        .as_array()
        .context("the report has no wheel tags")?;
    let wanted = format!("{manylinux}_x86_64");
    ensure!(
        !tags.is_empty()
            && tags
                .iter()
                .all(|t| t.as_str().is_some_and(|t| t.ends_with(&wanted))),
        "{}: declared tags {tags:?}, expected {wanted}",
        report["input"]
    );
    let ceiling =
        glibc_of(manylinux).with_context(|| format!("{manylinux} is not manylinux_X_Y"))?;
    let mut computed = (0, 0);
    for b in report["binaries"].as_array().into_iter().flatten() {
        if let Some([maj, min]) = b["elf"]["max_glibc"]
            .as_array()
            .map(|v| v.iter().filter_map(|x| x.as_u64()).collect::<Vec<_>>())
            .as_deref()
            .and_then(|v| <&[u64; 2]>::try_from(v).ok())
        {
            computed = computed.max((*maj, *min));
        }
    }
    ensure!(
        computed != (0, 0),
        "{}: no binary with a glibc requirement",
        report["input"]
    );
    ensure!(
        computed <= ceiling,
        "{}: its binaries need glibc {}.{}, {manylinux} promises {}.{}",
        report["input"],
        computed.0,
        computed.1,
        ceiling.0,
        ceiling.1
    );
    eprintln!(
        "cli-wheel: {}: declared {wanted}, computed glibc floor {}.{}",
        report["input"].as_str().unwrap_or_default(),
        computed.0,
        computed.1
    );
    Ok(())
}

fn glibc_of(manylinux: &str) -> Option<(u64, u64)> {
    let rest = manylinux.strip_prefix("manylinux_")?;
    let (a, b) = rest.split_once('_')?;
    Some((a.parse().ok()?, b.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    #[test]
    fn glibc_floor_within_the_declared_tag() {
        let report = |tag: &str, glibc: [u32; 2]| {
            json!({"input": "x.whl", "wheel": {"tags": [format!("py3-none-{tag}_x86_64")]},
                   "binaries": [{"elf": {"max_glibc": glibc}}, {"elf": null}]})
        };
        super::check_glibc(&report("manylinux_2_28", [2, 17]), "manylinux_2_28").unwrap();
        super::check_glibc(&report("manylinux_2_28", [2, 28]), "manylinux_2_28").unwrap();
        let e = super::check_glibc(&report("manylinux_2_28", [2, 34]), "manylinux_2_28")
            .unwrap_err()
            .to_string();
        assert!(e.contains("need glibc 2.34"), "{e}");
        let e = super::check_glibc(&report("manylinux_2_34", [2, 17]), "manylinux_2_28")
            .unwrap_err()
            .to_string();
        assert!(e.contains("declared tags"), "{e}");
    }
}
