//! Link preflight: link a tiny driver-API program the way a C++/CMake CUDA project does, in
//! well under a second, so that a long build does not find out at its final link.
//!
//! Two steps, like a real project: a shared library that calls cuMem* and links `-lcuda`
//! (with `--no-undefined`, so a libcuda lacking the symbols shows), then an executable linked
//! against that library. The second step is where the classic failure happens: the library
//! records `NEEDED libcuda.so.1`, and when only the toolkit's unversioned stub `libcuda.so`
//! exists, ld cannot find libcuda.so.1 and reports every cuMem* reference as undefined.

use std::path::{Path, PathBuf};

use crate::env::Env;
use crate::report::{Check, Scope};
use crate::toolchain_checks::{capture, last_lines};

const ID: &str = "link.driver-api";

/// The driver-API calls of a typical allocator: the symbols that went undefined in the
/// classic failure. Declared here rather than taken from cuda.h, which a build machine may lack.
const PROBE_LIB_C: &str = r#"
#include <stddef.h>
typedef int CUresult;
typedef unsigned long long CUdeviceptr;
CUresult cuInit(unsigned int);
CUresult cuMemAlloc_v2(CUdeviceptr *, size_t);
CUresult cuMemFree_v2(CUdeviceptr);
CUresult cuMemcpyHtoD_v2(CUdeviceptr, const void *, size_t);
CUresult cuMemcpyDtoH_v2(void *, CUdeviceptr, size_t);
CUresult cuMemGetInfo_v2(size_t *, size_t *);
CUresult cuMemAddressReserve(CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long);
CUresult cuMemAddressFree(CUdeviceptr, size_t);
CUresult cuMemCreate(unsigned long long *, size_t, const void *, unsigned long long);
CUresult cuMemRelease(unsigned long long);
CUresult cuMemMap(CUdeviceptr, size_t, size_t, unsigned long long, unsigned long long);
CUresult cuMemUnmap(CUdeviceptr, size_t);
CUresult cuMemSetAccess(CUdeviceptr, size_t, const void *, size_t);
CUresult cuMemGetAllocationGranularity(size_t *, const void *, int);

int kiln_link_probe(void) {
    CUdeviceptr p = 0, va = 0;
    unsigned long long h = 0;
    size_t free_b = 0, total = 0, gran = 0;
    char host[16] = {0};
    if (cuInit(0)) return 1;
    cuMemGetInfo_v2(&free_b, &total);
    cuMemAlloc_v2(&p, sizeof host);
    cuMemcpyHtoD_v2(p, host, sizeof host);
    cuMemcpyDtoH_v2(host, p, sizeof host);
    cuMemFree_v2(p);
    cuMemGetAllocationGranularity(&gran, NULL, 0);
    cuMemAddressReserve(&va, gran, 0, 0, 0);
    cuMemCreate(&h, gran, NULL, 0);
    cuMemMap(va, gran, 0, h, 0);
    cuMemSetAccess(va, gran, NULL, 0);
    cuMemUnmap(va, gran);
    cuMemRelease(h);
    cuMemAddressFree(va, gran);
    return 0;
}
"#;

const PROBE_MAIN_C: &str =
    "int kiln_link_probe(void);\nint main(void) { return kiln_link_probe(); }\n";

/// Where a build looks for `-lcuda`: the toolkit's lib dirs (nvcc itself passes lib64 and
/// lib64/stubs) and LIBRARY_PATH; the compiler adds its default dirs.
pub fn link_dirs(env: &Env, cuda_home: Option<&Path>) -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    if let Some(h) = cuda_home {
        for sub in ["lib64", "lib", "lib64/stubs", "lib/stubs"] {
            let d = h.join(sub);
            if d.is_dir() {
                dirs.push(d);
            }
        }
    }
    dirs.extend(env.paths("LIBRARY_PATH"));
    dirs
}

/// The libcuda the linker opened, from `-Wl,--trace` output.
pub fn picked_libcuda(trace: &str) -> Option<PathBuf> {
    trace
        .lines()
        .map(str::trim)
        .find(|l| {
            Path::new(l)
                .file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("libcuda.so"))
        })
        .map(PathBuf::from)
}

/// Symbols ld reported undefined.
pub fn undefined_symbols(text: &str) -> Vec<String> {
    let mut v: Vec<String> = text
        .lines()
        .filter_map(|l| l.split("undefined reference to `").nth(1))
        .filter_map(|s| s.split('\'').next())
        .map(str::to_string)
        .collect();
    v.sort();
    v.dedup();
    v
}

const RUNTIME_LOAD_FIX: &str =
    "best: do not link the driver at all — load libcuda.so.1 at run time (dlopen, or cudarc with `dynamic-loading`), as kiln does";
const RUNTIME_LOAD_FIX_SHORT: &str =
    "load libcuda.so.1 at run time instead (dlopen, or cudarc with `dynamic-loading`), as kiln does";

/// `driver_loaded`: whether this machine has an NVIDIA driver (libcuda.so.1 loaded). Without
/// one, and without a link stub, there is nothing to link against: the preflight cannot say
/// anything about a project's link, so it is skipped with the reason rather than failed.
pub fn check(env: &Env, cuda_home: Option<&Path>, driver_loaded: bool) -> Check {
    let cc = env
        .get("CC")
        .map(PathBuf::from)
        .or_else(|| env.which("cc"))
        .or_else(|| env.which("gcc"));
    let Some(cc) = cc else {
        return Check::fail(
            ID,
            Scope::Build,
            "no C compiler (CC, cc or gcc) to run the link preflight with",
        )
        .with_fix("install gcc (Debian: `apt-get install build-essential`)");
    };
    let dir = match tempfile::tempdir() {
        Ok(d) => d,
        Err(e) => {
            return Check::fail(
                ID,
                Scope::Build,
                format!("cannot create a temporary directory: {e}"),
            )
        }
    };
    let (lib_c, main_c) = (
        dir.path().join("kiln_link_probe.c"),
        dir.path().join("main.c"),
    );
    for (p, text) in [(&lib_c, PROBE_LIB_C), (&main_c, PROBE_MAIN_C)] {
        if let Err(e) = std::fs::write(p, text) {
            return Check::fail(
                ID,
                Scope::Build,
                format!("cannot write {}: {e}", p.display()),
            );
        }
    }
    let dirs = link_dirs(env, cuda_home);
    let looked = if dirs.is_empty() {
        "the compiler's default dirs".to_string()
    } else {
        format!(
            "{} and the compiler's default dirs",
            dirs.iter()
                .map(|d| d.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        )
    };

    // Step 1: a shared library linking -lcuda; every symbol must resolve against that libcuda.
    let so = dir.path().join("libkiln_link_probe.so");
    let mut cmd = env.command(&cc);
    cmd.args(["-shared", "-fPIC", "-o"]).arg(&so).arg(&lib_c);
    for d in &dirs {
        cmd.arg(format!("-L{}", d.display()));
    }
    cmd.args(["-lcuda", "-Wl,--no-undefined", "-Wl,--trace"]);
    let (ok, text) = match capture(&mut cmd) {
        Ok(r) => r,
        Err(e) => return Check::fail(ID, Scope::Build, e.to_string()),
    };
    if !ok {
        if text.contains("cannot find -lcuda") {
            if !driver_loaded {
                // No driver and no stub: the PyPI toolkit ships none (kiln's own crates never
                // link libcuda), so there is nothing here to check a link against.
                return Check::skip(
                    ID,
                    Scope::Build,
                    format!("not checked: no libcuda.so to link against (no NVIDIA driver on this machine, and no link stub in {looked}; the PyPI CUDA toolkit ships none); kiln never links libcuda, it loads libcuda.so.1 at run time"),
                )
                .with_fix(format!("only for a project that links the driver API (`-lcuda`): {RUNTIME_LOAD_FIX_SHORT}, or build where a libcuda.so exists (the NVIDIA driver, or a full CUDA toolkit's `stubs` directory, e.g. `nix develop`)"));
            }
            return Check::fail(
                ID,
                Scope::Build,
                format!("`-lcuda` fails although the driver is installed: no unversioned libcuda.so where a build links (looked in {looked}); a project linking the driver API fails at its final link"),
            )
            .with_fix(RUNTIME_LOAD_FIX)
            .with_fix("or link the driver by its versioned name: `-l:libcuda.so.1` with `-L` the directory of the driver's libcuda.so.1");
        }
        let undefined = undefined_symbols(&text);
        let picked = picked_libcuda(&text)
            .map(|p| p.display().to_string())
            .unwrap_or_else(|| "libcuda".into());
        return Check::fail(
            ID,
            Scope::Build,
            if undefined.is_empty() {
                format!("linking against {picked} fails: {}", last_lines(&text, 4))
            } else {
                format!("{picked} lacks {} driver-API symbols ({}): it is older than the API a build uses", undefined.len(), undefined.join(", "))
            },
        )
        .with_fix(RUNTIME_LOAD_FIX)
        .with_fix("or link against the libcuda of the pinned toolkit or driver");
    }
    let Some(picked) = picked_libcuda(&text) else {
        return Check::fail(ID, Scope::Build, "the link succeeded but ld's trace names no libcuda; cannot tell what a build would use");
    };
    let picked_dir = picked.parent().unwrap_or(Path::new(".")).to_path_buf();

    // Step 2: the executable. Like CMake, pass the library's link directories as -rpath-link;
    // ld must then find libcuda.so.1 (the library's NEEDED) to resolve the cuMem* references.
    let exe = dir.path().join("kiln_link_probe");
    let mut cmd = env.command(&cc);
    cmd.arg("-o")
        .arg(&exe)
        .arg(&main_c)
        .arg(format!("-L{}", dir.path().display()))
        .arg("-lkiln_link_probe");
    cmd.arg(format!("-Wl,-rpath-link,{}", picked_dir.display()));
    let (ok, text) = match capture(&mut cmd) {
        Ok(r) => r,
        Err(e) => return Check::fail(ID, Scope::Build, e.to_string()),
    };
    if !ok {
        let undefined = undefined_symbols(&text);
        let needed_missing = text.contains("libcuda.so.1") && text.contains("not found");
        let mut msg = format!(
            "the final link would fail: `-lcuda` resolves to {}, but no libcuda.so.1 exists where ld resolves a shared library's dependencies",
            picked.display()
        );
        if !undefined.is_empty() {
            msg.push_str(&format!(
                "; {} references stay undefined ({})",
                undefined.len(),
                undefined.join(", ")
            ));
        }
        if !needed_missing {
            msg = format!("the final link fails: {}", last_lines(&text, 4));
        }
        return Check::fail(ID, Scope::Build, msg)
            .with_fix(RUNTIME_LOAD_FIX)
            .with_fix(format!(
                "or give ld a libcuda.so.1: `mkdir -p /tmp/cuda-link && ln -s {} /tmp/cuda-link/libcuda.so.1` and link with -Wl,-rpath-link,/tmp/cuda-link",
                picked.display()
            ))
            .with_fix("or link executables with -Wl,--allow-shlib-undefined (the driver provides the symbols at run time)");
    }
    let stub = picked.components().any(|c| c.as_os_str() == "stubs")
        || std::fs::metadata(&picked)
            .map(|m| m.len() < (4 << 20))
            .unwrap_or(false);
    let what = if stub {
        "the toolkit's link-time stub"
    } else {
        "a driver library"
    };
    Check::ok(
        ID,
        Scope::Build,
        format!("a driver-API program links: -lcuda resolves to {} ({what}) and libcuda.so.1 resolves for the final link", picked.display()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_ld_output() {
        let trace = "/usr/bin/ld: mode elf_x86_64\n/tmp/a.o\n/opt/cuda/lib64/stubs/libcuda.so\n/lib/x86_64-linux-gnu/libc.so.6\n";
        assert_eq!(
            picked_libcuda(trace),
            Some(PathBuf::from("/opt/cuda/lib64/stubs/libcuda.so"))
        );
        let err = "/usr/bin/ld: warning: libcuda.so.1, needed by ./libp.so, not found\n\
                   /usr/bin/ld: ./libp.so: undefined reference to `cuMemCreate'\n\
                   /usr/bin/ld: ./libp.so: undefined reference to `cuInit'\n\
                   /usr/bin/ld: ./libp.so: undefined reference to `cuMemCreate'\n";
        assert_eq!(
            undefined_symbols(err),
            vec!["cuInit".to_string(), "cuMemCreate".to_string()]
        );
    }
}
