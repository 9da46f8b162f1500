//! linkage/* rules that know CUDA majors and sibling wheels, on libraries the host's C compiler
//! builds here (stub libraries give the NEEDED entries their sonames; nothing is loaded).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

use kiln_audit::{NoProgress, Options, Policy, Report};

fn cc(args: &[&str], dir: &Path) {
    let out = Command::new("cc")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("cc runs");
    assert!(
        out.status.success(),
        "cc {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A shared library NEEDing `sonames` (each a stub built here), with `rpath` as its RUNPATH.
fn library(dir: &Path, sonames: &[&str], rpath: Option<&str>) -> Vec<u8> {
    std::fs::write(dir.join("empty.c"), "int kiln_stub;\n").unwrap();
    std::fs::write(dir.join("ext.c"), "int kiln_ext(void) { return 1; }\n").unwrap();
    let mut args = vec![
        "-shared",
        "-fPIC",
        "-o",
        "ext.so",
        "ext.c",
        "-Wl,--no-as-needed",
    ];
    for s in sonames {
        let soname = format!("-Wl,-soname,{s}");
        cc(&["-shared", "-fPIC", "-o", s, "empty.c", &soname], dir);
    }
    let stubs: Vec<String> = sonames.iter().map(|s| format!("./{s}")).collect();
    args.extend(stubs.iter().map(String::as_str));
    let rp = rpath.map(|r| format!("-Wl,-rpath,{r}"));
    if let Some(r) = &rp {
        args.push(r);
    }
    cc(&args, dir);
    std::fs::read(dir.join("ext.so")).unwrap()
}

fn wheel(dir: &Path, lib: &[u8], requires: &[&str]) -> PathBuf {
    tagged_wheel(dir, lib, requires, "manylinux_2_17_x86_64")
}

/// `demo-1.0-cp39-abi3-<platform>.whl` holding `lib` as `demo/_ext.abi3.so`.
fn tagged_wheel(dir: &Path, lib: &[u8], requires: &[&str], platform: &str) -> PathBuf {
    let path = dir.join(format!("demo-1.0-cp39-abi3-{platform}.whl"));
    let mut w = zip::ZipWriter::new(std::fs::File::create(&path).unwrap());
    let opts = zip::write::SimpleFileOptions::default();
    let meta: String =
        std::iter::once("Metadata-Version: 2.1\nName: demo\nVersion: 1.0\n".to_string())
            .chain(requires.iter().map(|r| format!("Requires-Dist: {r}\n")))
            .collect();
    for (name, data) in [
        ("demo/_ext.abi3.so", lib.to_vec()),
        ("demo-1.0.dist-info/METADATA", meta.into_bytes()),
        (
            "demo-1.0.dist-info/WHEEL",
            format!("Wheel-Version: 1.0\nTag: cp39-abi3-{platform}\n").into_bytes(),
        ),
    ] {
        w.start_file(name, opts).unwrap();
        w.write_all(&data).unwrap();
    }
    w.finish().unwrap();
    path
}

fn audit(path: &Path) -> Report {
    kiln_audit::audit(path, &Policy::default(), &Options::default(), &NoProgress).unwrap()
}

fn rules(r: &Report) -> Vec<&str> {
    r.findings.iter().map(|f| f.rule.as_str()).collect()
}

#[test]
fn needed_libraries_of_two_cuda_majors_are_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let mixed = library(dir.path(), &["libcudart.so.12", "libcublas.so.13"], None);
    let r = audit(&wheel(
        dir.path(),
        &mixed,
        &["nvidia-cuda-runtime-cu12", "nvidia-cublas"],
    ));
    assert!(
        rules(&r).contains(&"linkage/cuda-major-mix"),
        "{:?}",
        rules(&r)
    );
    // One major, and sonames both majors ship (libcurand.so.10): no mix.
    let dir = tempfile::tempdir().unwrap();
    let one = library(dir.path(), &["libcublas.so.13", "libcurand.so.10"], None);
    let r = audit(&wheel(
        dir.path(),
        &one,
        &["nvidia-cublas", "nvidia-curand"],
    ));
    assert!(
        !rules(&r).contains(&"linkage/cuda-major-mix"),
        "{:?}",
        rules(&r)
    );
}

#[test]
fn a_runpath_into_another_wheel_needs_that_wheel_required() {
    let dir = tempfile::tempdir().unwrap();
    let lib = library(dir.path(), &[], Some("$ORIGIN/../nvidia/cudnn/lib"));
    let r = audit(&wheel(dir.path(), &lib, &[]));
    let found: Vec<_> = r
        .findings
        .iter()
        .filter(|f| f.rule == "linkage/runpath-undeclared-wheel")
        .collect();
    assert_eq!(found.len(), 1, "{:?}", rules(&r));
    assert!(
        found[0].message.contains("nvidia-cudnn-cu"),
        "{}",
        found[0].message
    );
    let r = audit(&wheel(dir.path(), &lib, &["nvidia-cudnn-cu13>=9.19,<10"]));
    assert!(
        !rules(&r).contains(&"linkage/runpath-undeclared-wheel"),
        "{:?}",
        rules(&r)
    );
    // A RUNPATH into a directory of the wheel itself is bundling, not a dependency.
    let r = audit(&wheel(
        dir.path(),
        &library(dir.path(), &[], Some("$ORIGIN")),
        &[],
    ));
    assert!(
        !rules(&r).contains(&"linkage/runpath-undeclared-wheel"),
        "{:?}",
        rules(&r)
    );
}

#[test]
fn a_provider_required_only_under_an_extra_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let lib = library(dir.path(), &["libcublas.so.13"], None);
    let r = audit(&wheel(
        dir.path(),
        &lib,
        &["nvidia-cublas>=13; extra == \"cuda\""],
    ));
    assert!(
        rules(&r).contains(&"linkage/extra-only-dependency"),
        "{:?}",
        rules(&r)
    );
    let r = audit(&wheel(
        dir.path(),
        &lib,
        &["nvidia-cublas>=13; extra == \"cuda\"", "nvidia-cublas>=13"],
    ));
    assert!(
        !rules(&r).contains(&"linkage/extra-only-dependency"),
        "{:?}",
        rules(&r)
    );
}

/// A C++ library using std::string (the C++11 ABI: GLIBCXX_3.4.21) is too new for
/// manylinux2014 (GLIBCXX_3.4.19 in auditwheel's policy) and fine for manylinux_2_34.
#[test]
fn libstdcxx_symbol_versions_are_held_to_the_platform_tag() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(
        d.join("s.cc"),
        "#include <string>\nextern \"C\" unsigned long kiln_len(const char *s) { std::string x(s); x += s; return x.size(); }\n",
    )
    .unwrap();
    let out = Command::new("c++")
        .args(["-shared", "-fPIC", "-O1", "-o", "s.so", "s.cc"])
        .current_dir(d)
        .output()
        .expect("c++ runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lib = std::fs::read(d.join("s.so")).unwrap();
    let tagged = |tag: &str| audit(&tagged_wheel(d, &lib, &[], tag));
    let r = tagged("manylinux2014_x86_64");
    let f: Vec<_> = r
        .findings
        .iter()
        .filter(|f| f.rule == "tags/cxx-abi-too-new")
        .collect();
    assert!(!f.is_empty(), "{:?}", rules(&r));
    assert!(f[0].message.contains("GLIBCXX_3.4.19"), "{}", f[0].message);
    let r = tagged("manylinux_2_34_x86_64");
    assert!(
        !rules(&r).contains(&"tags/cxx-abi-too-new"),
        "{:?}",
        rules(&r)
    );
}

/// A soname only named in read-only data (what `dlopen("libcublasLt.so.13")` compiles to) is
/// reported with the wheel that ships it; one that is NEEDED is not.
#[test]
fn a_soname_string_in_rodata_is_a_possible_dlopen() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(
        d.join("dl.c"),
        "#include <dlfcn.h>\nvoid *kiln_load(void) { return dlopen(\"libcublasLt.so.13\", RTLD_NOW); }\n",
    )
    .unwrap();
    cc(&["-shared", "-fPIC", "-o", "dl.so", "dl.c", "-ldl"], d);
    let lib = std::fs::read(d.join("dl.so")).unwrap();
    let r = audit(&wheel(d, &lib, &[]));
    let f: Vec<_> = r
        .findings
        .iter()
        .filter(|f| f.rule == "linkage/undeclared-dlopen")
        .collect();
    assert_eq!(f.len(), 1, "{:?}", rules(&r));
    assert!(f[0].message.contains("libcublasLt.so.13") && f[0].message.contains("nvidia-cublas"));
    assert!(f[0].message.contains("does not name"), "{}", f[0].message);
    let r = audit(&wheel(d, &lib, &["nvidia-cublas>=13,<14"]));
    assert!(r
        .findings
        .iter()
        .any(|f| f.rule == "linkage/undeclared-dlopen"
            && f.message.contains("which Requires-Dist names")));
}
