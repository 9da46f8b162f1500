//! `hostile-launch LIMIT_MS RESULT_FILE PROGRAM [ARGS…]`: runs PROGRAM under the time limit
//! with this process's stdio, directory and environment, and writes its exit, wall time and
//! peak RSS to RESULT_FILE. The hostile tests start `kiln audit` through it so that the child's
//! `ru_maxrss` carries this small process's address space, not the test's (src/run.rs).

use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [limit, result, program, rest @ ..] = args.as_slice() else {
        eprintln!("usage: hostile-launch LIMIT_MS RESULT_FILE PROGRAM [ARGS...]");
        return ExitCode::from(2);
    };
    let Ok(limit) = limit.parse::<u64>() else {
        eprintln!("hostile-launch: LIMIT_MS is not a number: {limit:?}");
        return ExitCode::from(2);
    };
    match kiln_hostile::run::supervise(Path::new(program), rest, Duration::from_millis(limit)) {
        Ok(s) => match std::fs::write(result, s.to_text()) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("hostile-launch: writing {result}: {e}");
                ExitCode::from(2)
            }
        },
        Err(e) => {
            eprintln!("hostile-launch: running {program}: {e}");
            ExitCode::from(2)
        }
    }
}
