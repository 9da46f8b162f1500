//! One module per subcommand; each exposes `Args` (clap) and `run(Args) -> i32` (exit code).

pub mod audit;
pub mod bootstrap;
pub mod doctor;
mod escape;
pub mod wheel;
