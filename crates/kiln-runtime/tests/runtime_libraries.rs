//! cuBLAS, cuDNN and NCCL load by their pinned sonames and export every function kiln-runtime
//! calls — checked without a GPU. With KILN_TEST_NVIDIA_SITE pointing at a site-packages that
//! holds the pinned nvidia-* wheels (e.g. `pip install --target DIR nvidia-cublas==…`), a child
//! process runs with their `nvidia/*/lib` directories on LD_LIBRARY_PATH and must find all
//! three; without it, the missing libraries must be reported with the wheel to install.

use std::process::Command;

use kiln_runtime::runtime_libraries;
use kiln_runtime::Error;

macro_rules! skip {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($t)*);
    }};
}

const CHILD_ENV: &str = "KILN_RUNTIME_LIBRARIES_CHILD";

#[test]
#[ignore = "child process of pinned_libraries_resolve_every_entry_point"]
fn child_reports_libraries() {
    if std::env::var_os(CHILD_ENV).is_none() {
        return;
    }
    for lib in runtime_libraries() {
        println!(
            "LIB {} {}",
            lib.soname,
            match &lib.status {
                Ok(l) => format!("ok {} {}", l.version, l.path),
                Err(e) => format!("err {e}"),
            }
        );
    }
}

#[test]
fn pinned_libraries_resolve_every_entry_point() {
    let Some(site) = std::env::var_os("KILN_TEST_NVIDIA_SITE") else {
        skip!("SKIP (positive case): set KILN_TEST_NVIDIA_SITE to a site-packages holding the pinned nvidia-cublas, nvidia-cudnn-cu13 and nvidia-nccl-cu13 wheels");
        return;
    };
    let dirs: Vec<String> = std::fs::read_dir(std::path::Path::new(&site).join("nvidia"))
        .expect("KILN_TEST_NVIDIA_SITE/nvidia")
        .flatten()
        .map(|e| e.path().join("lib"))
        .filter(|p| p.is_dir())
        .map(|p| p.display().to_string())
        .collect();
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "child_reports_libraries",
            "--nocapture",
            "--include-ignored",
        ])
        .env(CHILD_ENV, "1")
        .env("LD_LIBRARY_PATH", dirs.join(":"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let libs: Vec<&str> = stdout
        .lines()
        .filter_map(|l| l.find("LIB ").map(|i| &l[i..]))
        .collect();
    assert_eq!(libs.len(), 3, "{stdout}");
    for l in libs {
        assert!(l.contains(" ok "), "{l}");
    }
}

/// Where the libraries are absent (this build machine), each is reported — not a panic — with
/// the soname and the pinned wheel to install.
#[test]
fn missing_libraries_name_their_wheel() {
    for lib in runtime_libraries() {
        match &lib.status {
            Ok(l) => skip!("note: {} {} is installed here", lib.soname, l.version),
            Err(e @ Error::MissingLibrary { .. }) => {
                let m = e.to_string();
                assert!(m.starts_with(lib.soname), "{m}");
                assert!(m.contains(lib.wheel), "{m}");
            }
            Err(e) => panic!("{}: unexpected {e:?}", lib.soname),
        }
    }
}
