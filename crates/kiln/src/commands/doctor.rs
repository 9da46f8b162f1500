//! `kiln doctor`: runs kiln-doctor's checks and renders them — one line per check
//! (`ok|warn|fail|skip  <id>  <message>`, then indented `fix:` lines) or `--json`.
//! Exit: 0 nothing failed, 1 a check failed, 2 could not run (e.g. unreadable --pins).

use std::ffi::OsString;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use kiln_doctor::{Mode, Options, PinsSource, ProbeCommand, Report};

use super::{error, exit_code};

#[derive(clap::Args)]
pub struct Args {
    /// Print the report as JSON (stable check ids; see the kiln-doctor crate docs).
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
    /// Waive a check by id (repeatable): it is reported as skipped and cannot fail the run,
    /// e.g. `--skip link.driver-api` for a project that never links the driver API.
    #[arg(long, value_name = "ID")]
    pub skip: Vec<String>,
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
    // Suspect libraries are loaded only in a child: this same binary, `kiln doctor --probe …`.
    opts.probe = std::env::current_exe().ok().map(|program| ProbeCommand {
        program,
        args: vec!["doctor".into(), "--probe".into()],
    });
    let report = kiln_doctor::run(&opts).map_err(error)?;
    let text = if args.json {
        report.to_json() + "\n"
    } else {
        render(&report)
    };
    // A closed pipe (`kiln doctor | head`) is not an error worth a panic.
    let _ = std::io::stdout().write_all(text.as_bytes());
    Ok(exit_code(report.failed()))
}

fn render(report: &Report) -> String {
    let width = report.checks.iter().map(|c| c.id.len()).max().unwrap_or(0);
    let mut out = String::new();
    for c in &report.checks {
        let softened = if c.softened {
            " (not needed on this machine)"
        } else {
            ""
        };
        out.push_str(&format!(
            "{:<4}  {:<width$}  {}{softened}\n",
            c.status.label(),
            c.id,
            c.message
        ));
        for f in &c.fix {
            out.push_str(&format!("      {:<width$}  fix: {f}\n", ""));
        }
    }
    let s = &report.summary;
    out.push_str(&format!(
        "\n{} ok, {} warn, {} fail, {} skipped ({:.1} s)\n",
        s.ok,
        s.warn,
        s.fail,
        s.skip,
        report.elapsed_ms as f64 / 1000.0
    ));
    out
}
