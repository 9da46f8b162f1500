//! The driver is loaded as `libcuda.so.1` and nothing else: a stub `libcuda.so` (what CUDA
//! toolkits ship for linking, and what cudarc's own search tries first) on LD_LIBRARY_PATH
//! is never called. Fixtures are built here with the system C compiler; each scenario runs
//! this test binary again as a child process, because library loading is once per process.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Straight to the stderr file descriptor: libtest captures print!/eprint! of passing tests,
/// and a skip must be visible in a normal run.
macro_rules! skip {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($t)*);
    }};
}

const CHILD_ENV: &str = "KILN_STUB_TEST_CHILD";

/// Records each call in the file named by KILN_STUB_MARKER.
const COMMON: &str = r#"
#include <stdio.h>
#include <stdlib.h>
static void mark(const char* what) {
    const char* p = getenv("KILN_STUB_MARKER");
    if (!p) return;
    FILE* f = fopen(p, "a");
    if (f) { fprintf(f, "%s %s\n", WHO, what); fclose(f); }
}
__attribute__((constructor)) static void on_load(void) { mark("loaded"); }
int cuGetErrorName(int e, const char** s) { *s = e == 34 ? "CUDA_ERROR_STUB_LIBRARY" : "CUDA_ERROR_NO_DEVICE"; return 0; }
int cuGetErrorString(int e, const char** s) { *s = e == 34 ? "stub library" : "no CUDA-capable device is detected"; return 0; }
int cuDeviceGetCount(int* n) { mark("cuDeviceGetCount"); *n = 0; return RESULT; }
int cuInit(unsigned int flags) { mark("cuInit"); return RESULT; }
"#;

/// The toolkit-style stub: SONAME libcuda.so, every call fails with CUDA_ERROR_STUB_LIBRARY.
const STUB: &str = "#define WHO \"stub\"\n#define RESULT 34\n";
/// A stand-in driver: SONAME libcuda.so.1, reports no device (CUDA_ERROR_NO_DEVICE).
const FAKE_DRIVER: &str = "#define WHO \"driver\"\n#define RESULT 100\n";

fn cc() -> Option<String> {
    [
        std::env::var("CC").ok(),
        Some("cc".into()),
        Some("gcc".into()),
    ]
    .into_iter()
    .flatten()
    .find(|c| {
        Command::new(c)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    })
}

fn build(cc: &str, dir: &Path, file: &str, soname: &str, header: &str) {
    let src = dir.join(format!("{file}.c"));
    std::fs::write(&src, format!("{header}{COMMON}")).unwrap();
    let out = Command::new(cc)
        .args(["-shared", "-fPIC", &format!("-Wl,-soname,{soname}"), "-o"])
        .arg(dir.join(file))
        .arg(&src)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{cc} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn real_driver_present() -> bool {
    // SAFETY: only probes whether the driver library can be loaded.
    unsafe { libloading::Library::new("libcuda.so.1") }.is_ok()
}

/// Runs `Gpu::new(0)` in a child with LD_LIBRARY_PATH = `dir`; returns (child's result line,
/// marker file contents).
fn run_child(dir: &Path) -> (String, String) {
    let marker = dir.join("calls.txt");
    let _ = std::fs::remove_file(&marker);
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "child_opens_gpu",
            "--nocapture",
            "--include-ignored",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, "1")
        .env("LD_LIBRARY_PATH", dir)
        .env("KILN_STUB_MARKER", &marker)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "child failed (a panic?):\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let line = stdout
        .lines()
        .find_map(|l| l.find("RESULT ").map(|i| l[i..].to_string()))
        .unwrap_or_else(|| panic!("no RESULT in:\n{stdout}"));
    (line, std::fs::read_to_string(&marker).unwrap_or_default())
}

#[test]
#[ignore = "child process of stub_libcuda_is_never_used"]
fn child_opens_gpu() {
    if std::env::var_os(CHILD_ENV).is_none() {
        return;
    }
    match kiln_runtime::Gpu::new(0) {
        Ok(g) => println!("RESULT ok {}", g.name()),
        Err(e) => println!("RESULT err {e}"),
    }
}

#[test]
fn stub_libcuda_is_never_used() {
    let Some(cc) = cc() else {
        skip!("SKIP: no C compiler (cc/gcc) to build the stub libcuda.so fixture");
        return;
    };
    let real = real_driver_present();
    let tmp = tempfile::tempdir().unwrap();
    let stub_only: PathBuf = tmp.path().join("stub-only");
    let both: PathBuf = tmp.path().join("stub-and-driver");
    let driver_only: PathBuf = tmp.path().join("driver-only");
    for d in [&stub_only, &both, &driver_only] {
        std::fs::create_dir_all(d).unwrap();
    }
    build(&cc, &stub_only, "libcuda.so", "libcuda.so", STUB);
    build(&cc, &both, "libcuda.so", "libcuda.so", STUB);
    build(&cc, &both, "libcuda.so.1", "libcuda.so.1", FAKE_DRIVER);
    build(
        &cc,
        &driver_only,
        "libcuda.so.1",
        "libcuda.so.1",
        FAKE_DRIVER,
    );

    // 1. Only the stub on the path.
    let (result, calls) = run_child(&stub_only);
    assert!(
        !calls.contains("stub cuInit"),
        "the stub was called: {calls}"
    );
    if real {
        skip!("note: a real libcuda.so.1 is installed; scenario 1 gave: {result}");
    } else {
        // No driver: the error comes before any search, so the stub is not even loaded.
        assert!(
            result.starts_with("RESULT err no NVIDIA driver found: libcuda.so.1"),
            "{result}"
        );
        assert!(calls.is_empty(), "the stub was loaded: {calls}");
    }

    if real {
        skip!("SKIP (scenarios 2, 3): a real libcuda.so.1 is installed system-wide and would be found next to the fixtures");
        return;
    }
    // 2. Stub and a libcuda.so.1 side by side: the stub shadows cudarc's first candidate, so
    //    kiln-runtime refuses (clear error) rather than call it.
    let (result, calls) = run_child(&both);
    assert!(
        !calls.contains("stub cuInit"),
        "the stub was called: {calls}"
    );
    assert!(
        result.starts_with("RESULT err no NVIDIA driver found: libcuda.so.1 was loaded, but"),
        "{result}"
    );
    assert!(result.contains("shadows"), "{result}");

    // 3. Only libcuda.so.1: it is the one called (here it reports no device).
    let (result, calls) = run_child(&driver_only);
    assert!(
        calls.contains("driver cuInit"),
        "libcuda.so.1 was not called: {calls}"
    );
    assert!(result.contains("CUDA_ERROR_NO_DEVICE"), "{result}");
}
