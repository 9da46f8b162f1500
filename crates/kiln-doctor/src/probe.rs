//! Isolated probes: things the doctor must not do in its own process (load an unversioned or
//! suspect `libcuda.so`, load libclang from a path chosen by environment variables) run in a
//! child — the kiln binary re-invoked with a hidden argument — which prints one JSON line.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::env::Env;
use crate::run_error::RunError;

/// The command that runs [`child_main`]: the doctor appends the probe's own arguments.
#[derive(Debug, Clone)]
pub struct ProbeCommand {
    pub program: PathBuf,
    pub args: Vec<OsString>,
}

/// What `libcuda <path>` reports.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LibcudaProbe {
    /// cuInit(0), or None when the file could not be loaded or has no cuInit.
    pub init: Option<i32>,
    pub error: Option<String>,
}

/// What `libclang` reports.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LibclangProbe {
    /// The libclang file clang-sys loaded (the one bindgen would use).
    pub path: Option<PathBuf>,
    /// clang_getClangVersion, e.g. "clang version 21.1.8".
    pub version: Option<String>,
    pub major: Option<u32>,
    /// None when `#include <stddef.h>` parsed; else clang's diagnostic.
    pub stddef_error: Option<String>,
    /// Set when libclang could not be loaded at all.
    pub error: Option<String>,
}

/// Runs in the child. `args` are what the parent appended: `libcuda PATH` or `libclang`.
/// Prints one JSON line on stdout; returns the exit code.
pub fn child_main(args: &[OsString]) -> i32 {
    let kind = args.first().and_then(|a| a.to_str());
    let line = match (kind, args.get(1)) {
        (Some("libcuda"), Some(path)) => serde_json::to_string(&probe_libcuda(Path::new(path))),
        (Some("libclang"), None) => serde_json::to_string(&probe_libclang()),
        _ => {
            eprintln!("kiln doctor probe: expected `libcuda PATH` or `libclang`, got {args:?}");
            return 2;
        }
    };
    println!("{}", line.expect("probe results serialize"));
    0
}

fn probe_libcuda(path: &Path) -> LibcudaProbe {
    // SAFETY: this process exists only to load this one file and call cuInit on it.
    let lib = match unsafe { libloading::Library::new(path) } {
        Ok(l) => l,
        Err(e) => {
            return LibcudaProbe {
                init: None,
                error: Some(crate::driver::with_sources(&e)),
            }
        }
    };
    // SAFETY: cuInit(unsigned int) -> CUresult (cuda.h).
    let init = unsafe { lib.get::<unsafe extern "C" fn(u32) -> i32>(b"cuInit\0") };
    match init {
        Ok(f) => LibcudaProbe {
            init: Some(unsafe { f(0) }),
            error: None,
        },
        Err(e) => LibcudaProbe {
            init: None,
            error: Some(format!("no cuInit: {}", crate::driver::with_sources(&e))),
        },
    }
}

fn probe_libclang() -> LibclangProbe {
    let mut out = LibclangProbe {
        path: None,
        version: None,
        major: None,
        stddef_error: None,
        error: None,
    };
    // clang-sys finds libclang exactly as bindgen does (LIBCLANG_PATH, then system dirs); its
    // error is a message, where bindgen would panic.
    if let Err(e) = clang_sys::load() {
        out.error = Some(e);
        return out;
    }
    out.path = clang_sys::get_library().map(|l| l.path().to_path_buf());
    // SAFETY: libclang is loaded (above); clang_getClangVersion has no preconditions and its
    // string is disposed after copying.
    let full = unsafe { take_string(clang_sys::clang_getClangVersion()) };
    out.major = clang_major(&full);
    out.version = Some(full);
    // The header bindgen needs most often from the resource dir; BINDGEN_EXTRA_CLANG_ARGS from
    // the environment applies, as in the real build (bindgen's own parse, without bindgen).
    let diagnostics = stddef_header_errors();
    out.stddef_error = (!diagnostics.is_empty()).then(|| diagnostics.join("\n"));
    out
}

/// "clang version 21.1.8 (…)" → 21.
fn clang_major(full: &str) -> Option<u32> {
    let rest = &full[full.find("clang version ")? + "clang version ".len()..];
    rest.split(['.', ' ']).next()?.parse().ok()
}

/// # Safety
/// `s` is a CXString libclang returned and nothing else disposes it.
unsafe fn take_string(s: clang_sys::CXString) -> String {
    let p = clang_sys::clang_getCString(s);
    let text = if p.is_null() {
        String::new()
    } else {
        std::ffi::CStr::from_ptr(p).to_string_lossy().into_owned()
    };
    clang_sys::clang_disposeString(s);
    text
}

/// Parses `#include <stddef.h>` as bindgen would (C, the extra args from the environment);
/// returns clang's error diagnostics (none: it parsed).
fn stddef_header_errors() -> Vec<String> {
    use std::ffi::CString;
    const NAME: &str = "kiln_doctor_probe.h";
    const TEXT: &str = "#include <stddef.h>\ntypedef size_t kiln_doctor_size;\n";
    let extra = std::env::var("BINDGEN_EXTRA_CLANG_ARGS").unwrap_or_default();
    let args: Vec<CString> = std::iter::once("-xc-header")
        .chain(extra.split_whitespace())
        .map(|a| CString::new(a).expect("no NUL in arguments"))
        .collect();
    let argv: Vec<*const std::ffi::c_char> = args.iter().map(|a| a.as_ptr()).collect();
    let (name, text) = (CString::new(NAME).unwrap(), CString::new(TEXT).unwrap());
    let mut unsaved = clang_sys::CXUnsavedFile {
        Filename: name.as_ptr(),
        Contents: text.as_ptr(),
        Length: TEXT.len() as _,
    };
    // SAFETY: every pointer outlives the calls; the index and unit are disposed here.
    unsafe {
        let index = clang_sys::clang_createIndex(0, 0);
        let tu = clang_sys::clang_parseTranslationUnit(
            index,
            name.as_ptr(),
            argv.as_ptr(),
            argv.len() as _,
            &mut unsaved,
            1,
            0,
        );
        let mut errors = Vec::new();
        if tu.is_null() {
            errors.push("libclang could not parse the probe header".to_string());
        } else {
            for i in 0..clang_sys::clang_getNumDiagnostics(tu) {
                let d = clang_sys::clang_getDiagnostic(tu, i);
                if clang_sys::clang_getDiagnosticSeverity(d) >= clang_sys::CXDiagnostic_Error {
                    let opts = clang_sys::clang_defaultDiagnosticDisplayOptions();
                    errors.push(take_string(clang_sys::clang_formatDiagnostic(d, opts)));
                }
                clang_sys::clang_disposeDiagnostic(d);
            }
            clang_sys::clang_disposeTranslationUnit(tu);
        }
        clang_sys::clang_disposeIndex(index);
        errors
    }
}

/// Runs a probe in a child with exactly `env`; Err carries what went wrong with the child.
pub(crate) fn run<T: for<'de> Deserialize<'de>>(
    probe: &ProbeCommand,
    env: &Env,
    extra: &[&std::ffi::OsStr],
) -> Result<T, RunError> {
    let out = env
        .command(&probe.program)
        .args(&probe.args)
        .args(extra)
        .output()
        .map_err(|source| RunError::ProbeSpawn {
            program: probe.program.clone(),
            source,
        })?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout.lines().rev().find(|l| l.starts_with('{'));
    match line {
        Some(l) if out.status.success() => {
            serde_json::from_str(l).map_err(|source| RunError::ProbeOutput {
                line: l.to_string(),
                source,
            })
        }
        _ => Err(RunError::ProbeExit {
            status: out.status,
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        }),
    }
}
