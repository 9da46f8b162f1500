//! `cargo xtask bootstrap`: the pinned toolchain without Nix, into the checkout's `.toolchain/`.
//! A thin call to kiln-toolchain's installer, the same one `kiln bootstrap` runs for any project.

use anyhow::Result;

use crate::toolchain::{checkout_layout, pins, Layout};

#[derive(clap::Args, Default)]
pub struct Args {
    /// Reinstall every component even when its stamp matches.
    #[arg(long)]
    pub force: bool,
    /// Print nothing unless something is installed or fails.
    #[arg(long)]
    pub quiet: bool,
}

/// Installs what is missing or stale and writes `.toolchain/env`. Returns the layout.
pub fn run(args: Args) -> Result<Layout> {
    let layout = checkout_layout();
    let opts = kiln_toolchain::Options {
        force: args.force,
        quiet: args.quiet,
        // kiln's own kernels/rust needs it.
        require_kernel_rustc: true,
    };
    kiln_toolchain::install(&layout, &pins()?, &opts)?;
    Ok(layout)
}

/// Bootstrap quietly: what every toolchain-using xtask command calls first.
pub fn ensure() -> Result<Layout> {
    run(Args {
        force: false,
        quiet: true,
    })
}

/// Bootstrap, then put the toolchain into this process's environment: for commands that call
/// kiln-build in-process (it locates nvcc and libclang from the environment).
pub fn ensure_in_process() -> Result<Layout> {
    let layout = ensure()?;
    for (k, v) in layout.vars() {
        std::env::set_var(k, v);
    }
    Ok(layout)
}
