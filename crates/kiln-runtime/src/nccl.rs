//! All-reduce (sum) across the GPUs of one machine through NCCL.
//!
//! cudarc's NCCL bindings give the types, but its loader cannot find the library: its name
//! candidates (`libnccl.so`, `libnccl.so.13`, … `.so.1`) do not include NCCL's real soname
//! `libnccl.so.2`, the only name the nvidia-nccl wheel ships. So the six entry points used
//! here are resolved from `libnccl.so.2` (loader.rs); results are read as plain ints so an
//! unexpected status can never be an invalid enum value.

use std::ffi::{c_char, c_int, c_void};

use cudarc::nccl::sys::{ncclComm_t, ncclDataType_t, ncclRedOp_t};

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::gpu::Gpu;
use crate::tensor::{Tensor, View};
use crate::{loader, validate};

type InitAll = unsafe extern "C" fn(*mut ncclComm_t, c_int, *const c_int) -> c_int;
type AllReduce = unsafe extern "C" fn(
    *const c_void,
    *mut c_void,
    usize,
    ncclDataType_t,
    ncclRedOp_t,
    ncclComm_t,
    *mut c_void,
) -> c_int;
type Group = unsafe extern "C" fn() -> c_int;
type Destroy = unsafe extern "C" fn(ncclComm_t) -> c_int;
type ErrorString = unsafe extern "C" fn(c_int) -> *const c_char;
type GetVersion = unsafe extern "C" fn(*mut c_int) -> c_int;

pub(crate) struct Api {
    init_all: InitAll,
    all_reduce: AllReduce,
    group_start: Group,
    group_end: Group,
    destroy: Destroy,
    error_string: ErrorString,
    get_version: GetVersion,
}

/// NCCL, from exactly the pinned soname (`libnccl.so.2`).
pub(crate) static NCCL: loader::Api<Api> = loader::Api::new(
    loader::LibrarySpec {
        name: "NCCL",
        soname: loader::sonames::NCCL_SONAME,
        wheel: loader::sonames::NCCL_WHEEL,
        feature: "all_reduce_sum",
        abi: loader::sonames::NCCL_ABI,
    },
    |s| {
        // SAFETY: each type above is the C prototype from nccl.h.
        unsafe {
            Ok(Api {
                init_all: s.get("ncclCommInitAll")?,
                all_reduce: s.get("ncclAllReduce")?,
                group_start: s.get("ncclGroupStart")?,
                group_end: s.get("ncclGroupEnd")?,
                destroy: s.get("ncclCommDestroy")?,
                error_string: s.get("ncclGetErrorString")?,
                get_version: s.get("ncclGetVersion")?,
            })
        }
    },
    // ncclGetVersion: NCCL_VERSION_CODE, major*10000 + minor*100 + patch since 2.9.
    |api| {
        let mut code: c_int = 0;
        // SAFETY: writes one int.
        api.check("ncclGetVersion", unsafe { (api.get_version)(&mut code) })?;
        Ok((
            loader::split_version_code(code.max(0) as u64),
            api.get_version as usize,
        ))
    },
);

impl Api {
    fn check(&self, call: &str, status: c_int) -> Result<()> {
        NCCL.check(call, status, self.error_string)
    }
}

/// One NCCL communicator per GPU, all in this process (`ncclCommInitAll`). A communicator of
/// one GPU is valid: its all-reduce is a copy, which keeps the one-GPU path the same code.
pub struct Communicator {
    api: &'static Api,
    gpus: Vec<Gpu>,
    comms: Vec<ncclComm_t>,
}
// SAFETY: NCCL communicators may be used from any thread, one call at a time (&mut-free API
// here only issues grouped calls from the caller's thread).
unsafe impl Send for Communicator {}
unsafe impl Sync for Communicator {}

impl Communicator {
    /// A communicator over `gpus` (distinct devices, in rank order).
    pub fn new(gpus: &[Gpu]) -> Result<Communicator> {
        if gpus.is_empty() {
            return Err(Error::Shape("NCCL communicator: no GPUs given".into()));
        }
        let mut ordinals: Vec<c_int> = gpus.iter().map(|g| g.ordinal() as c_int).collect();
        let mut sorted = ordinals.clone();
        sorted.sort();
        sorted.dedup();
        if sorted.len() != ordinals.len() {
            return Err(Error::Shape(format!(
                "NCCL communicator: GPUs must be distinct, got ordinals {ordinals:?}"
            )));
        }
        let api = NCCL.get()?;
        gpus[0].bind()?;
        let mut comms: Vec<ncclComm_t> = vec![std::ptr::null_mut(); gpus.len()];
        // SAFETY: comms has one slot per device in `ordinals`.
        api.check("ncclCommInitAll", unsafe {
            (api.init_all)(
                comms.as_mut_ptr(),
                gpus.len() as c_int,
                ordinals.as_mut_ptr(),
            )
        })?;
        Ok(Communicator {
            api,
            gpus: gpus.to_vec(),
            comms,
        })
    }

    /// A communicator over every visible GPU.
    pub fn all_visible() -> Result<Communicator> {
        let n = Gpu::device_count()?;
        let gpus = (0..n).map(Gpu::new).collect::<Result<Vec<_>>>()?;
        Communicator::new(&gpus)
    }

    pub fn size(&self) -> usize {
        self.gpus.len()
    }

    pub fn gpus(&self) -> &[Gpu] {
        &self.gpus
    }

    /// NCCL's version code (e.g. 23007 for 2.30.7).
    pub fn nccl_version(&self) -> Result<i32> {
        let mut v: c_int = 0;
        // SAFETY: writes one int.
        self.api
            .check("ncclGetVersion", unsafe { (self.api.get_version)(&mut v) })?;
        Ok(v)
    }

    /// Element-wise sum of `inputs[r]` (on GPU r of the communicator) over all ranks; returns
    /// one fresh tensor per GPU, each holding the sum. Same shape and float dtype everywhere.
    pub fn all_reduce_sum(&self, inputs: &[&View]) -> Result<Vec<Tensor>> {
        validate::all_reduce(inputs)?;
        if inputs.len() != self.gpus.len() {
            return Err(Error::Shape(format!(
                "all_reduce_sum: {} inputs for {} GPUs",
                inputs.len(),
                self.gpus.len()
            )));
        }
        let ty = match inputs[0].dtype {
            DType::F32 => ncclDataType_t::ncclFloat32,
            DType::F16 => ncclDataType_t::ncclFloat16,
            DType::BF16 => ncclDataType_t::ncclBfloat16,
            other => {
                return Err(Error::DType(format!(
                    "all_reduce_sum: no NCCL type for {other}"
                )))
            }
        };
        let mut outs = Vec::with_capacity(inputs.len());
        for (g, v) in self.gpus.iter().zip(inputs) {
            g.check_view(&format!("all_reduce_sum input on GPU {}", g.ordinal()), v)?;
            outs.push(Tensor::alloc(g, v.dtype, v.shape.clone())?);
        }
        let count = inputs[0].numel();
        if count == 0 {
            return Ok(outs);
        }
        // One group for all ranks (required when one thread drives several GPUs). Each rank runs
        // on its device's legacy default stream (NULL).
        // SAFETY: every pointer was checked to be device memory of its rank's GPU, count elements.
        unsafe {
            self.api.check("ncclGroupStart", (self.api.group_start)())?;
            let mut first_err = Ok(());
            for ((comm, v), o) in self.comms.iter().zip(inputs).zip(&outs) {
                let r = (self.api.all_reduce)(
                    v.ptr as *const c_void,
                    o.ptr() as *mut c_void,
                    count,
                    ty,
                    ncclRedOp_t::ncclSum,
                    *comm,
                    std::ptr::null_mut(),
                );
                if first_err.is_ok() {
                    first_err = self.api.check("ncclAllReduce", r);
                }
            }
            let end = self.api.check("ncclGroupEnd", (self.api.group_end)());
            first_err?;
            end?;
        }
        Ok(outs)
    }
}

impl Drop for Communicator {
    fn drop(&mut self) {
        for g in &self.gpus {
            let _ = g.synchronize();
        }
        for c in &self.comms {
            // SAFETY: each communicator was created by ncclCommInitAll, destroyed once.
            unsafe {
                (self.api.destroy)(*c);
            }
        }
    }
}
