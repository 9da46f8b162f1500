//! `kiln.lib.buildWheel` (nix/lib/buildWheel.nix) as the template uses it: its build phases run
//! in stdenv's order with crane's REAL setup hooks, up to maturin (checks/nix/phase-order/run.sh
//! says what is modelled and what is not), and the shape of its dependency cache.
//!
//! The derivation is the one `nix flake init -t` of this kiln gives (the template's
//! `packages.x86_64-linux.default`), evaluated offline with kiln's inputs replaced by the test
//! doubles (checks/nix/doubles). Its strings (`postUnpack`, `postPatch`, `preConfigure`, the
//! maturin command) are what the doubles cannot change: they are buildWheel's own. The setup
//! hooks are crane's real files at the locked revision, from `KILN_REAL_CRANE` (an unpacked
//! `git archive` of crane 2c71e194, checks/nix/README.md); without it the phase test is skipped
//! with a message (CI has no crane source).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Once;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Nix from the workspace's `.toolchain/` (installed by nix-check when missing), KILN_NIX_BIN,
/// or PATH.
fn nix() -> Command {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let out = Command::new(env!("CARGO_BIN_EXE_xtask"))
            .args(["nix-check", "--toolchain"])
            .arg(workspace().join(".toolchain"))
            .arg("--tools-only")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "nix-check --tools-only: {}",
            text(&out)
        );
    });
    let bin = match std::env::var_os("KILN_NIX_BIN") {
        Some(dir) => PathBuf::from(dir).join("nix"),
        None if workspace().join(".toolchain/nix/bin/nix").exists() => {
            workspace().join(".toolchain/nix/bin/nix")
        }
        None => PathBuf::from("nix"),
    };
    let mut c = Command::new(bin);
    c.args([
        "--extra-experimental-features",
        "nix-command flakes",
        "--offline",
    ]);
    c
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let dest = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &dest);
        } else {
            std::fs::copy(entry.path(), &dest).unwrap();
        }
    }
}

/// checks/consumer's tracked files (relative), as a fresh clone holds them.
fn consumer_files() -> Vec<PathBuf> {
    let out = Command::new("git")
        .arg("-C")
        .arg(workspace())
        .args(["ls-files", "-z", "--", "checks/consumer"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    out.stdout
        .split(|b| *b == 0)
        .filter(|p| !p.is_empty())
        .map(|p| {
            Path::new(std::str::from_utf8(p).unwrap())
                .strip_prefix("checks/consumer")
                .unwrap()
                .to_path_buf()
        })
        .collect()
}

/// A copy of the flake (what its evaluation reads) and a project made from its template.
struct Template {
    kiln: tempfile::TempDir,
    project: tempfile::TempDir,
}

impl Template {
    fn new() -> Template {
        let ws = workspace();
        let kiln = tempfile::tempdir().unwrap();
        for f in ["flake.nix", "flake.lock", "Cargo.toml", "Cargo.lock"] {
            std::fs::copy(ws.join(f), kiln.path().join(f)).unwrap();
        }
        std::fs::create_dir_all(kiln.path().join("kernels/rust")).unwrap();
        std::fs::copy(
            ws.join("kernels/rust/Cargo.lock"),
            kiln.path().join("kernels/rust/Cargo.lock"),
        )
        .unwrap();
        std::fs::create_dir_all(kiln.path().join("crates/kiln-py")).unwrap();
        for f in ["crates/kiln-py/Cargo.toml", "crates/kiln-py/pyproject.toml"] {
            std::fs::copy(ws.join(f), kiln.path().join(f)).unwrap();
        }
        copy_dir(&ws.join("nix"), &kiln.path().join("nix"));
        copy_dir(&ws.join("checks/nix"), &kiln.path().join("checks/nix"));
        for f in consumer_files() {
            let to = kiln.path().join("checks/consumer").join(&f);
            std::fs::create_dir_all(to.parent().unwrap()).unwrap();
            std::fs::copy(ws.join("checks/consumer").join(&f), to).unwrap();
        }
        let project = tempfile::tempdir().unwrap();
        let out = nix()
            .current_dir(project.path())
            .args(["flake", "init", "-t"])
            .arg(format!("path:{}", kiln.path().display()))
            .output()
            .unwrap();
        assert!(out.status.success(), "nix flake init -t: {}", text(&out));
        Template { kiln, project }
    }

    /// `nix eval --json` of the project's `attr`, kiln = the copy, kiln's inputs = the doubles.
    fn eval_json(&self, attr: &str, apply: &str) -> serde_json::Value {
        let mut c = nix();
        c.current_dir(self.project.path()).args([
            "eval",
            "--json",
            "--no-write-lock-file",
            "--override-input",
            "kiln",
            &format!("path:{}", self.kiln.path().display()),
        ]);
        for d in ["nixpkgs", "crane", "rust-overlay"] {
            c.args(["--override-input", &format!("kiln/{d}")])
                .arg(format!(
                    "path:{}",
                    self.kiln
                        .path()
                        .join("checks/nix/doubles")
                        .join(d)
                        .display()
                ));
        }
        let out = c
            .arg(format!("path:{}#{attr}", self.project.path().display()))
            .args(["--apply", apply])
            .output()
            .unwrap();
        assert!(out.status.success(), "nix eval {attr}: {}", text(&out));
        serde_json::from_slice(&out.stdout).unwrap()
    }
}

/// The derivation's attributes a build's phases read (null where it has none); derivations
/// (cargoArtifacts) only as "set" or null, so nothing is built or forced further.
const WHEEL_ATTRS: &str = r#"d: builtins.listToAttrs (map (n: { name = n; value = let v = d.${n} or null; in if builtins.isAttrs v then "set" else v; }) [
  "postUnpack" "prePatch" "postPatch" "preConfigure" "postConfigure" "buildPhaseCargoCommand"
  "kilnLayoutDir" "kilnProjectDir" "cargoArtifacts" "doInstallCargoArtifacts" "sourceRoot" ])"#;

/// The template's wheel derivation, through kiln's phases with crane's real hooks: it reaches
/// maturin in the laid-out project (kiln-build's `../../crates/kiln-build` resolving into kiln's
/// source), with CARGO_HOME set, the vendored sources configured and crane's dependency
/// artifacts restored, and cargo resolves the project's own Cargo.lock with `--locked`.
#[test]
fn the_template_wheel_reaches_maturin_in_stdenv_phase_order() {
    let Some(crane) = std::env::var_os("KILN_REAL_CRANE").map(PathBuf::from) else {
        eprintln!("SKIPPED: KILN_REAL_CRANE is not set (an unpacked crane 2c71e194: checks/nix/README.md); crane's setup hooks are needed to run the phases");
        return;
    };
    if !crane
        .join("lib/setupHooks/configureCargoCommonVarsHook.sh")
        .is_file()
    {
        eprintln!(
            "SKIPPED: KILN_REAL_CRANE={} has no lib/setupHooks/configureCargoCommonVarsHook.sh",
            crane.display()
        );
        return;
    }
    let ws = workspace();
    let t = Template::new();
    let work = tempfile::tempdir().unwrap();
    let attrs = t.eval_json("packages.x86_64-linux.default", WHEEL_ATTRS);
    let drv_json = work.path().join("drv.json");
    std::fs::write(&drv_json, serde_json::to_vec_pretty(&attrs).unwrap()).unwrap();

    // The project's Cargo.lock vendored as crane would (its config.toml is what crane's
    // configureCargoVendoredDepsHook appends to $CARGO_HOME/config.toml), from cargo's own
    // cache: offline, and --locked, so a lock that does not match kiln-build fails here too.
    let vendor = work.path().join("vendor");
    let out = Command::new("cargo")
        .args(["vendor", "--locked", "--offline", "--manifest-path"])
        .arg(ws.join("checks/consumer/Cargo.toml"))
        .arg(&vendor)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "vendoring checks/consumer/Cargo.lock offline (run `cargo fetch --manifest-path checks/consumer/Cargo.toml` once with network): {}",
        text(&out)
    );
    std::fs::write(vendor.join("config.toml"), &out.stdout).unwrap();

    let sysroot = Command::new("rustc")
        .args(["--print", "sysroot"])
        .output()
        .unwrap();
    assert!(sysroot.status.success(), "{}", text(&sysroot));
    let rust_bin = PathBuf::from(String::from_utf8_lossy(&sysroot.stdout).trim()).join("bin");

    let src = work.path().join("source");
    copy_dir(t.project.path(), &src);
    let run = Command::new("bash")
        .arg(ws.join("checks/nix/phase-order/run.sh"))
        .env("CRANE", &crane)
        .env("DRV_JSON", &drv_json)
        .env("SRC", &src)
        .env("KILN_SOURCE", &ws)
        .env("VENDOR", &vendor)
        .env("RUST_BIN", &rust_bin)
        .env("WORK", work.path())
        .output()
        .unwrap();
    let log = text(&run);
    assert!(
        run.status.success(),
        "the wheel's phases failed before the end of buildPhase:\n{log}"
    );
    eprintln!("{log}");
    let reached = std::fs::read_to_string(work.path().join("reached"))
        .unwrap_or_else(|_| panic!("maturin was never reached:\n{log}"));
    // Where crane's configureCargoCommonVars puts it: inside the project's build directory.
    assert!(
        reached.contains("CARGO_HOME=") && reached.contains("/kiln-layout/checks/consumer"),
        "{reached}\n{log}"
    );
    // stdenv's order, as the log shows it: the layout (postUnpack) before patchPhase, crane's
    // CARGO_HOME (postPatchHooks) before its vendored config (preConfigureHooks), both before
    // maturin.
    let at = |needle: &str| {
        log.find(needle)
            .unwrap_or_else(|| panic!("{needle:?} not in the log:\n{log}"))
    };
    assert!(
        at("runHook postUnpack") < at("phase-order: patchPhase"),
        "{log}"
    );
    assert!(
        at("postPatch hook: configureCargoCommonVars")
            < at("preConfigure hook: configureCargoVendoredDepsHook"),
        "{log}"
    );
    assert!(
        at("preConfigure hook: configureCargoVendoredDepsHook") < at("phase-order: maturin"),
        "{log}"
    );
    // cargo resolved kiln-build from kiln's source through the project's relative path.
    let meta: serde_json::Value =
        serde_json::from_slice(&std::fs::read(work.path().join("metadata.json")).unwrap()).unwrap();
    let kb = meta["packages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "kiln-build")
        .expect("kiln-build in cargo metadata");
    let manifest = PathBuf::from(kb["manifest_path"].as_str().unwrap());
    assert!(
        manifest.ends_with("kiln-layout/crates/kiln-build/Cargo.toml"),
        "{}",
        manifest.display()
    );
    assert_eq!(
        manifest.canonicalize().unwrap(),
        ws.join("crates/kiln-build/Cargo.toml")
            .canonicalize()
            .unwrap()
    );
}

/// The wheel builds on a crane dependency-only build of the same project, laid out the same
/// way and built for the target maturin is told to build for (so its target/<triple>/ is the
/// directory maturin's cargo uses), and vendors the Rust kernels' and the standard library's
/// lockfiles exactly when the project has Rust kernels.
#[test]
fn the_template_wheel_has_a_dependency_cache_for_its_target_and_its_locks() {
    let t = Template::new();
    let wheel = t.eval_json("packages.x86_64-linux.default", WHEEL_ATTRS);
    let deps = t.eval_json("packages.x86_64-linux.default.cargoArtifacts", WHEEL_ATTRS);
    assert_eq!(wheel["cargoArtifacts"], "set", "{wheel}");
    assert_eq!(deps["postUnpack"], wheel["postUnpack"], "{deps}\n{wheel}");
    assert_eq!(deps["kilnProjectDir"], "checks/consumer");
    assert_eq!(
        deps["buildPhaseCargoCommand"], wheel["buildPhaseCargoCommand"],
        "the dependency build runs the wheel's maturin command (its target and linker)"
    );
    let target = "--target x86_64-unknown-linux-gnu";
    for (what, cmd) in [
        ("maturin", &wheel["buildPhaseCargoCommand"]),
        ("deps", &deps["buildPhaseCargoCommand"]),
    ] {
        assert!(cmd.as_str().unwrap().contains(target), "{what}: {cmd}");
    }
    assert!(
        wheel["postPatch"].is_null(),
        "nothing may run in postPatch (before crane's CARGO_HOME): {}",
        wheel["postPatch"]
    );

    let locks = |t: &Template| -> Vec<String> {
        let v = t.eval_json(
            "packages.x86_64-linux.default.cargoVendorDir.cargoLockList",
            "map toString",
        );
        v.as_array()
            .unwrap()
            .iter()
            .map(|s| s.as_str().unwrap().to_string())
            .collect()
    };
    let plain = locks(&t);
    assert_eq!(plain.len(), 1, "{plain:?}");
    assert!(plain[0].ends_with("/Cargo.lock"), "{plain:?}");
    // The same project with Rust kernels (their lockfile is what says so).
    std::fs::create_dir_all(t.project.path().join("kernels/rust")).unwrap();
    std::fs::copy(
        workspace().join("kernels/rust/Cargo.lock"),
        t.project.path().join("kernels/rust/Cargo.lock"),
    )
    .unwrap();
    let with_kernels = locks(&t);
    // No standard-library lock: the nightly's prebuilt nvptx64 core needs no vendored crates.
    assert_eq!(with_kernels.len(), 2, "{with_kernels:?}");
    assert!(
        with_kernels[1].ends_with("/kernels/rust/Cargo.lock"),
        "{with_kernels:?}"
    );
}

/// The template's kiln input is kiln's repository as Cargo.toml names it, in `git+` form: one
/// URL for the project, so giving kiln its real address (Cargo.toml) fails here until the
/// template follows. The template marks that line as the one a project changes.
#[test]
fn the_template_kiln_input_is_the_repository_cargo_toml_names() {
    let ws = workspace();
    let cargo: toml::Value =
        toml::from_str(&std::fs::read_to_string(ws.join("Cargo.toml")).unwrap()).unwrap();
    let repo = cargo["workspace"]["package"]["repository"]
        .as_str()
        .unwrap();
    let flake = std::fs::read_to_string(ws.join("checks/consumer/flake.nix")).unwrap();
    let lines: Vec<&str> = flake
        .lines()
        .filter(|l| l.trim_start().starts_with("kiln.url ="))
        .collect();
    assert_eq!(
        lines,
        [format!("    kiln.url = \"git+{repo}\";").as_str()],
        "checks/consumer/flake.nix"
    );
    assert!(flake.contains("THE one line to change"), "{flake}");
}

/// Other kiln-build paths a project may name: a kiln checkout beside it is laid out there; a
/// path no sandbox has (absolute) or one that would put the project inside kiln's workspace
/// where it is not excluded is refused at evaluation, naming the path.
#[test]
fn other_kiln_build_paths_are_laid_out_or_refused() {
    let t = Template::new();
    let cargo = t.project.path().join("Cargo.toml");
    let orig = std::fs::read_to_string(&cargo).unwrap();
    let with_path = |p: &str| {
        let s = orig.replace(
            "kiln-build = { path = \"../../crates/kiln-build\" }",
            &format!("kiln-build = {{ path = \"{p}\" }}"),
        );
        assert_ne!(s, orig);
        std::fs::write(&cargo, s).unwrap();
    };
    with_path("../../src/kiln/crates/kiln-build");
    let v = t.eval_json(
        "packages.x86_64-linux.default",
        "d: [ d.kilnLayoutDir d.kilnProjectDir ]",
    );
    assert_eq!(
        v,
        serde_json::json!(["src/kiln", "kiln-project/kiln-project"])
    );
    for (p, why) in [
        ("/opt/kiln/crates/kiln-build", "is absolute"),
        ("../crates/kiln-build", "inside kiln's workspace"),
        ("../kiln/crates/kiln-pins", "is not a relative path"),
    ] {
        with_path(p);
        let mut c = nix();
        c.current_dir(t.project.path()).args([
            "eval",
            "--raw",
            "--no-write-lock-file",
            "--override-input",
            "kiln",
            &format!("path:{}", t.kiln.path().display()),
        ]);
        for d in ["nixpkgs", "crane", "rust-overlay"] {
            c.args(["--override-input", &format!("kiln/{d}")])
                .arg(format!(
                    "path:{}",
                    t.kiln.path().join("checks/nix/doubles").join(d).display()
                ));
        }
        let out = c
            .arg(format!(
                "path:{}#packages.x86_64-linux.default.drvPath",
                t.project.path().display()
            ))
            .output()
            .unwrap();
        let msg = text(&out);
        assert!(!out.status.success(), "{p}: {msg}");
        assert!(msg.contains(p) && msg.contains(why), "{p}: {msg}");
    }
}

/// buildWheel uses the template's Cargo.lock `--locked`, as is: it must already name every
/// crate kiln-build brings (a new internal kiln crate changes it). Runs without crane.
#[test]
fn the_template_lock_is_current() {
    let out = Command::new(env!("CARGO"))
        .args([
            "metadata",
            "--locked",
            "--format-version",
            "1",
            "--manifest-path",
        ])
        .arg(workspace().join("checks/consumer/Cargo.toml"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "checks/consumer/Cargo.lock is out of date (cargo metadata --manifest-path checks/consumer/Cargo.toml updates it): {}",
        String::from_utf8_lossy(&out.stderr)
    );
}
