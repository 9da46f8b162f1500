//! A kernel library kiln-build has never seen (checks/kernel-library): arch-gated fp8 kernels,
//! a device-compile guard, the same non-inline helpers in every file from a header outside
//! kernels/, no C ABI headers, per-source modules. Each trait has a test here that failed on the
//! kiln-build before it (undeclarable gates, `-dc` host passes for PTX, `-rdc` multiple
//! definitions, headers outside kernels/ not keyed, bindgen without headers), plus the stale-cache
//! cases: nvcc's environment, an outside header, a `-D`, and a comment-only edit.

mod common;

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use kiln_build::{BuildError, BuildOutput, KernelBuild, Pins};

/// A copy of the fixture under `dir` with its Cargo.toml passed through `edit`.
fn fixture(dir: &Path, edit: impl Fn(&str) -> String) -> PathBuf {
    let src = common::repo_root().join("checks/kernel-library");
    let root = dir.join("kernel-library");
    for sub in ["kernels", "common"] {
        for e in std::fs::read_dir(src.join(sub)).unwrap().flatten() {
            let to = root.join(sub).join(e.file_name());
            std::fs::create_dir_all(to.parent().unwrap()).unwrap();
            std::fs::copy(e.path(), to).unwrap();
        }
    }
    let toml = std::fs::read_to_string(src.join("Cargo.toml")).unwrap();
    std::fs::write(root.join("Cargo.toml"), edit(&toml)).unwrap();
    root
}

fn unchanged(t: &str) -> String {
    t.to_string()
}

/// One module per target instead of per source.
fn one_module(t: &str) -> String {
    t.replace("modules = \"per-source\"\n", "")
}

/// Builds the project at `root` into `out` with the real nvcc and the variables in `vars`
/// (no LIBCLANG_PATH: the fixture has no headers to bind, so none is needed).
fn build(root: &Path, out: &Path, vars: &[(&str, &str)]) -> Result<BuildOutput, BuildError> {
    let pins = Pins::load(&root.join("Cargo.toml")).unwrap();
    let nvcc = common::real_nvcc();
    let vars: Vec<(String, OsString)> = (vars.iter())
        .map(|(k, v)| (k.to_string(), OsString::from(v)))
        .chain([("KILN_NVCC".to_string(), nvcc.into_os_string())])
        .collect();
    KernelBuild::new(pins, root.join("kernels"), out.to_path_buf())
        .cache_dir(root.join("cache"))
        .env(move |k| vars.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone()))
        .progress(std::env::var_os("KILN_TEST_PROGRESS").is_some())
        .run()
}

fn kernels_of<'a>(out: &'a BuildOutput, target: &str) -> Vec<&'a str> {
    let t = out
        .manifest
        .targets
        .iter()
        .find(|t| t.target.name() == target);
    t.unwrap_or_else(|| panic!("no {target}: {:?}", out.manifest.targets))
        .kernels
        .iter()
        .map(String::as_str)
        .collect()
}

/// The fatbin and manifest as a crate using kiln-embed links them: sections `.nv_fatbin` and
/// `.kiln_manifest` from the build's files, merged by the linker with the static library's
/// objects (whose own `.nv_fatbin` holds the host-launched kernels); audited with the project's
/// own table as the policy.
fn audit(out: &BuildOutput, root: &Path) -> kiln_audit::Report {
    let dir = out.fatbin.parent().unwrap();
    let section = |file: &Path, name: &str, obj: &str| {
        let o = std::process::Command::new("objcopy")
            .args(["-I", "binary", "-O", "elf64-x86-64", "-B", "i386:x86-64"])
            .arg(format!(
                "--rename-section=.data={name},alloc,load,readonly,data,contents"
            ))
            .arg(format!("--set-section-alignment={name}=8"))
            .arg(file)
            .arg(dir.join(obj))
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        dir.join(obj)
    };
    let fat = section(&out.fatbin, ".nv_fatbin", "fatbin.o");
    let man = section(&out.manifest_path, ".kiln_manifest", "manifest.o");
    let so = dir.join("libfixture.so");
    let cuda_lib = common::real_nvcc()
        .parent()
        .unwrap()
        .parent()
        .unwrap()
        .join("lib");
    let mut cc = std::process::Command::new("cc");
    cc.args(["-shared", "-o"]).arg(&so).arg(&fat).arg(&man);
    if let Some(lib) = &out.static_lib {
        cc.arg("-Wl,--whole-archive")
            .arg(lib)
            .arg("-Wl,--no-whole-archive");
        cc.arg(format!("-L{}", cuda_lib.display()));
        cc.args(["-lcudart_static", "-lstdc++", "-ldl", "-lpthread", "-lrt"]);
    }
    let o = cc.output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let pins = Pins::load(&root.join("Cargo.toml")).unwrap();
    let policy = kiln_audit::Policy::from_pins(&pins);
    kiln_audit::audit(&so, &policy, &Default::default(), &kiln_audit::NoProgress).unwrap()
}

#[test]
fn the_fixture_builds_per_source_modules_for_every_target_and_audits_clean() {
    let tmp = tempfile::tempdir().unwrap();
    let root = fixture(tmp.path(), unchanged);
    let out = build(&root, &tmp.path().join("out"), &[]).unwrap();
    let m = &out.manifest;
    // Gated: the fp8 kernels exist from sm_89 on, declared and recorded.
    let gated: Vec<String> = m.gates["cast_f32_fp8"].iter().map(|t| t.name()).collect();
    assert_eq!(gated, ["sm_89", "sm_90", "compute_90"]);
    assert!(!kernels_of(&out, "sm_80").contains(&"cast_f32_fp8"));
    for t in ["sm_89", "sm_90", "compute_90"] {
        assert!(kernels_of(&out, t).contains(&"cast_fp8_f32"), "{t}");
    }
    // Device-compile guard: unary.cu's kernels on every target, PTX included.
    for t in ["sm_80", "sm_89", "sm_90", "compute_90"] {
        assert!(kernels_of(&out, t).contains(&"uneg_f32"), "{t}");
    }
    // Modules: one per source, in source order, each its own fatbin inside kernels.fatbin.
    let names: Vec<&str> = m.modules.iter().map(|x| x.name.as_str()).collect();
    assert_eq!(names, ["affine", "fp8", "unary"]);
    let whole = std::fs::read(&out.fatbin).unwrap();
    let table = std::fs::read_to_string(out.fatbin.with_file_name("kernels.modules.rs")).unwrap();
    for name in names {
        let alone =
            std::fs::read(out.fatbin.with_file_name(format!("modules/{name}.fatbin"))).unwrap();
        let line = table
            .lines()
            .find(|l| l.contains(&format!("\"{name}\"")))
            .unwrap();
        let numbers = line.split_once("\",").unwrap().1;
        let nums: Vec<usize> = (numbers.split(|c: char| !c.is_ascii_digit()))
            .filter_map(|n| n.parse().ok())
            .collect();
        let (offset, len) = (nums[0], nums[1]);
        assert_eq!(offset % 8, 0, "{line}");
        assert!(
            whole[offset..offset + len] == alone[..],
            "{name}: not at {offset}+{len}"
        );
    }
    // No C ABI headers: bindgen did not run, so no libclang was needed.
    assert_eq!(m.provenance.clang, "");
    let abi = std::fs::read_to_string(out.abi.as_ref().unwrap()).unwrap();
    assert_eq!(abi, kiln_build::abi::EMPTY);

    let report = audit(&out, &root);
    let bad: Vec<String> = (report.findings.iter())
        .filter(|f| f.severity >= kiln_audit::Severity::Warning)
        .map(|f| format!("{}: {}", f.rule.as_str(), f.message))
        .collect();
    assert!(bad.is_empty(), "the audit of the fixture: {bad:#?}");

    // A second clean build elsewhere: the same bytes.
    let tmp2 = tempfile::tempdir().unwrap();
    let root2 = fixture(tmp2.path(), unchanged);
    let again = build(&root2, &tmp2.path().join("out"), &[]).unwrap();
    assert_eq!(std::fs::read(&again.fatbin).unwrap(), whole);
    assert_eq!(again.summary.cached, 0);
    let lib = |o: &BuildOutput| std::fs::read(o.static_lib.as_ref().unwrap()).unwrap();
    assert!(
        lib(&again) == lib(&out),
        "the static library is byte-identical too"
    );
}

#[test]
fn host_launched_kernels_become_a_static_library_that_links_without_libcuda() {
    let tmp = tempfile::tempdir().unwrap();
    let root = fixture(tmp.path(), unchanged);
    let out = build(&root, &tmp.path().join("out"), &[]).unwrap();
    let lib = out.static_lib.clone().unwrap();
    assert!(
        lib.ends_with("libkernel_library_host.a"),
        "{}",
        lib.display()
    );
    let host = out.manifest.static_lib.as_ref().unwrap();
    assert_eq!(host.sources, ["launch.cu"]);
    let targets: Vec<String> = host.targets.iter().map(|t| t.target.name()).collect();
    assert_eq!(targets, ["sm_80", "sm_89", "sm_90", "compute_90"]);
    for t in &host.targets {
        assert!(t.kernels.iter().any(|k| k.contains("scale_add")), "{t:?}");
    }
    assert!(kernels_of(&out, "sm_80")
        .iter()
        .any(|k| k.contains("scale_add")));
    assert!(!out
        .manifest
        .modules
        .iter()
        .any(|m| m.sources.contains(&"launch.cu".to_string())));
    // A C program calling it links against the library and the static CUDA runtime.
    let dir = tmp.path();
    std::fs::write(
        dir.join("main.c"),
        "#include <stddef.h>\nint kernel_library_scale_add(size_t, const float*, const float*, float*, float, void*);\n\
         int main(int argc, char** argv) { (void)argv; return argc > 5 ? kernel_library_scale_add(0, 0, 0, 0, 1.0f, 0) : 0; }\n",
    )
    .unwrap();
    let cuda_lib = common::real_nvcc()
        .parent()
        .unwrap()
        .parent()
        .unwrap()
        .join("lib");
    let exe = dir.join("calls-kernels");
    let cc = std::process::Command::new("cc")
        .arg(dir.join("main.c"))
        .arg(format!("-L{}", lib.parent().unwrap().display()))
        .arg("-lkernel_library_host")
        .arg(format!("-L{}", cuda_lib.display()))
        .args([
            "-lcudart_static",
            "-lstdc++",
            "-ldl",
            "-lpthread",
            "-lrt",
            "-o",
        ])
        .arg(&exe)
        .output()
        .unwrap();
    assert!(
        cc.status.success(),
        "{}",
        String::from_utf8_lossy(&cc.stderr)
    );
    let dynamic = std::process::Command::new("readelf")
        .arg("-d")
        .arg(&exe)
        .output()
        .unwrap();
    let dynamic = String::from_utf8_lossy(&dynamic.stdout);
    assert!(
        !dynamic.contains("libcuda"),
        "never linked against libcuda: {dynamic}"
    );
    let symbols = std::process::Command::new("nm").arg(&lib).output().unwrap();
    assert!(String::from_utf8_lossy(&symbols.stdout).contains(" T kernel_library_scale_add"));
    // It runs (the launch is not reached: no GPU here).
    assert!(std::process::Command::new(&exe).status().unwrap().success());
}

#[test]
fn an_undeclared_arch_gate_fails_naming_the_kernel_and_how_to_declare_it() {
    let tmp = tempfile::tempdir().unwrap();
    let root = fixture(tmp.path(), |t| {
        t.replace("gates = { \"fp8.cu\" = \">=8.9\" }\n", "")
    });
    let e = build(&root, &tmp.path().join("out"), &[])
        .unwrap_err()
        .to_string();
    assert!(e.contains("cast_f32_fp8 missing for sm_80"), "{e}");
    assert!(e.contains("gates = {"), "{e}");
    // A gate that disagrees with the #if is as wrong as none.
    let root = fixture(tmp.path(), |t| t.replace("\">=8.9\"", "\">=9.0\""));
    let e = build(&root, &tmp.path().join("out2"), &[])
        .unwrap_err()
        .to_string();
    assert!(e.contains("is built for sm_89, but its gate"), "{e}");
}

#[test]
fn one_module_joins_files_with_the_same_helpers_and_compiles_ptx_device_only() {
    let tmp = tempfile::tempdir().unwrap();
    let root = fixture(tmp.path(), one_module);
    let pins = Pins::load(&root.join("Cargo.toml")).unwrap();
    let plan = KernelBuild::new(pins, root.join("kernels"), tmp.path().join("plan"))
        .env(common::env_with_nvcc(common::real_nvcc()))
        .plan()
        .unwrap();
    for j in plan.jobs.iter().filter(|j| j.id.starts_with("compile:")) {
        let argv = &j.command;
        assert!(
            !argv.iter().any(|a| a == "-dc" || a == "-c"),
            "{}: a host pass: {argv:?}",
            j.id
        );
        assert!(argv.iter().any(|a| a == "-ewp"), "{}: {argv:?}", j.id);
    }
    let out = build(&root, &tmp.path().join("out"), &[]).unwrap();
    assert!(out.manifest.modules.is_empty());
    for t in ["sm_80", "sm_89", "sm_90", "compute_90"] {
        let k = kernels_of(&out, t);
        assert!(
            k.contains(&"affine_f32") && k.contains(&"uneg_f32"),
            "{t}: {k:?}"
        );
    }
    let gated: Vec<String> = out.manifest.gates["cast_fp8_f32"]
        .iter()
        .map(|t| t.name())
        .collect();
    assert_eq!(gated, ["sm_89", "sm_90", "compute_90"]);
}

#[test]
fn nvcc_environment_and_defines_are_in_the_key() {
    let tmp = tempfile::tempdir().unwrap();
    let root = fixture(tmp.path(), unchanged);
    let out = tmp.path().join("out");
    let narrow = ("KILN_ARCHS", "8.9");
    // Three device compiles and launch.cu's host compile.
    let first = build(&root, &out, &[narrow]).unwrap().summary;
    assert_eq!((first.compiled, first.cached), (4, 0), "{first}");
    let appended = [narrow, ("NVCC_APPEND_FLAGS", "-DKILN_FIXTURE_EXTRA=1")];
    let s = build(&root, &out, &appended).unwrap().summary;
    assert_eq!(
        (s.compiled, s.cached),
        (4, 0),
        "NVCC_APPEND_FLAGS must rebuild: {s}"
    );
    let s = build(&root, &out, &appended).unwrap().summary;
    assert_eq!((s.compiled, s.cached), (0, 4), "{s}");
    // nixpkgs' nvcc wrapper compresses every fatbin unless this is set: keyed, like nvcc's own.
    let uncompressed = [
        narrow,
        ("NVCC_APPEND_FLAGS", "-DKILN_FIXTURE_EXTRA=1"),
        ("NIX_CUDA_DONT_COMPRESS_FATBINS", "1"),
    ];
    let s = build(&root, &out, &uncompressed).unwrap().summary;
    assert_eq!(
        (s.compiled, s.cached),
        (4, 0),
        "NIX_CUDA_DONT_COMPRESS_FATBINS must rebuild: {s}"
    );
    let s = build(&root, &out, &uncompressed).unwrap().summary;
    assert_eq!((s.compiled, s.cached), (0, 4), "{s}");
    // A definition in the project's table.
    let toml = root.join("Cargo.toml");
    let text = std::fs::read_to_string(&toml).unwrap();
    std::fs::write(
        &toml,
        text.replace(
            "[package.metadata.kiln.kernels]\n",
            "[package.metadata.kiln.kernels]\ndefines = [\"KILN_FIXTURE_D=2\"]\n",
        ),
    )
    .unwrap();
    let s = build(&root, &out, &uncompressed).unwrap().summary;
    assert_eq!((s.compiled, s.cached), (4, 0), "a -D must rebuild: {s}");
}

#[test]
fn an_outside_header_edit_rebuilds_exactly_the_jobs_that_include_it() {
    let tmp = tempfile::tempdir().unwrap();
    let root = fixture(tmp.path(), unchanged);
    let out = tmp.path().join("out");
    common::write(
        &root.join("common/scale.cuh"),
        "#define AFFINE_EXTRA 0.0f\n",
    );
    let affine = root.join("kernels/affine.cu");
    let text = std::fs::read_to_string(&affine).unwrap();
    std::fs::write(
        &affine,
        format!("#include \"../common/scale.cuh\"\n{text}")
            .replace("+ add;", "+ add + AFFINE_EXTRA;"),
    )
    .unwrap();
    let vars = [("KILN_ARCHS", "8.0 9.0")];
    let first = build(&root, &out, &vars).unwrap().summary;
    assert_eq!(first.compiled, 7, "{first}");
    common::write(
        &root.join("common/scale.cuh"),
        "#define AFFINE_EXTRA 1.0f\n",
    );
    let s = build(&root, &out, &vars).unwrap().summary;
    assert_eq!(
        (s.compiled, s.cached),
        (2, 5),
        "affine.cu's two jobs only: {s}"
    );
}

#[test]
fn a_comment_only_edit_relinks_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let root = fixture(tmp.path(), one_module);
    let out = tmp.path().join("out");
    let vars = [("KILN_ARCHS", "8.0 8.9")];
    let first = build(&root, &out, &vars).unwrap();
    assert_eq!(
        (first.summary.compiled, first.summary.linked),
        (7, 2),
        "{}",
        first.summary
    );
    let affine = root.join("kernels/affine.cu");
    let text = std::fs::read_to_string(&affine).unwrap();
    std::fs::write(&affine, format!("// a comment only\n{text}")).unwrap();
    let s = build(&root, &out, &vars).unwrap();
    assert_eq!(
        (s.summary.compiled, s.summary.link_jobs, s.summary.linked),
        (2, 2, 0),
        "the objects are the same bytes: {}",
        s.summary
    );
    assert_eq!(
        std::fs::read(&s.fatbin).unwrap(),
        std::fs::read(&first.fatbin).unwrap()
    );
}

#[test]
fn the_matrix_override_only_narrows_and_is_recorded() {
    let tmp = tempfile::tempdir().unwrap();
    let root = fixture(tmp.path(), unchanged);
    let out = build(&root, &tmp.path().join("out"), &[("KILN_ARCHS", "9.0+PTX")]).unwrap();
    assert_eq!(out.manifest.matrix_text(), "9.0+PTX");
    assert_eq!(out.manifest.matrix_override.as_deref(), Some("9.0+PTX"));
    let e = build(&root, &tmp.path().join("out2"), &[("KILN_ARCHS", "10.0")]).unwrap_err();
    assert!(e.to_string().contains("not in the declared matrix"), "{e}");
}

#[test]
fn nvcc_warnings_are_shown_and_kept_with_the_cached_job() {
    let tmp = tempfile::tempdir().unwrap();
    let root = fixture(tmp.path(), unchanged);
    let unary = root.join("kernels/unary.cu");
    let text = std::fs::read_to_string(&unary).unwrap();
    std::fs::write(
        &unary,
        text.replace(
            "const float v = load_streaming(inp + i);",
            "const float v = load_streaming(inp + i); int never_used;",
        ),
    )
    .unwrap();
    let vars = [("KILN_ARCHS", "8.9")];
    let out = tmp.path().join("out");
    let first = build(&root, &out, &vars).unwrap();
    let w: Vec<&String> = first
        .warnings
        .iter()
        .filter(|w| w.contains("never_used"))
        .collect();
    assert!(
        !w.is_empty() && w[0].contains("unary.cu for sm_89"),
        "{:?}",
        first.warnings
    );
    let again = build(&root, &out, &vars).unwrap();
    assert_eq!(again.summary.compiled, 0);
    assert_eq!(
        again.warnings, first.warnings,
        "a cached job shows its warnings again"
    );
}

/// A second clean build in another directory (a second CI runner) with the first one's cache
/// (`KILN_KERNEL_CACHE` for a build script): every job a hit, the same bytes.
#[test]
fn a_second_checkout_is_served_from_the_shared_cache() {
    let tmp = tempfile::tempdir().unwrap();
    let shared = tmp.path().join("shared-cache");
    let build_in = |dir: &str| {
        let root = fixture(&tmp.path().join(dir), unchanged);
        let pins = Pins::load(&root.join("Cargo.toml")).unwrap();
        KernelBuild::new(pins, root.join("kernels"), tmp.path().join(dir).join("out"))
            .cache_dir(shared.clone())
            .env(common::env_with_nvcc(common::real_nvcc()))
            .progress(false)
            .run()
            .unwrap()
    };
    let first = build_in("runner-a");
    assert_eq!(first.summary.cached, 0);
    let second = build_in("runner-b");
    let s = &second.summary;
    assert_eq!(
        (s.compiled, s.cached),
        (0, first.summary.compile_jobs),
        "{s}"
    );
    assert!(std::fs::read(&second.fatbin).unwrap() == std::fs::read(&first.fatbin).unwrap());
    let lib = |o: &BuildOutput| std::fs::read(o.static_lib.as_ref().unwrap()).unwrap();
    assert!(lib(&second) == lib(&first));
}
