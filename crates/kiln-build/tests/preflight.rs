//! Preflight fails in seconds, with a message that says what to do.

mod common;

use std::os::unix::fs::PermissionsExt;

use kiln_build::{BuildError, KernelBuild};

#[test]
fn no_nvcc_names_bootstrap_and_nix_develop() {
    let tmp = tempfile::tempdir().unwrap();
    let kernels = tmp.path().join("kernels");
    common::write(&kernels.join("a.cu"), "__global__ void k() {}\n");
    let empty_path = tmp.path().join("empty-bin");
    std::fs::create_dir_all(&empty_path).unwrap();
    let mut pins = common::pins_with_archs("[\"9.0\"]");
    // A workspace with no .toolchain/, and a PATH without nvcc.
    pins.manifest = tmp.path().join("Cargo.toml");
    let env = move |k: &str| {
        if k == "PATH" {
            Some(empty_path.clone().into_os_string())
        } else {
            None
        }
    };
    let err = KernelBuild::new(pins, kernels, tmp.path().join("out"))
        .env(env)
        .run()
        .unwrap_err();
    assert!(
        matches!(
            err,
            BuildError::Toolchain(kiln_toolchain::ToolchainError::NvccNotFound { .. })
        ),
        "{err:?}"
    );
    let msg = err.to_string();
    assert!(msg.contains("nvcc not found"), "{msg}");
    assert!(
        msg.contains("cargo xtask bootstrap") && msg.contains("nix develop"),
        "{msg}"
    );
    assert!(
        msg.contains("empty-bin/nvcc"),
        "the message lists where it looked: {msg}"
    );
}

#[test]
fn wrong_nvcc_version_is_refused_before_compiling() {
    let tmp = tempfile::tempdir().unwrap();
    let fake = tmp.path().join("bin/nvcc");
    common::write(
        &fake,
        "#!/bin/sh\necho 'nvcc: NVIDIA (R) Cuda compiler driver'\necho 'Cuda compilation tools, release 12.4, V12.4.131'\n",
    );
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    let kernels = tmp.path().join("kernels");
    common::write(&kernels.join("a.cu"), "__global__ void k() {}\n");
    let pins = common::pins_with_archs("[\"9.0\"]");
    let pinned = pins.toolchain.nvcc.clone();
    let err = KernelBuild::new(pins, kernels, tmp.path().join("out"))
        .env(common::env_with_nvcc(fake))
        .run()
        .unwrap_err();
    let msg = err.to_string();
    assert!(
        matches!(
            err,
            BuildError::Toolchain(kiln_toolchain::ToolchainError::NvccVersion { .. })
        ),
        "{err:?}"
    );
    assert!(msg.contains("12.4.131") && msg.contains(&pinned), "{msg}");
    assert!(msg.contains("cargo xtask bootstrap"), "{msg}");
    assert!(!tmp.path().join("out/kernels.fatbin").exists());
}

#[test]
fn a_target_this_nvcc_cannot_build_is_refused_by_preflight() {
    // Right version, but a toolkit build whose --list-gpu-code lacks sm_120.
    let pins = common::pins_with_archs("[\"9.0\", \"12.0+PTX\"]");
    let tmp = tempfile::tempdir().unwrap();
    let fake = tmp.path().join("bin/nvcc");
    common::write(
        &fake,
        &format!(
            "#!/bin/sh\ncase \"$1\" in\n--version) echo 'Cuda compilation tools, release 13.0, V{}';;\n--list-gpu-code) echo sm_80; echo sm_90;;\nesac\n",
            pins.toolchain.nvcc
        ),
    );
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    let err = kiln_build::toolkit::preflight(&fake, &pins)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("does not support sm_120") && err.contains("sm_80 sm_90"),
        "{err}"
    );

    // The real pinned nvcc supports the whole real matrix.
    let real = kiln_pins::Pins::load(&common::repo_root().join("Cargo.toml")).unwrap();
    kiln_build::toolkit::preflight(&common::real_nvcc(), &real)
        .expect("the pinned nvcc supports the matrix");
}
