//! `kiln bootstrap`: installs the pinned toolchain (CUDA toolkit, cuobjdump/nvdisasm, libclang,
//! maturin and the test tools from PyPI; the kernel rustc when the project has `kernels/rust`)
//! for the project whose Cargo.toml is found at or above the current directory (its kiln table
//! layered over kiln's), without a kiln checkout. It goes to
//! `$XDG_DATA_HOME/kiln/toolchain/<hash of the toolchain pins>` unless `--prefix` says otherwise;
//! kiln-build finds nvcc there by itself, `source "$(kiln bootstrap --env-file)"` sets up a
//! shell. The library is kiln-toolchain, which `cargo xtask bootstrap` calls as well.
//! Exit: 0 ready, 2 could not install (or read the pins).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{anyhow, Context};
use kiln_pins::Pins;
use kiln_toolchain::{install, Layout, Options};

#[derive(clap::Args)]
pub struct Args {
    /// Print the result as JSON (root, env_file, each component's action).
    #[arg(long)]
    pub json: bool,
    /// Take the pins from this Cargo.toml instead of the nearest one with a kiln table at or
    /// above the current directory (kiln's own pins when there is none).
    #[arg(long, value_name = "CARGO_TOML")]
    pub pins: Option<PathBuf>,
    /// Install here instead of the per-user directory.
    #[arg(long, value_name = "DIR")]
    pub prefix: Option<PathBuf>,
    /// Reinstall every component even when its stamp matches.
    #[arg(long)]
    pub force: bool,
    /// Install quietly if needed, then print only the env file's path (for `source "$(…)"`).
    #[arg(long, conflicts_with = "json")]
    pub env_file: bool,
}

/// Errors go to main's one error path (`kiln bootstrap: …`, exit 2).
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let pins = load_pins(args.pins.as_ref())?;
    let layout = match (
        &args.prefix,
        Layout::per_user(&|k| std::env::var_os(k), &pins),
    ) {
        (Some(p), _) => Layout::at(p.clone()),
        (None, Some(l)) => l,
        (None, None) => {
            return Err(anyhow!(
                "neither XDG_DATA_HOME nor HOME is set; pass --prefix DIR"
            ))
        }
    };
    let opts = Options {
        force: args.force,
        quiet: args.env_file || args.json,
        require_kernel_rustc: kiln_toolchain::needs::rust_kernels(&pins).is_some(),
    };
    let installed = install(&layout, &pins, &opts).map_err(|e| anyhow!("{e}"))?;
    if args.env_file {
        println!("{}", installed.env_file.display());
    } else if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&installed).expect("serializes")
        );
    } else {
        println!(
            "toolchain for {} in {}",
            pins.manifest.display(),
            installed.root.display()
        );
        for c in &installed.components {
            println!("  {:<9} {:<11} {}", c.action, c.name, c.what);
        }
        println!("for a shell: source {}", installed.env_file.display());
    }
    Ok(ExitCode::SUCCESS)
}

/// `--pins`, else the nearest Cargo.toml with a kiln table, else kiln's own pins.
fn load_pins(path: Option<&PathBuf>) -> anyhow::Result<Pins> {
    if let Some(p) = path {
        // The pins' own message, which already names its cause (main prints the chain).
        return Pins::load(p).map_err(|e| anyhow!(e.to_string()));
    }
    let here = std::env::current_dir().context("current directory")?;
    Ok(Pins::discover(&here).unwrap_or_else(|_| Pins::built_in()))
}
