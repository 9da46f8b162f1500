//! Runs the real `kiln audit` as a child process and measures what the limits are about: wall
//! time (the child is killed at the limit), peak RSS, and the bytes it wrote to stdout and
//! stderr (captured in files, never a pipe that could fill).
//!
//! Peak RSS is measured two ways. `ru_maxrss` from `wait4` is an upper bound: Linux carries the
//! high-water mark of the address space the child had before `exec` into it — the test
//! process's, which holds every generated case (2.7 GB once the 256 MB bounds cases joined),
//! so the child is started by `hostile-launch` (src/bin), a small process whose own address
//! space is all the child inherits (a few MB). `VmHWM` from `/proc/PID/status`, polled every 5
//! ms while the child runs, is the exec'd program's own peak, missing at most the last poll
//! interval. The limit is checked on the upper bound.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

pub struct Outcome {
    /// Exit code; None when killed (by the time limit or a signal).
    pub exit: Option<i32>,
    /// The signal that ended it, if any.
    pub signal: Option<i32>,
    pub timed_out: bool,
    pub wall: Duration,
    pub max_rss_kib: u64,
    /// The child's own peak (VmHWM), as last seen while it ran.
    pub hwm_kib: u64,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
}

/// `kiln` built for this test run: KILN_BIN, or `target/<profile>/kiln` after
/// `cargo build -p kiln` (same profile as the tests).
pub fn kiln_binary() -> Result<PathBuf, String> {
    if let Some(p) = std::env::var_os("KILN_BIN") {
        return Ok(PathBuf::from(p));
    }
    let release = !cfg!(debug_assertions);
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.args(["build", "--locked", "--quiet", "-p", "kiln"]);
    if release {
        cmd.arg("--release");
    }
    let status = cmd
        .status()
        .map_err(|e| format!("cargo build -p kiln: {e}"))?;
    if !status.success() {
        return Err("cargo build -p kiln failed".into());
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"));
    let bin = target
        .join(if release { "release" } else { "debug" })
        .join("kiln");
    bin.is_file()
        .then_some(bin.clone())
        .ok_or_else(|| format!("{} not built", bin.display()))
}

/// Runs `bin args…` in `cwd` with `env` added, killing it after `limit`, through
/// `hostile-launch` (see the module docs).
pub fn run(
    bin: &Path,
    args: &[String],
    cwd: &Path,
    env: &[(&str, &str)],
    limit: Duration,
    scratch: &Path,
) -> std::io::Result<Outcome> {
    let out_path = scratch.join("stdout");
    let err_path = scratch.join("stderr");
    let result_path = scratch.join("launch-result");
    let _ = std::fs::remove_file(&result_path);
    let mut cmd = Command::new(launcher()?);
    cmd.arg(limit.as_millis().to_string())
        .arg(&result_path)
        .arg(bin)
        .args(args)
        .current_dir(cwd)
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out_path)?)
        .stderr(std::fs::File::create(&err_path)?)
        .env("COLUMNS", "100");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let status = cmd.status()?;
    let result = std::fs::read_to_string(&result_path).map_err(|e| {
        std::io::Error::other(format!(
            "hostile-launch ({status}) left no result in {}: {e}",
            result_path.display()
        ))
    })?;
    let s = Supervised::from_text(&result)?;
    Ok(Outcome {
        exit: s.exit,
        signal: s.signal,
        timed_out: s.timed_out,
        wall: s.wall,
        max_rss_kib: s.max_rss_kib,
        hwm_kib: s.hwm_kib,
        stdout: std::fs::read(&out_path)?,
        stderr: std::fs::read(&err_path)?,
    })
}

/// `hostile-launch`: KILN_HOSTILE_LAUNCH, or the package's binary beside the running test
/// (cargo builds a package's binaries before its integration tests:
/// `target/<profile>/deps/hostile-…` → `target/<profile>/hostile-launch`).
fn launcher() -> std::io::Result<PathBuf> {
    if let Some(p) = std::env::var_os("KILN_HOSTILE_LAUNCH") {
        return Ok(PathBuf::from(p));
    }
    let exe = std::env::current_exe()?;
    let found = [exe.parent(), exe.parent().and_then(Path::parent)]
        .into_iter()
        .flatten()
        .map(|d| d.join("hostile-launch"))
        .find(|p| p.is_file());
    found.ok_or_else(|| {
        std::io::Error::other(format!(
            "hostile-launch not found beside {} (build it: cargo build -p kiln-hostile --bins)",
            exe.display()
        ))
    })
}

/// What `hostile-launch` does: runs `bin args…` with this process's stdio, directory and
/// environment, polls its VmHWM, kills it after `limit`, and returns the wait4 rusage.
pub fn supervise(bin: &Path, args: &[String], limit: Duration) -> std::io::Result<Supervised> {
    let started = Instant::now();
    let child = Command::new(bin).args(args).spawn()?;
    let pid = child.id() as libc::pid_t;
    let mut status: libc::c_int = 0;
    // SAFETY: an all-zero rusage is a valid value; wait4 fills it.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let mut timed_out = false;
    let mut hwm_kib = 0;
    loop {
        hwm_kib = hwm_kib.max(vm_hwm_kib(pid).unwrap_or(0));
        // SAFETY: pid is our own child; status and usage are valid for writes.
        let r = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut usage) };
        if r == pid {
            break;
        }
        if r < 0 {
            return Err(std::io::Error::last_os_error());
        }
        if started.elapsed() > limit && !timed_out {
            timed_out = true;
            // SAFETY: signalling our own child.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    Ok(Supervised {
        exit: libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status)),
        signal: libc::WIFSIGNALED(status).then(|| libc::WTERMSIG(status)),
        timed_out,
        wall: started.elapsed(),
        max_rss_kib: usage.ru_maxrss as u64,
        hwm_kib,
    })
}

/// One supervised run, as `hostile-launch` reports it.
pub struct Supervised {
    pub exit: Option<i32>,
    pub signal: Option<i32>,
    pub timed_out: bool,
    pub wall: Duration,
    pub max_rss_kib: u64,
    pub hwm_kib: u64,
}

impl Supervised {
    /// The result file's text: one `name value` per line (-1 for none).
    pub fn to_text(&self) -> String {
        format!(
            "exit {}\nsignal {}\ntimed_out {}\nwall_ns {}\nmax_rss_kib {}\nhwm_kib {}\n",
            self.exit.unwrap_or(-1),
            self.signal.unwrap_or(-1),
            u8::from(self.timed_out),
            self.wall.as_nanos(),
            self.max_rss_kib,
            self.hwm_kib
        )
    }

    /// Reads what [`Supervised::to_text`] wrote.
    pub fn from_text(text: &str) -> std::io::Result<Supervised> {
        let field = |name: &str| -> std::io::Result<i64> {
            text.lines()
                .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
                .ok_or_else(|| std::io::Error::other(format!("no {name} in {text:?}")))
        };
        let (exit, signal) = (field("exit")?, field("signal")?);
        Ok(Supervised {
            exit: (exit >= 0).then_some(exit as i32),
            signal: (signal >= 0).then_some(signal as i32),
            timed_out: field("timed_out")? != 0,
            wall: Duration::from_nanos(field("wall_ns")? as u64),
            max_rss_kib: field("max_rss_kib")? as u64,
            hwm_kib: field("hwm_kib")? as u64,
        })
    }
}

/// `VmHWM` of a running process, in KiB.
fn vm_hwm_kib(pid: libc::pid_t) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}
