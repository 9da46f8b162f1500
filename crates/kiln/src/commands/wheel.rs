//! `kiln wheel finalize RAW.whl --out DIR`: the one post-processing step after `maturin build`
//! (Requires-Dist and the SBOM's runtime wheels from the pins, RECORD rehashed), run by
//! `cargo xtask wheel` and by Nix (`nix/wheel.nix`) alike, so the released bytes do not depend
//! on who built them.
//!
//! `kiln wheel diff A.whl B.whl [--json]`: whether two wheels are byte-identical and, when not,
//! which members differ and where (`kiln_wheel::diff`). Exit 0 identical, 1 they differ, 2 a
//! wheel could not be read.

use std::path::PathBuf;
use std::process::ExitCode;

use super::{error, exit_code};

#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(clap::Subcommand)]
pub enum Command {
    /// Add Requires-Dist and the SBOM's runtime components from [workspace.metadata.kiln] to a
    /// wheel maturin built; prints the finalized wheel's path.
    Finalize(FinalizeArgs),
    /// Compare two wheels member by member: exit 0 byte-identical, 1 they differ (each differing
    /// member, the first differing byte and, in an ELF file, its section).
    Diff(DiffArgs),
}

#[derive(clap::Args)]
pub struct DiffArgs {
    /// The first wheel.
    pub first: PathBuf,
    /// The second wheel.
    pub second: PathBuf,
    /// Print the comparison as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(clap::Args)]
pub struct FinalizeArgs {
    /// The wheel as maturin wrote it.
    pub wheel: PathBuf,
    /// The workspace Cargo.toml holding [workspace.metadata.kiln] (its directory is the checkout).
    #[arg(long, value_name = "CARGO_TOML", default_value = "Cargo.toml")]
    pub pins: PathBuf,
    /// Directory for the finalized wheel (same file name); must differ from the input's.
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
}

/// Runs one `kiln wheel` subcommand; returns its name (the error prefix) and its outcome.
pub fn run(args: Args) -> (&'static str, anyhow::Result<ExitCode>) {
    match args.command {
        Command::Finalize(a) => (
            "wheel finalize",
            finalize(&a).map(|path| {
                println!("{}", path.display());
                ExitCode::SUCCESS
            }),
        ),
        Command::Diff(a) => ("wheel diff", diff(&a)),
    }
}

fn diff(a: &DiffArgs) -> anyhow::Result<ExitCode> {
    let report = kiln_wheel::diff::wheels(&a.first, &a.second).map_err(error)?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report.to_json())?);
    } else {
        println!("{}", report.to_string().trim_end());
    }
    Ok(exit_code(!report.identical()))
}

fn finalize(a: &FinalizeArgs) -> anyhow::Result<PathBuf> {
    let pins = kiln_pins::Pins::load(&a.pins).map_err(error)?;
    let root = match pins.root() {
        p if p.as_os_str().is_empty() => std::path::Path::new("."),
        p => p,
    };
    // The absolute path, as maturin's SBOM names it (mapped to /kiln by the step).
    let checkout =
        std::fs::canonicalize(root).map_err(|e| error(e).context(root.display().to_string()))?;
    let recipe = kiln_wheel::finalize::Recipe::from_pins(&pins, &checkout).map_err(error)?;
    let name = a
        .wheel
        .file_name()
        .ok_or_else(|| anyhow::anyhow!("{} is not a wheel file", a.wheel.display()))?;
    std::fs::create_dir_all(&a.out).map_err(|e| error(e).context(a.out.display().to_string()))?;
    let dst = a.out.join(name);
    let same = |p: &std::path::Path| std::fs::canonicalize(p).ok();
    if same(&dst).is_some() && same(&dst) == same(&a.wheel) {
        anyhow::bail!(
            "--out {} holds the input wheel itself; choose another directory",
            a.out.display()
        );
    }
    kiln_wheel::finalize::finalize(&a.wheel, &dst, &recipe).map_err(error)?;
    Ok(dst)
}
