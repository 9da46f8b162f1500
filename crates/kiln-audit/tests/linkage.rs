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

/// `NAME-1.0-py3-none-manylinux_2_17_x86_64.whl` holding `files`, with METADATA `requires`.
fn named_wheel(dir: &Path, name: &str, files: &[(&str, Vec<u8>)], requires: &[&str]) -> PathBuf {
    let dist = name.replace('-', "_");
    let path = dir.join(format!("{dist}-1.0-py3-none-manylinux_2_17_x86_64.whl"));
    let mut w = zip::ZipWriter::new(std::fs::File::create(&path).unwrap());
    let opts = zip::write::SimpleFileOptions::default();
    let meta: String = std::iter::once(format!(
        "Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n"
    ))
    .chain(requires.iter().map(|r| format!("Requires-Dist: {r}\n")))
    .collect();
    let mut all: Vec<(String, Vec<u8>)> = files
        .iter()
        .map(|(n, d)| (n.to_string(), d.clone()))
        .collect();
    all.push((format!("{dist}-1.0.dist-info/METADATA"), meta.into_bytes()));
    all.push((
        format!("{dist}-1.0.dist-info/WHEEL"),
        b"Wheel-Version: 1.0\nTag: py3-none-manylinux_2_17_x86_64\n".to_vec(),
    ));
    for (n, data) in all {
        w.start_file(n, opts).unwrap();
        w.write_all(&data).unwrap();
    }
    w.finish().unwrap();
    path
}

/// cuDNN's shape: a library that dlopens cuBLAS by name and reaches `nvidia/cu13/lib` through
/// RUNPATH. Without `nvidia-cublas` in Requires-Dist the gate warns naming cuBLAS's wheel (the
/// one that ships that soname), not the runtime's, whose directory it merely shares.
#[test]
fn a_dlopened_library_names_the_wheel_of_its_soname() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(
        d.join("dl.c"),
        "#include <dlfcn.h>\nvoid *kiln_load(void) { return dlopen(\"libcublasLt.so.13\", RTLD_NOW); }\n",
    )
    .unwrap();
    cc(
        &[
            "-shared",
            "-fPIC",
            "-o",
            "dl.so",
            "dl.c",
            "-ldl",
            "-Wl,-rpath,$ORIGIN/../nvidia/cu13/lib",
        ],
        d,
    );
    let lib = std::fs::read(d.join("dl.so")).unwrap();
    let r = audit(&wheel(d, &lib, &[]));
    let dl: Vec<_> = r
        .findings
        .iter()
        .filter(|f| f.rule == "linkage/undeclared-dlopen")
        .collect();
    assert_eq!(dl.len(), 1, "{:?}", rules(&r));
    assert_eq!(dl[0].severity, kiln_audit::Severity::Warning, "{dl:?}");
    assert!(dl[0].message.contains("nvidia-cublas"), "{}", dl[0].message);
    assert!(
        dl[0].fix.contains("Requires-Dist: nvidia-cublas"),
        "{}",
        dl[0].fix
    );
    assert!(
        !r.findings
            .iter()
            .any(|f| f.message.contains("nvidia-cuda-runtime")),
        "the runtime's wheel is named: {:?}",
        r.findings
    );
    let r = audit(&wheel(d, &lib, &["nvidia-cublas>=13,<14"]));
    assert!(
        r.findings
            .iter()
            .filter(|f| f.rule.as_str().starts_with("linkage/"))
            .all(|f| f.severity == kiln_audit::Severity::Info),
        "{:?}",
        r.findings
    );
}

/// A RUNPATH into the shared `nvidia/cu13/lib` that loads nothing from there names no wheel.
#[test]
fn a_runpath_into_the_shared_cuda_directory_names_no_one_wheel() {
    let dir = tempfile::tempdir().unwrap();
    let lib = library(dir.path(), &[], Some("$ORIGIN/../nvidia/cu13/lib"));
    let r = audit(&wheel(dir.path(), &lib, &[]));
    let f: Vec<_> = r
        .findings
        .iter()
        .filter(|f| f.rule == "linkage/runpath-undeclared-wheel")
        .collect();
    assert_eq!(f.len(), 1, "{:?}", rules(&r));
    assert!(f[0].message.contains("shared by"), "{}", f[0].message);
    assert!(
        !f[0].fix.contains("Requires-Dist: nvidia-cuda-runtime"),
        "{}",
        f[0].fix
    );
}

/// A library of the wheel itself, missing from it (cuDNN without libcudnn_graph.so.9): the
/// NEEDED is unresolved, not a Requires-Dist the wheel should add on itself.
#[test]
fn a_bundled_library_missing_from_its_own_wheel_is_unresolved() {
    let dir = tempfile::tempdir().unwrap();
    let lib = library(dir.path(), &["libcudnn_graph.so.9"], Some("$ORIGIN"));
    let r = audit(&named_wheel(
        dir.path(),
        "nvidia-cudnn-cu13",
        &[("nvidia/cudnn/lib/libcudnn_ops.so.9", lib.clone())],
        &[],
    ));
    let f: Vec<_> = r
        .findings
        .iter()
        .filter(|f| f.rule == "linkage/unresolved-needed")
        .collect();
    assert_eq!(f.len(), 1, "{:?}", r.findings);
    assert!(
        f[0].message.contains("nvidia-cudnn-cu13 itself"),
        "{}",
        f[0].message
    );
    assert!(
        !rules(&r).contains(&"metadata/missing-requires-dist"),
        "{:?}",
        r.findings
    );
    // With the library there, it is bundled.
    let graph = library(dir.path(), &[], None);
    let r = audit(&named_wheel(
        dir.path(),
        "nvidia-cudnn-cu13",
        &[
            ("nvidia/cudnn/lib/libcudnn_ops.so.9", lib),
            ("nvidia/cudnn/lib/libcudnn_graph.so.9", graph),
        ],
        &[],
    ));
    assert!(
        !rules(&r).contains(&"linkage/unresolved-needed"),
        "{:?}",
        r.findings
    );
}
