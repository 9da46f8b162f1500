//! `kiln doctor`: runs kiln-doctor's checks and renders them (`doctor/render.rs`: the verdict,
//! the counts, the inventory, one line per check with its fixes) or `--json`.
//! Exit: 0 nothing failed, 1 a check failed, 2 could not run (e.g. unreadable --pins).

use std::ffi::OsString;
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use kiln_doctor::{Mode, Options, PinsSource, ProbeCommand};

use super::{error, exit_code};

mod render;

/// When to colour the report.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Color {
    /// On a terminal, unless NO_COLOR is set (non-empty) or TERM is `dumb`.
    Auto,
    Always,
    Never,
}

#[derive(clap::Args)]
pub struct Args {
    /// Print the report as JSON (stable check ids, the verdict and the inventory; see the
    /// kiln-doctor crate docs).
    #[arg(long)]
    pub json: bool,
    /// Take the pins from this Cargo.toml instead of the workspace above the current directory.
    #[arg(long, value_name = "CARGO_TOML")]
    pub pins: Option<PathBuf>,
    /// A machine that only runs kiln's artifacts: build checks (nvcc, libclang, rustc, link) only warn.
    #[arg(long, conflicts_with = "build_only")]
    pub runtime_only: bool,
    /// A build machine without a GPU: driver and GPU checks only warn.
    #[arg(long)]
    pub build_only: bool,
    /// Waive a check by id (repeatable): it is reported as skipped and cannot fail the run.
    #[arg(long, value_name = "ID")]
    pub skip: Vec<String>,
    /// The Python whose packages to inventory and search for cuBLAS/cuDNN/NCCL (default: the
    /// `python3` on PATH, i.e. an activated venv's).
    #[arg(long, value_name = "PYTHON")]
    pub python: Option<PathBuf>,
    /// Colour the human report.
    #[arg(long, value_enum, default_value = "auto", value_name = "WHEN")]
    pub color: Color,
    /// Internal: run one isolated probe (the doctor re-invokes itself with this).
    #[arg(long, hide = true, num_args = 1.., allow_hyphen_values = true, value_name = "ARGS")]
    pub probe: Option<Vec<OsString>>,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    if let Some(probe) = &args.probe {
        // The child's status, as `exit` would pass it on (its low 8 bits).
        return Ok(ExitCode::from(kiln_doctor::probe_child_main(probe) as u8));
    }
    let mode = if args.runtime_only {
        Mode::RuntimeOnly
    } else if args.build_only {
        Mode::BuildOnly
    } else {
        Mode::Full
    };
    let source = match &args.pins {
        Some(p) => PinsSource::File(p.clone()),
        None => PinsSource::Discover(
            std::env::current_dir()
                .map_err(|e| error(e).context("cannot read the current directory"))?,
        ),
    };
    let mut opts = Options::new(mode, source);
    opts.skip = args.skip.clone();
    opts.python = args.python.clone();
    // Suspect libraries are loaded only in a child: this same binary, `kiln doctor --probe …`.
    opts.probe = std::env::current_exe().ok().map(|program| ProbeCommand {
        program,
        args: vec!["doctor".into(), "--probe".into()],
    });
    let report = kiln_doctor::run(&opts).map_err(error)?;
    let text = if args.json {
        report.to_json() + "\n"
    } else {
        let colour = wants_colour(
            args.color,
            std::io::stdout().is_terminal(),
            std::env::var_os("NO_COLOR").as_deref(),
            std::env::var_os("TERM").as_deref(),
        );
        render::render(&report, colour)
    };
    // A closed pipe (`kiln doctor | head`) is not an error worth a panic.
    let _ = std::io::stdout().write_all(text.as_bytes());
    Ok(exit_code(report.failed()))
}

/// `--color auto`: a terminal, NO_COLOR unset or empty (no-color.org), TERM not `dumb`.
fn wants_colour(
    choice: Color,
    terminal: bool,
    no_color: Option<&std::ffi::OsStr>,
    term: Option<&std::ffi::OsStr>,
) -> bool {
    match choice {
        Color::Always => true,
        Color::Never => false,
        Color::Auto => {
            terminal && no_color.is_none_or(|v| v.is_empty()) && term.is_none_or(|t| t != "dumb")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{wants_colour, Color};
    use std::ffi::OsStr;

    #[test]
    fn colour_only_on_a_terminal_and_never_against_no_color() {
        let xterm = Some(OsStr::new("xterm-256color"));
        assert!(wants_colour(Color::Auto, true, None, xterm));
        assert!(!wants_colour(Color::Auto, false, None, xterm));
        assert!(!wants_colour(
            Color::Auto,
            true,
            Some(OsStr::new("1")),
            xterm
        ));
        // An empty NO_COLOR does not count (no-color.org).
        assert!(wants_colour(Color::Auto, true, Some(OsStr::new("")), xterm));
        assert!(!wants_colour(
            Color::Auto,
            true,
            None,
            Some(OsStr::new("dumb"))
        ));
        assert!(wants_colour(
            Color::Always,
            false,
            Some(OsStr::new("1")),
            None
        ));
        assert!(!wants_colour(Color::Never, true, None, xterm));
    }
}
