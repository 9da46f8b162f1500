//! One module per subcommand; each exposes `Args` (clap) and `run(Args) -> anyhow::Result<ExitCode>`:
//! the exit code of a run that completed, or the error `main` prints (exit 2).

pub mod audit;
pub mod bootstrap;
pub mod doctor;
mod escape;
mod report_text;
pub mod wheel;

/// A library error as the error `main` prints: its own text only. `{:#}` in `main` would also
/// append the error's sources, which the library errors' messages already carry.
pub fn error(e: impl std::fmt::Display) -> anyhow::Error {
    anyhow::Error::msg(e.to_string())
}

/// Exit 1 when the run found what fails it, 0 otherwise.
pub fn exit_code(failed: bool) -> std::process::ExitCode {
    std::process::ExitCode::from(u8::from(failed))
}
