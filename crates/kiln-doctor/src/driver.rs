//! The NVIDIA driver, loaded the way kiln's runtime loads it: `libcuda.so.1` by that exact name
//! at run time (never the unversioned `libcuda.so`, which may be the toolkit's link-time stub).

use std::ffi::{c_char, c_int, c_uint, c_void, CStr};
use std::path::{Path, PathBuf};

pub type CuResult = c_int;
pub const CUDA_SUCCESS: CuResult = 0;
pub const CUDA_ERROR_STUB_LIBRARY: CuResult = 34;
pub const CUDA_ERROR_NO_DEVICE: CuResult = 100;

/// CUdevice_attribute values (cuda.h).
const ATTR_MULTIPROCESSOR_COUNT: c_int = 16;
const ATTR_COMPUTE_CAPABILITY_MAJOR: c_int = 75;
const ATTR_COMPUTE_CAPABILITY_MINOR: c_int = 76;

#[derive(Debug, Clone)]
pub struct Gpu {
    pub index: i32,
    pub name: String,
    pub major: u32,
    pub minor: u32,
    pub sms: Option<u32>,
    pub memory_bytes: Option<u64>,
}

/// What the loaded driver said.
#[derive(Debug, Clone)]
pub struct Driver {
    /// The file the loader resolved `libcuda.so.1` to (as dladdr reports it).
    pub path: PathBuf,
    /// `path` with symlinks resolved (its name carries the driver version, e.g. libcuda.so.580.95.05).
    pub real_path: Option<PathBuf>,
    /// cuDriverGetVersion: 13000 for CUDA 13.0.
    pub cuda_version: Option<i32>,
    /// cuInit(0).
    pub init: CuResult,
    /// The driver's name for `init` when it is not success.
    pub init_name: String,
    pub gpus: Vec<Gpu>,
    /// Per-device query failures (the device is skipped).
    pub device_errors: Vec<String>,
}

impl Driver {
    /// The driver release, "580.95.05": from the resolved file name, else /proc/driver/nvidia/version.
    pub fn release(&self) -> Option<String> {
        let from_name = self
            .real_path
            .as_ref()
            .and_then(|p| {
                p.file_name()?
                    .to_str()?
                    .strip_prefix("libcuda.so.")
                    .map(str::to_string)
            })
            .filter(|v| {
                v.contains('.') && v.split('.').all(|p| p.bytes().all(|b| b.is_ascii_digit()))
            });
        from_name.or_else(|| {
            let text = std::fs::read_to_string("/proc/driver/nvidia/version").ok()?;
            parse_proc_version(&text)
        })
    }
}

/// "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.95.05  Tue …" -> "580.95.05".
pub fn parse_proc_version(text: &str) -> Option<String> {
    let line = text.lines().find(|l| l.starts_with("NVRM version"))?;
    line.split_whitespace()
        .find(|w| {
            w.contains('.')
                && w.split('.')
                    .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
        })
        .map(str::to_string)
}

/// "CUDA 13.0" from cuDriverGetVersion's 13000.
pub fn cuda_version_text(v: i32) -> String {
    format!("{}.{}", v / 1000, (v % 1000) / 10)
}

/// The driver could not be loaded at all.
#[derive(Debug, Clone)]
pub struct NotLoaded {
    /// dlerror's text.
    pub reason: String,
}

type FnInit = unsafe extern "C" fn(c_uint) -> CuResult;
type FnGetVersion = unsafe extern "C" fn(*mut c_int) -> CuResult;
type FnGetCount = unsafe extern "C" fn(*mut c_int) -> CuResult;
type FnDeviceGet = unsafe extern "C" fn(*mut c_int, c_int) -> CuResult;
type FnGetName = unsafe extern "C" fn(*mut c_char, c_int, c_int) -> CuResult;
type FnGetAttribute = unsafe extern "C" fn(*mut c_int, c_int, c_int) -> CuResult;
type FnTotalMem = unsafe extern "C" fn(*mut usize, c_int) -> CuResult;
type FnErrorName = unsafe extern "C" fn(CuResult, *mut *const c_char) -> CuResult;

/// Loads `libcuda.so.1`, initialises it and lists the GPUs.
pub fn probe() -> Result<Driver, NotLoaded> {
    // SAFETY: loading the driver runs its initialisers; that is what every CUDA program does.
    let lib = unsafe { libloading::Library::new("libcuda.so.1") }.map_err(|e| NotLoaded {
        reason: with_sources(&e),
    })?;
    // The driver is never unloaded: dlclose of libcuda is known to hang or crash at exit.
    let lib: &'static libloading::Library = Box::leak(Box::new(lib));
    // SAFETY: the signatures below are the driver API's (cuda.h); a symbol that is missing is
    // reported, never called.
    unsafe {
        let sym = |name: &[u8]| lib.get::<*const c_void>(name).ok().map(|s| *s);
        let path = sym(b"cuInit\0")
            .and_then(loaded_from)
            .unwrap_or_else(|| PathBuf::from("libcuda.so.1"));
        let real_path = std::fs::canonicalize(&path).ok();
        let init: Option<libloading::Symbol<FnInit>> = lib.get(b"cuInit\0").ok();
        let get_version: Option<libloading::Symbol<FnGetVersion>> =
            lib.get(b"cuDriverGetVersion\0").ok();
        let error_name: Option<libloading::Symbol<FnErrorName>> = lib.get(b"cuGetErrorName\0").ok();
        let cuda_version = get_version.and_then(|f| {
            let mut v = 0;
            (f(&mut v) == CUDA_SUCCESS).then_some(v)
        });
        let init = match init {
            Some(f) => f(0),
            // A library without cuInit is not a driver; report it like a stub.
            None => CUDA_ERROR_STUB_LIBRARY,
        };
        let name_of = |r: CuResult| -> String {
            if let Some(f) = &error_name {
                let mut p: *const c_char = std::ptr::null();
                if f(r, &mut p) == CUDA_SUCCESS && !p.is_null() {
                    return CStr::from_ptr(p).to_string_lossy().into_owned();
                }
            }
            known_error_name(r)
                .map(str::to_string)
                .unwrap_or_else(|| format!("CUresult {r}"))
        };
        let mut driver = Driver {
            path,
            real_path,
            cuda_version,
            init,
            init_name: name_of(init),
            gpus: Vec::new(),
            device_errors: Vec::new(),
        };
        if init != CUDA_SUCCESS {
            return Ok(driver);
        }
        let count_fn: Option<libloading::Symbol<FnGetCount>> = lib.get(b"cuDeviceGetCount\0").ok();
        let device_get: Option<libloading::Symbol<FnDeviceGet>> = lib.get(b"cuDeviceGet\0").ok();
        let get_name: Option<libloading::Symbol<FnGetName>> = lib.get(b"cuDeviceGetName\0").ok();
        let get_attr: Option<libloading::Symbol<FnGetAttribute>> =
            lib.get(b"cuDeviceGetAttribute\0").ok();
        let total_mem: Option<libloading::Symbol<FnTotalMem>> =
            lib.get(b"cuDeviceTotalMem_v2\0").ok();
        let (Some(count_fn), Some(device_get), Some(get_name), Some(get_attr)) =
            (count_fn, device_get, get_name, get_attr)
        else {
            driver.device_errors.push("the driver lacks cuDeviceGetCount/cuDeviceGet/cuDeviceGetName/cuDeviceGetAttribute".into());
            return Ok(driver);
        };
        let mut count = 0;
        let r = count_fn(&mut count);
        if r != CUDA_SUCCESS {
            driver
                .device_errors
                .push(format!("cuDeviceGetCount failed: {}", name_of(r)));
            return Ok(driver);
        }
        for index in 0..count {
            let mut dev = 0;
            let r = device_get(&mut dev, index);
            if r != CUDA_SUCCESS {
                driver
                    .device_errors
                    .push(format!("cuDeviceGet({index}) failed: {}", name_of(r)));
                continue;
            }
            let mut buf = [0 as c_char; 256];
            let name = if get_name(buf.as_mut_ptr(), buf.len() as c_int, dev) == CUDA_SUCCESS {
                CStr::from_ptr(buf.as_ptr()).to_string_lossy().into_owned()
            } else {
                "(unnamed)".to_string()
            };
            let attr = |a: c_int| -> Option<u32> {
                let mut v = 0;
                (get_attr(&mut v, a, dev) == CUDA_SUCCESS && v >= 0).then_some(v as u32)
            };
            let (Some(major), Some(minor)) = (
                attr(ATTR_COMPUTE_CAPABILITY_MAJOR),
                attr(ATTR_COMPUTE_CAPABILITY_MINOR),
            ) else {
                driver.device_errors.push(format!(
                    "GPU {index} ({name}): compute capability query failed"
                ));
                continue;
            };
            let memory_bytes = total_mem.as_ref().and_then(|f| {
                let mut b = 0usize;
                (f(&mut b, dev) == CUDA_SUCCESS).then_some(b as u64)
            });
            driver.gpus.push(Gpu {
                index,
                name,
                major,
                minor,
                sms: attr(ATTR_MULTIPROCESSOR_COUNT),
                memory_bytes,
            });
        }
        Ok(driver)
    }
}

/// An error and its causes: libloading's "dlopen failed" carries dlerror's text as its source.
pub(crate) fn with_sources(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        text.push_str(": ");
        text.push_str(&c.to_string());
        cause = c.source();
    }
    text
}

/// The file an address was loaded from (dladdr), i.e. where `libcuda.so.1` really came from.
fn loaded_from(addr: *const c_void) -> Option<PathBuf> {
    let mut info = libc::Dl_info {
        dli_fname: std::ptr::null(),
        dli_fbase: std::ptr::null_mut(),
        dli_sname: std::ptr::null(),
        dli_saddr: std::ptr::null_mut(),
    };
    // SAFETY: dladdr only reads the loader's tables and fills `info`.
    let ok = unsafe { libc::dladdr(addr, &mut info) } != 0;
    if !ok || info.dli_fname.is_null() {
        return None;
    }
    // SAFETY: dli_fname is a NUL-terminated string owned by the loader.
    let name = unsafe { CStr::from_ptr(info.dli_fname) };
    use std::os::unix::ffi::OsStrExt;
    Some(Path::new(std::ffi::OsStr::from_bytes(name.to_bytes())).to_path_buf())
}

/// Names for the results the doctor explains, for libraries without cuGetErrorName (stubs).
pub fn known_error_name(r: CuResult) -> Option<&'static str> {
    Some(match r {
        0 => "CUDA_SUCCESS",
        3 => "CUDA_ERROR_NOT_INITIALIZED",
        34 => "CUDA_ERROR_STUB_LIBRARY",
        35 => "CUDA_ERROR_INSUFFICIENT_DRIVER",
        46 => "CUDA_ERROR_DEVICE_UNAVAILABLE",
        100 => "CUDA_ERROR_NO_DEVICE",
        101 => "CUDA_ERROR_INVALID_DEVICE",
        304 => "CUDA_ERROR_OPERATING_SYSTEM",
        802 => "CUDA_ERROR_SYSTEM_NOT_READY",
        803 => "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH",
        804 => "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE",
        999 => "CUDA_ERROR_UNKNOWN",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_kernel_module_version() {
        let text = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.95.05  Tue Sep 23 09:55:41 UTC 2025\nGCC version:  gcc version 12.2.0\n";
        assert_eq!(parse_proc_version(text).as_deref(), Some("580.95.05"));
        assert_eq!(parse_proc_version("nothing"), None);
        assert_eq!(cuda_version_text(13000), "13.0");
        assert_eq!(cuda_version_text(12090), "12.9");
    }
}
