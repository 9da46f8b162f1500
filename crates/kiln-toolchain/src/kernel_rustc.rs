//! The kernel rustc: the rustc (and the cargo beside it) that compiles a `kernels/rust` crate
//! for `nvptx64-nvidia-cuda` — the pinned `kernel-rustc` release (Debian's `rustc-web`) or the
//! flake's nightly, with the `core` sources `-Zbuild-std` needs.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

use kiln_pins::Pins;

use crate::error::ToolchainError;
use crate::route::Route;

/// The target the kernel crate is compiled for.
pub const DEVICE_TARGET: &str = "nvptx64-nvidia-cuda";

/// A verified kernel rustc and the cargo beside it.
#[derive(Debug, Clone)]
pub struct KernelRustc {
    /// The rustc binary (passed to cargo as `RUSTC`, with `RUSTC_BOOTSTRAP=1` for `-Zbuild-std`).
    pub rustc: PathBuf,
    /// The cargo of the same toolchain, which drives the `kernels/rust` build.
    pub cargo: PathBuf,
    /// `rustc -vV`, verbatim (recorded in the manifest).
    pub version_verbose: String,
    /// Where `core` for the device target comes from.
    pub std: DeviceStd,
}

/// Where the device target's `core` comes from: the toolchain's prebuilt `rust-std` component
/// for nvptx64 (rustup and rust-overlay ship one for tier-2 targets: a Nix toolchain asked for
/// `targets = [ "nvptx64-nvidia-cuda" ]`), else compiled from the toolchain's rust-src by
/// `-Zbuild-std=core` (Debian's rustc-web has no nvptx64 `rust-std`). The prebuilt one needs no
/// standard-library lockfile and no vendored crates.io sources.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeviceStd {
    /// `lib/rustlib/nvptx64-nvidia-cuda/lib/libcore-*.rlib` in the sysroot.
    Sysroot,
    /// `-Zbuild-std=core` from `lib/rustlib/src/rust/library`.
    BuildStd,
}

impl DeviceStd {
    /// How the cache key and messages name it.
    pub fn as_str(self) -> &'static str {
        match self {
            DeviceStd::Sysroot => "sysroot",
            DeviceStd::BuildStd => "build-std=core",
        }
    }
}

/// What to install when no usable kernel rustc is found (one line), naming the bootstrap
/// command of the project's [`Route`].
pub fn install_hint(pins: &Pins) -> String {
    let v = &pins.toolchain.kernel_rustc;
    let bootstrap = match Route::of(pins) {
        Route::Checkout => "`cargo xtask bootstrap`",
        Route::Consumer => "`kiln bootstrap`",
    };
    format!(
        "install Debian's rustc-web {v} with its sources (`apt-get install --allow-downgrades \
         rustc-web={v}* libstd-rust-web-dev={v}* rust-web-src={v}* cargo-web={v}*`: a plain install \
         takes bookworm-security's newer release; {bootstrap} does this as root), or \
         enter `nix develop` (the pinned nightly with rust-src), or set KILN_KERNEL_RUSTC"
    )
}

/// `release: 1.85.0` → "1.85.0"; `commit-date: 2026-08-19` → "2026-08-19".
fn vv_field<'a>(vv: &'a str, field: &str) -> Option<&'a str> {
    vv.lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(": "))
        .map(str::trim)
}

/// Whether `rustc -vV` is a pinned kernel rustc: the exact release `kernel-rustc` or its
/// tested fallback `kernel-rustc-fallback`, or the flake's nightly (`rust-nightly`; a nightly
/// of date D carries commit-date D or the day before).
pub fn matches_pin(vv: &str, pins: &Pins) -> bool {
    let release = vv_field(vv, "release").unwrap_or("");
    if release == pins.toolchain.kernel_rustc
        || pins.toolchain.kernel_rustc_fallback.as_deref() == Some(release)
    {
        return true;
    }
    release.contains("nightly")
        && vv_field(vv, "commit-date").is_some_and(|d| {
            d == pins.toolchain.rust_nightly
                || day_before(&pins.toolchain.rust_nightly).as_deref() == Some(d)
        })
}

/// "2026-08-20" → "2026-08-19" (proleptic Gregorian).
fn day_before(date: &str) -> Option<String> {
    let mut it = date.split('-').map(|p| p.parse::<u32>().ok());
    let (y, m, d) = (it.next()??, it.next()??, it.next()??);
    if d > 1 {
        return Some(format!("{y:04}-{m:02}-{:02}", d - 1));
    }
    let (y, m) = if m == 1 { (y - 1, 12) } else { (y, m - 1) };
    let leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    let days = [
        31,
        if leap { 29 } else { 28 },
        31,
        30,
        31,
        30,
        31,
        31,
        30,
        31,
        30,
        31,
    ];
    Some(format!("{y:04}-{m:02}-{:02}", days[(m - 1) as usize]))
}

fn verbose_version(rustc: &Path) -> Option<String> {
    let out = Command::new(rustc).arg("-vV").output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// The kernel rustc: KILN_KERNEL_RUSTC, else Debian's `/usr/bin/rustc`, else `rustc` on PATH
/// (the nightly of `nix develop`) — the first whose `rustc -vV` matches the pins and whose
/// sysroot has the `core` sources `-Zbuild-std` needs. Cargo is the one beside it.
pub fn locate(
    env: &dyn Fn(&str) -> Option<OsString>,
    pins: &Pins,
) -> Result<KernelRustc, ToolchainError> {
    let mut candidates: Vec<PathBuf> = Vec::new();
    let explicit = env("KILN_KERNEL_RUSTC").map(PathBuf::from);
    match &explicit {
        Some(p) => candidates.push(p.clone()),
        None => {
            candidates.push("/usr/bin/rustc".into());
            if let Some(path) = env("PATH") {
                candidates.extend(std::env::split_paths(&path).map(|d| d.join("rustc")));
            }
        }
    }
    let mut seen = Vec::new();
    for c in candidates.iter().filter(|c| c.is_file()) {
        let Some(vv) = verbose_version(c) else {
            seen.push(format!("{} (does not run)", c.display()));
            continue;
        };
        let release = vv_field(&vv, "release").unwrap_or("?").to_string();
        if !matches_pin(&vv, pins) {
            seen.push(format!("{} is {release}", c.display()));
            continue;
        }
        let std = match device_std(c) {
            Some(std) => std,
            None => {
                seen.push(format!(
                    "{} ({release}) has neither the {DEVICE_TARGET} standard library \
                     (lib/rustlib/{DEVICE_TARGET}/lib) nor rust-src (lib/rustlib/src/rust/library/core)",
                    c.display()
                ));
                continue;
            }
        };
        let cargo = c.with_file_name("cargo");
        if !cargo.is_file() {
            seen.push(format!(
                "{} ({release}) has no cargo beside it",
                c.display()
            ));
            continue;
        }
        return Ok(KernelRustc {
            rustc: c.clone(),
            cargo,
            version_verbose: vv,
            std,
        });
    }
    let found = if seen.is_empty() {
        "none found".to_string()
    } else {
        seen.join("; ")
    };
    Err(ToolchainError::KernelRustc(format!(
        "no kernel rustc {} (or the nightly {}) with rust-src ({found}) — {}",
        pins.toolchain.kernel_rustc,
        pins.toolchain.rust_nightly,
        install_hint(pins)
    )))
}

/// The prebuilt device `core` when the sysroot has one, else rust-src for `-Zbuild-std`.
fn device_std(rustc: &Path) -> Option<DeviceStd> {
    let out = Command::new(rustc)
        .args(["--print", "sysroot"])
        .output()
        .ok()?;
    let sysroot = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    device_std_in(&sysroot)
}

/// [`device_std`] for a sysroot directory.
pub fn device_std_in(sysroot: &Path) -> Option<DeviceStd> {
    let lib = sysroot.join("lib/rustlib").join(DEVICE_TARGET).join("lib");
    let prebuilt = std::fs::read_dir(&lib).ok().is_some_and(|rd| {
        rd.flatten().any(|e| {
            let name = e.file_name();
            let name = name.to_string_lossy();
            name.starts_with("libcore-") && name.ends_with(".rlib")
        })
    });
    if prebuilt {
        Some(DeviceStd::Sysroot)
    } else if sysroot
        .join("lib/rustlib/src/rust/library/core/Cargo.toml")
        .is_file()
    {
        Some(DeviceStd::BuildStd)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The workspace's pins: 1.85.0, its fallback 1.96.0 and the nightly are kernel rustcs;
    /// another release is not.
    #[test]
    fn the_pin_its_fallback_and_the_nightly_match() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../Cargo.toml");
        let pins = Pins::load(&root).unwrap();
        let vv = |release: &str, date: &str| {
            format!(
                "rustc {release}\nrelease: {release}\ncommit-date: {date}\nLLVM version: 19.1.7"
            )
        };
        let pin = &pins.toolchain.kernel_rustc;
        let fallback = pins
            .toolchain
            .kernel_rustc_fallback
            .clone()
            .expect("a fallback pin");
        assert!(matches_pin(&vv(pin, "2025-02-17"), &pins));
        assert!(matches_pin(&vv(&fallback, "2026-05-25"), &pins));
        assert!(!matches_pin(&vv("1.90.0", "2025-09-14"), &pins));
        let nightly = format!(
            "rustc 1.91.0-nightly\nrelease: 1.91.0-nightly\ncommit-date: {}",
            pins.toolchain.rust_nightly
        );
        assert!(matches_pin(&nightly, &pins));
    }

    #[test]
    fn the_sysroots_device_core_is_preferred_to_build_std() {
        let d = tempfile::tempdir().unwrap();
        assert_eq!(device_std_in(d.path()), None);
        let src = d.path().join("lib/rustlib/src/rust/library/core");
        std::fs::create_dir_all(&src).unwrap();
        std::fs::write(src.join("Cargo.toml"), "").unwrap();
        assert_eq!(device_std_in(d.path()), Some(DeviceStd::BuildStd));
        let lib = d.path().join("lib/rustlib").join(DEVICE_TARGET).join("lib");
        std::fs::create_dir_all(&lib).unwrap();
        std::fs::write(lib.join("libcompiler_builtins-0f00.rlib"), "").unwrap();
        assert_eq!(
            device_std_in(d.path()),
            Some(DeviceStd::BuildStd),
            "no core yet"
        );
        std::fs::write(lib.join("libcore-0f00.rlib"), "").unwrap();
        assert_eq!(device_std_in(d.path()), Some(DeviceStd::Sysroot));
    }

    #[test]
    fn day_before_crosses_months_and_leap_years() {
        assert_eq!(day_before("2026-08-20").unwrap(), "2026-08-19");
        assert_eq!(day_before("2026-03-01").unwrap(), "2026-02-28");
        assert_eq!(day_before("2024-03-01").unwrap(), "2024-02-29");
        assert_eq!(day_before("2026-01-01").unwrap(), "2025-12-31");
    }
}
