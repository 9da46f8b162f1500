//! Run-side checks from the loaded driver: where libcuda.so.1 came from, cuInit, the driver
//! version against min-driver, PTX JIT ability, and each GPU's coverage by the arch matrix.

use kiln_pins::{max_ptx_isa_for_driver, Pins, DRIVER_PTX_ISA};

use crate::driver::{
    cuda_version_text, Driver, NotLoaded, CUDA_ERROR_NO_DEVICE, CUDA_ERROR_STUB_LIBRARY,
    CUDA_SUCCESS,
};
use crate::gpu_coverage::{coverage, ptx_isa_of_cuda, Coverage};
use crate::report::{Check, Scope};

const IDS_AFTER_LOAD: &[&str] = &[
    "driver.init",
    "driver.version",
    "driver.ptx-jit",
    "gpu.devices",
];

pub fn checks(pins: &Pins, driver: &Result<Driver, NotLoaded>) -> Vec<Check> {
    let d = match driver {
        Ok(d) => d,
        Err(e) => {
            let mut v = vec![Check::fail("driver.libcuda", Scope::Run, format!("no NVIDIA driver found: libcuda.so.1 cannot be loaded ({})", e.reason))
                .with_fix("install the NVIDIA driver (its user-space part ships libcuda.so.1); in a container, run with the NVIDIA container toolkit (`--gpus all`)")
                .with_fix("if the driver lives in a non-standard directory, add that directory to LD_LIBRARY_PATH")];
            v.extend(
                IDS_AFTER_LOAD.iter().map(|id| {
                    Check::skip(id, Scope::Run, "needs the driver (driver.libcuda failed)")
                }),
            );
            return v;
        }
    };
    let real = d
        .real_path
        .as_ref()
        .filter(|r| **r != d.path)
        .map(|r| format!(" -> {}", r.display()))
        .unwrap_or_default();
    let mut v = vec![Check::ok(
        "driver.libcuda",
        Scope::Run,
        format!("libcuda.so.1 loaded from {}{real}", d.path.display()),
    )
    .with_fact("path", d.path.display().to_string())];
    if d.init != CUDA_SUCCESS {
        let dir = d
            .path
            .parent()
            .map(|p| p.display().to_string())
            .unwrap_or_default();
        v.push(match d.init {
            CUDA_ERROR_STUB_LIBRARY => Check::fail(
                "driver.init",
                Scope::Run,
                format!("cuInit returned CUDA_ERROR_STUB_LIBRARY: {} is the CUDA toolkit's link-time stub, not a driver; every CUDA call fails", d.path.display()),
            )
            .with_fix(format!("remove {dir} from LD_LIBRARY_PATH (stubs belong on the linker's -L path only)"))
            .with_fix("install or mount the real driver's libcuda.so.1"),
            CUDA_ERROR_NO_DEVICE => Check::fail("driver.init", Scope::Run, "cuInit returned CUDA_ERROR_NO_DEVICE: the driver sees no GPU")
                .with_fix("check `nvidia-smi`, CUDA_VISIBLE_DEVICES, and that the container was started with GPUs"),
            _ => Check::fail("driver.init", Scope::Run, format!("cuInit returned {} ({})", d.init_name, d.init))
                .with_fix("check `nvidia-smi` and the kernel log (dmesg) for the driver's own error"),
        });
        v.extend(IDS_AFTER_LOAD[1..].iter().map(|id| {
            Check::skip(
                id,
                Scope::Run,
                "needs an initialised driver (driver.init failed)",
            )
        }));
        return v;
    }
    v.push(Check::ok("driver.init", Scope::Run, "cuInit(0) succeeded"));
    let cuda = d.cuda_version.map(cuda_version_text);
    // The driver branch: the release in the file name, else the branch that introduced its CUDA version.
    let release = d.release();
    let branch = release
        .as_deref()
        .and_then(|r| r.split('.').next()?.parse::<u32>().ok())
        .or_else(|| {
            let v = d.cuda_version?;
            let cuda = ((v / 1000) as u32, ((v % 1000) / 10) as u32);
            DRIVER_PTX_ISA
                .iter()
                .rev()
                .find(|row| row.cuda <= cuda)
                .map(|row| row.driver)
        });
    let described = format!(
        "driver {} (CUDA {} driver API)",
        release.clone().unwrap_or_else(|| "release unknown".into()),
        cuda.clone().unwrap_or_else(|| "?".into())
    );
    let version_check = match branch {
        Some(b) if b >= pins.min_driver => Check::ok(
            "driver.version",
            Scope::Run,
            format!("{described} >= min-driver {}", pins.min_driver),
        ),
        Some(b) => Check::fail(
            "driver.version",
            Scope::Run,
            format!(
                "{described} is older than min-driver {} (branch {b})",
                pins.min_driver
            ),
        )
        .with_fix(format!(
            "upgrade the NVIDIA driver to branch {} or newer",
            pins.min_driver
        )),
        None => Check::warn(
            "driver.version",
            Scope::Run,
            format!("{described}: cannot tell the driver branch"),
        ),
    };
    let version_check = [("release", release.clone()), ("cuda", cuda.clone())]
        .into_iter()
        .fold(version_check, |c, (k, v)| match v {
            Some(v) => c.with_fact(k, v),
            None => c,
        });
    v.push(version_check);
    v.push(ptx_jit(pins, branch));
    v.extend(gpus(pins, d, branch));
    v
}

/// `driver.ptx-jit`: can this driver JIT the PTX ISA the pinned nvcc emits?
fn ptx_jit(pins: &Pins, branch: Option<u32>) -> Check {
    const ID: &str = "driver.ptx-jit";
    let ptx: Vec<String> = pins.matrix.ptx().map(|a| a.compute()).collect();
    if ptx.is_empty() {
        return Check::ok(ID, Scope::Run, "the matrix ships no PTX; nothing to JIT");
    }
    let cuda = pins.toolchain.cuda_major_minor();
    let Some(isa) = ptx_isa_of_cuda(cuda) else {
        return Check::warn(ID, Scope::Run, format!("CUDA {cuda} is not in kiln-pins' driver/PTX-ISA table; cannot tell which ISA its PTX uses"));
    };
    let Some(max) = branch.and_then(max_ptx_isa_for_driver) else {
        return Check::fail(
            ID,
            Scope::Run,
            "the driver predates CUDA 12 (or its branch is unknown); it cannot JIT kiln's PTX",
        );
    };
    let (have, need) = (max.ptx_isa, isa);
    let text = format!(
        "driver branch {} JITs PTX ISA <= {}.{}; kiln's PTX ({}) is ISA {}.{} (nvcc of CUDA {cuda})",
        max.driver, have.0, have.1, ptx.join(" "), need.0, need.1
    );
    if have >= need {
        Check::ok(ID, Scope::Run, text)
    } else {
        Check::fail(
            ID,
            Scope::Run,
            format!("{text}: loading it fails with CUDA_ERROR_UNSUPPORTED_PTX_VERSION"),
        )
        .with_fix(format!(
            "upgrade the driver to the CUDA {cuda} branch or newer"
        ))
    }
}

fn gpus(pins: &Pins, d: &Driver, branch: Option<u32>) -> Vec<Check> {
    let mut v = Vec::new();
    let names: Vec<String> = d
        .gpus
        .iter()
        .map(|g| format!("{} (sm_{}{})", g.name, g.major, g.minor))
        .collect();
    let mut devices = if d.gpus.is_empty() {
        Check::fail(
            "gpu.devices",
            Scope::Run,
            "the driver reports no usable GPU",
        )
        .with_fix("check `nvidia-smi` and CUDA_VISIBLE_DEVICES")
    } else {
        Check::ok(
            "gpu.devices",
            Scope::Run,
            format!("{} GPU(s): {}", d.gpus.len(), names.join(", ")),
        )
    };
    for e in &d.device_errors {
        devices = devices.with_fix(format!("query problem: {e}"));
    }
    v.push(devices);
    let ptx_isa = ptx_isa_of_cuda(pins.toolchain.cuda_major_minor());
    let jit_ok = match (branch.and_then(max_ptx_isa_for_driver), ptx_isa) {
        (Some(max), Some(isa)) => max.ptx_isa >= isa,
        _ => false,
    };
    for g in &d.gpus {
        let sm = format!("sm_{}{}", g.major, g.minor);
        let extra = [
            g.sms.map(|n| format!("{n} SMs")),
            g.memory_bytes
                .map(|b| format!("{:.0} GiB", b as f64 / (1u64 << 30) as f64)),
        ]
        .into_iter()
        .flatten()
        .collect::<Vec<_>>();
        let head = format!(
            "GPU {}: {} ({sm}{}{})",
            g.index,
            g.name,
            if extra.is_empty() { "" } else { ", " },
            extra.join(", ")
        );
        let subject = format!("GPU {}", g.index);
        let check = match coverage(&pins.matrix, g.major, g.minor) {
            Coverage::ExactSass(a) => Check::ok("gpu.coverage", Scope::Run, format!("{head}: SASS {} in the matrix covers it", a.sm())),
            Coverage::CompatibleSass(a) => Check::ok(
                "gpu.coverage",
                Scope::Run,
                format!("{head}: SASS {} in the matrix covers it (binary compatible within sm_{}x)", a.sm(), g.major),
            ),
            Coverage::PtxJit(a) if jit_ok => Check::warn(
                "gpu.coverage",
                Scope::Run,
                format!("{head}: no SASS for it; only PTX {} covers it, JIT-compiled by the driver at first load", a.compute()),
            )
            .with_fix(format!("add \"{}.{}\" to `archs` in [workspace.metadata.kiln] for SASS (no JIT delay)", g.major, g.minor)),
            Coverage::PtxJit(a) => Check::fail(
                "gpu.coverage",
                Scope::Run,
                format!("{head}: only PTX {} covers it, and this driver cannot JIT that PTX ISA", a.compute()),
            )
            .with_fix(format!("add \"{}.{}\" to `archs` in [workspace.metadata.kiln], or upgrade the driver", g.major, g.minor)),
            Coverage::None => Check::fail(
                "gpu.coverage",
                Scope::Run,
                format!("{head}: no SASS or PTX in the matrix runs on {sm} (\"no kernel image is available for execution on the device\")"),
            )
            .with_fix(format!("add \"{}.{}\" to `archs` in [workspace.metadata.kiln] (Cargo.toml)", g.major, g.minor)),
        };
        let (kind, target) = match coverage(&pins.matrix, g.major, g.minor) {
            Coverage::ExactSass(a) | Coverage::CompatibleSass(a) => ("sass", a.sm()),
            Coverage::PtxJit(a) => ("ptx", a.compute()),
            Coverage::None => ("none", String::new()),
        };
        let mut check = check
            .with_subject(subject)
            .with_fact("name", &g.name)
            .with_fact("sm", &sm)
            .with_fact("coverage", kind);
        if !target.is_empty() {
            check = check.with_fact("target", target);
        }
        v.push(check);
    }
    v
}
