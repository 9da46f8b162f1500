//! The DLPack C ABI (dlpack.h v1.x: DLTensor, DLManagedTensor, DLManagedTensorVersioned) and
//! the two directions kiln needs: reading a producer's capsule (torch, cupy, jax, numpy, ...)
//! and handing out a capsule that owns one of kiln's device tensors.
//!
//! The structs are the published, stable ABI; no crate for them supports pyo3 0.30 yet.

use std::ffi::{c_void, CStr};

use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::PyDict;

pub const CAPSULE: &CStr = c"dltensor";
pub const CAPSULE_VERSIONED: &CStr = c"dltensor_versioned";
const USED: &CStr = c"used_dltensor";
const USED_VERSIONED: &CStr = c"used_dltensor_versioned";

/// The DLPack version kiln produces (DLManagedTensorVersioned).
pub const VERSION: (u32, u32) = (1, 1);

/// DLDeviceType values kiln deals with.
pub const KDL_CPU: i32 = 1;
pub const KDL_CUDA: i32 = 2;
pub const KDL_CUDA_HOST: i32 = 3;
pub const KDL_CUDA_MANAGED: i32 = 13;

/// DLDataTypeCode values.
pub const KDL_INT: u8 = 0;
pub const KDL_UINT: u8 = 1;
pub const KDL_FLOAT: u8 = 2;
pub const KDL_BFLOAT: u8 = 4;

/// `__dlpack__(stream=...)` values with a fixed meaning for CUDA (array API standard; 2, the
/// per-thread default stream, is just another stream to kiln).
pub const STREAM_LEGACY_DEFAULT: i64 = 1;
pub const STREAM_NO_SYNC: i64 = -1;

#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DLDevice {
    pub device_type: i32,
    pub device_id: i32,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DLDataType {
    pub code: u8,
    pub bits: u8,
    pub lanes: u16,
}

#[repr(C)]
pub struct DLTensor {
    pub data: *mut c_void,
    pub device: DLDevice,
    pub ndim: i32,
    pub dtype: DLDataType,
    pub shape: *mut i64,
    pub strides: *mut i64,
    pub byte_offset: u64,
}

#[repr(C)]
pub struct DLManagedTensor {
    pub dl_tensor: DLTensor,
    pub manager_ctx: *mut c_void,
    pub deleter: Option<unsafe extern "C" fn(*mut DLManagedTensor)>,
}

#[repr(C)]
pub struct DLPackVersion {
    pub major: u32,
    pub minor: u32,
}

#[repr(C)]
pub struct DLManagedTensorVersioned {
    pub version: DLPackVersion,
    pub manager_ctx: *mut c_void,
    pub deleter: Option<unsafe extern "C" fn(*mut DLManagedTensorVersioned)>,
    pub flags: u64,
    pub dl_tensor: DLTensor,
}

/// An element type as DLPack spells it, in the subset kiln computes on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Elem {
    F32,
    F16,
    BF16,
    I32,
    I64,
}

impl Elem {
    pub fn from_dl(t: DLDataType) -> Option<Elem> {
        if t.lanes != 1 {
            return None;
        }
        Some(match (t.code, t.bits) {
            (KDL_FLOAT, 32) => Elem::F32,
            (KDL_FLOAT, 16) => Elem::F16,
            (KDL_BFLOAT, 16) => Elem::BF16,
            (KDL_INT, 32) => Elem::I32,
            (KDL_INT, 64) => Elem::I64,
            _ => return None,
        })
    }

    pub fn to_dl(self) -> DLDataType {
        let (code, bits) = match self {
            Elem::F32 => (KDL_FLOAT, 32),
            Elem::F16 => (KDL_FLOAT, 16),
            Elem::BF16 => (KDL_BFLOAT, 16),
            Elem::I32 => (KDL_INT, 32),
            Elem::I64 => (KDL_INT, 64),
        };
        DLDataType {
            code,
            bits,
            lanes: 1,
        }
    }

    pub fn size(self) -> usize {
        match self {
            Elem::F32 | Elem::I32 => 4,
            Elem::F16 | Elem::BF16 => 2,
            Elem::I64 => 8,
        }
    }
}

fn describe_dtype(t: DLDataType) -> String {
    let kind = match t.code {
        KDL_INT => "int",
        KDL_UINT => "uint",
        KDL_FLOAT => "float",
        KDL_BFLOAT => "bfloat",
        3 => "opaque handle",
        5 => "complex",
        6 => "bool",
        _ => "unknown type code",
    };
    if t.lanes == 1 {
        format!("{kind}{}", t.bits)
    } else {
        format!("{kind}{}x{}", t.bits, t.lanes)
    }
}

/// Where an imported array lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Place {
    /// Device memory of CUDA device `ordinal`: used in place.
    Cuda(i32),
    /// Host memory: copied to the device.
    Host,
}

/// A producer's array, read through its capsule. The capsule (and the producer object) stay
/// referenced for as long as this lives, so `data` stays valid.
pub struct Imported<'py> {
    pub place: Place,
    pub elem: Elem,
    pub shape: Vec<usize>,
    /// Address of the first element (data + byte_offset).
    pub data: u64,
    _capsule: Bound<'py, PyAny>,
    _source: Bound<'py, PyAny>,
}

impl Imported<'_> {
    pub fn numel(&self) -> usize {
        self.shape.iter().product()
    }
    pub fn nbytes(&self) -> usize {
        self.numel() * self.elem.size()
    }
    /// The host bytes of a `Place::Host` array.
    pub fn host_bytes(&self) -> &[u8] {
        debug_assert_eq!(self.place, Place::Host);
        if self.nbytes() == 0 {
            return &[];
        }
        // SAFETY: the producer guarantees `nbytes` readable, contiguous (checked) bytes at
        // `data` while its capsule is alive, and we hold the capsule.
        unsafe { std::slice::from_raw_parts(self.data as *const u8, self.nbytes()) }
    }
}

/// Reads `obj` (argument `what` of a kiln function) through the DLPack protocol, asking a CUDA
/// producer to order its pending work before `stream` (the `__dlpack__(stream=...)` value of
/// the stream kiln will launch on: 1 for the legacy default stream).
///
/// `stream` names a stream *on the array's own device*; arrays on any visible device are
/// accepted, whatever the caller's current device is (see `with_producer_device`).
pub fn import<'py>(obj: &Bound<'py, PyAny>, what: &str, stream: i64) -> PyResult<Imported<'py>> {
    let py = obj.py();
    if !obj.hasattr("__dlpack__")? || !obj.hasattr("__dlpack_device__")? {
        return Err(crate::errors::type_error(format!(
            "{what}: expected an array that supports DLPack (torch, cupy, jax, numpy, kiln.Array), got {}",
            obj.get_type().name()?
        )));
    }
    let (dev_type, dev_id): (i32, i32) = obj.call_method0("__dlpack_device__")?.extract()?;
    place_of(dev_type, dev_id, what)?;
    let kwargs = PyDict::new(py);
    let capsule = if dev_type == KDL_CUDA {
        kwargs.set_item("stream", stream)?;
        with_producer_device(obj, dev_id, || {
            obj.call_method("__dlpack__", (), Some(&kwargs))
        })?
    } else {
        obj.call_method("__dlpack__", (), Some(&kwargs))?
    };
    read_capsule(capsule, obj, what)
}

/// The CUDA device of a DLPack producer's array (None: host memory), from
/// `__dlpack_device__`; a TypeError for objects without the protocol.
pub fn cuda_device_of(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<Option<i32>> {
    if !obj.hasattr("__dlpack__")? || !obj.hasattr("__dlpack_device__")? {
        return Err(crate::errors::type_error(format!(
            "{what}: expected an array that supports DLPack (torch, cupy, jax, numpy, kiln.Array), got {}",
            obj.get_type().name()?
        )));
    }
    let (dev_type, dev_id): (i32, i32) = obj.call_method0("__dlpack_device__")?.extract()?;
    Ok(match place_of(dev_type, dev_id, what)? {
        Place::Cuda(d) => Some(d),
        Place::Host => None,
    })
}

/// Where a DLPack device puts an array (CUDA device memory in place, host memory copied).
fn place_of(dev_type: i32, dev_id: i32, what: &str) -> PyResult<Place> {
    match dev_type {
        KDL_CUDA => Ok(Place::Cuda(dev_id)),
        // Pinned and managed memory are host-addressable: copy like any host array.
        KDL_CPU | KDL_CUDA_HOST | KDL_CUDA_MANAGED => Ok(Place::Host),
        other => Err(crate::errors::value_error(format!(
            "{what}: DLPack device type {other} is neither a CUDA device (2) nor host memory"
        ))),
    }
}

/// Reads an unused DLPack capsule (legacy or versioned) that `source` produced.
pub fn read_capsule<'py>(
    capsule: Bound<'py, PyAny>,
    source: &Bound<'py, PyAny>,
    what: &str,
) -> PyResult<Imported<'py>> {
    // SAFETY: the capsule is a live object; we only read through the pointer while holding it.
    let tensor: &DLTensor = unsafe {
        let raw = capsule.as_ptr();
        if ffi::PyCapsule_IsValid(raw, CAPSULE.as_ptr()) == 1 {
            let m = ffi::PyCapsule_GetPointer(raw, CAPSULE.as_ptr()) as *const DLManagedTensor;
            &(*m).dl_tensor
        } else if ffi::PyCapsule_IsValid(raw, CAPSULE_VERSIONED.as_ptr()) == 1 {
            let m = ffi::PyCapsule_GetPointer(raw, CAPSULE_VERSIONED.as_ptr())
                as *const DLManagedTensorVersioned;
            &(*m).dl_tensor
        } else {
            return Err(crate::errors::type_error(format!(
                "{what}: __dlpack__() returned something that is not an unused DLPack capsule"
            )));
        }
    };
    let place = place_of(tensor.device.device_type, tensor.device.device_id, what)?;
    let elem = Elem::from_dl(tensor.dtype).ok_or_else(|| {
        crate::errors::dtype_error(format!(
            "{what}: dtype {} is not supported (kiln takes float32, float16, bfloat16, int32, int64)",
            describe_dtype(tensor.dtype)
        ))
    })?;
    if tensor.ndim < 0 {
        return Err(crate::errors::value_error(format!(
            "{what}: negative ndim {}",
            tensor.ndim
        )));
    }
    let ndim = tensor.ndim as usize;
    // SAFETY: DLPack guarantees `ndim` entries behind `shape` (and `strides`, when not null).
    let dims: &[i64] = if ndim == 0 {
        &[]
    } else {
        unsafe { std::slice::from_raw_parts(tensor.shape, ndim) }
    };
    if let Some(d) = dims.iter().find(|d| **d < 0) {
        return Err(crate::errors::value_error(format!(
            "{what}: negative dimension {d} in shape {dims:?}"
        )));
    }
    let shape: Vec<usize> = dims.iter().map(|&d| d as usize).collect();
    if !tensor.strides.is_null() && ndim > 0 {
        let strides = unsafe { std::slice::from_raw_parts(tensor.strides, ndim) };
        if !is_row_major_compact(dims, strides) {
            return Err(crate::errors::layout_error(format!(
                "{what}: kiln needs a contiguous row-major array; got shape {dims:?} with strides {strides:?} \
                 (call .contiguous() / numpy.ascontiguousarray first)"
            )));
        }
    }
    let data = (tensor.data as u64)
        .checked_add(tensor.byte_offset)
        .ok_or_else(|| {
            crate::errors::value_error(format!("{what}: data pointer + byte_offset overflows"))
        })?;
    Ok(Imported {
        place,
        elem,
        shape,
        data,
        _capsule: capsule,
        _source: source.clone(),
    })
}

/// Runs `f` (the `__dlpack__` call) with the producer's notion of "current CUDA device" set to
/// `device`, the array's own device, and restores it afterwards, whatever `f` returns.
///
/// Why: DLPack (array API standard, `__dlpack__`) says a CUDA `stream` argument names a stream
/// *on the array's device*; kiln passes `stream=1`, the legacy default stream, meaning the
/// legacy default stream of the device holding the array (kiln launches there). Producers
/// resolve the integer against their current device, and torch refuses the export outright
/// when the tensor is on another device ("Can't export tensors on a different CUDA device
/// index"). Passing `stream=None` or -1 instead would not help (torch checks the device before
/// the stream) and would drop the ordering guarantee. So the consumer makes the array's device
/// current for the call, as the producer expects:
/// - torch (`type(obj).__module__` under `torch`): `with torch.cuda.device(device)`;
/// - cupy: `with cupy.cuda.Device(device)`;
/// - anything else: called as is (producers without a current-device notion, e.g. jax,
///   resolve the stream against the array's device themselves).
///
/// Only modules the producer already imported are used (looked up in `sys.modules`).
fn with_producer_device<'py, F>(
    obj: &Bound<'py, PyAny>,
    device: i32,
    f: F,
) -> PyResult<Bound<'py, PyAny>>
where
    F: FnOnce() -> PyResult<Bound<'py, PyAny>>,
{
    let py = obj.py();
    let module: String = obj
        .get_type()
        .getattr("__module__")
        .and_then(|m| m.extract())
        .unwrap_or_default();
    let root = module.split('.').next().unwrap_or("");
    let modules = py.import("sys")?.getattr("modules")?;
    let scope = match root {
        "torch" => match modules.get_item("torch") {
            Ok(torch) => Some(torch.getattr("cuda")?.getattr("device")?.call1((device,))?),
            Err(_) => None,
        },
        "cupy" => match modules.get_item("cupy") {
            Ok(cupy) => Some(cupy.getattr("cuda")?.getattr("Device")?.call1((device,))?),
            Err(_) => None,
        },
        _ => None,
    };
    let Some(scope) = scope else { return f() };
    scope.call_method0("__enter__")?;
    let result = f();
    let none = py.None();
    let exited = scope.call_method1("__exit__", (&none, &none, &none));
    let value = result?;
    exited?;
    Ok(value)
}

/// Row-major compact, in elements; dimensions of extent 1 may carry any stride (torch does).
pub fn is_row_major_compact(shape: &[i64], strides: &[i64]) -> bool {
    if shape.contains(&0) {
        return true;
    }
    let mut expected = 1i64;
    for (&n, &s) in shape.iter().zip(strides).rev() {
        if n != 1 && s != expected {
            return false;
        }
        expected = expected.saturating_mul(n);
    }
    true
}

/// What a kiln-produced capsule owns: the tensor (any Send owner of device memory) and the
/// shape array DLTensor points into.
struct Owner<T> {
    _tensor: T,
    shape: Vec<i64>,
}

/// A device buffer handed to DLPack consumers.
pub struct Export<T> {
    pub owner: T,
    pub data: u64,
    pub device_id: i32,
    pub elem: Elem,
    pub shape: Vec<usize>,
}

/// Builds the capsule for `export`: versioned (`dltensor_versioned`) when the consumer accepts
/// DLPack ≥ 1.0 through `max_version`, the legacy `dltensor` otherwise.
pub fn export<T: Send + 'static>(
    py: Python<'_>,
    export: Export<T>,
    versioned: bool,
) -> PyResult<Py<PyAny>> {
    let mut owner = Box::new(Owner {
        _tensor: export.owner,
        shape: export.shape.iter().map(|&d| d as i64).collect(),
    });
    let dl_tensor = DLTensor {
        data: export.data as *mut c_void,
        device: DLDevice {
            device_type: KDL_CUDA,
            device_id: export.device_id,
        },
        ndim: owner.shape.len() as i32,
        dtype: export.elem.to_dl(),
        shape: owner.shape.as_mut_ptr(),
        // NULL strides: compact row-major (valid since DLPack 1.0 and what every consumer reads).
        strides: std::ptr::null_mut(),
        byte_offset: 0,
    };
    let ctx = Box::into_raw(owner) as *mut c_void;
    // SAFETY: the pointers are fresh Boxes; the capsule destructor or the consumer calls the
    // matching deleter exactly once, which frees both.
    unsafe {
        let (ptr, name, destructor): (*mut c_void, &CStr, ffi::PyCapsule_Destructor) = if versioned
        {
            let m = Box::new(DLManagedTensorVersioned {
                version: DLPackVersion {
                    major: VERSION.0,
                    minor: VERSION.1,
                },
                manager_ctx: ctx,
                deleter: Some(delete_versioned::<T>),
                // Writable, not a copy: kiln's result is the consumer's to use.
                flags: 0,
                dl_tensor,
            });
            (
                Box::into_raw(m) as *mut c_void,
                CAPSULE_VERSIONED,
                capsule_destructor_versioned,
            )
        } else {
            let m = Box::new(DLManagedTensor {
                dl_tensor,
                manager_ctx: ctx,
                deleter: Some(delete_legacy::<T>),
            });
            (
                Box::into_raw(m) as *mut c_void,
                CAPSULE,
                capsule_destructor_legacy,
            )
        };
        let capsule = ffi::PyCapsule_New(ptr, name.as_ptr(), Some(destructor));
        if capsule.is_null() {
            // The capsule was not created: nobody else will free what we built.
            if versioned {
                delete_versioned::<T>(ptr as *mut DLManagedTensorVersioned);
            } else {
                delete_legacy::<T>(ptr as *mut DLManagedTensor);
            }
            return Err(PyErr::fetch(py));
        }
        Ok(Bound::from_owned_ptr(py, capsule).unbind())
    }
}

unsafe extern "C" fn delete_legacy<T>(m: *mut DLManagedTensor) {
    if m.is_null() {
        return;
    }
    let m = Box::from_raw(m);
    drop(Box::from_raw(m.manager_ctx as *mut Owner<T>));
}

unsafe extern "C" fn delete_versioned<T>(m: *mut DLManagedTensorVersioned) {
    if m.is_null() {
        return;
    }
    let m = Box::from_raw(m);
    drop(Box::from_raw(m.manager_ctx as *mut Owner<T>));
}

/// A capsule that was never consumed (still named `dltensor`) frees its tensor; a consumed one
/// was renamed `used_dltensor` and the consumer owns the deleter call.
unsafe extern "C" fn capsule_destructor_legacy(capsule: *mut ffi::PyObject) {
    if ffi::PyCapsule_IsValid(capsule, USED.as_ptr()) == 1 {
        return;
    }
    let m = ffi::PyCapsule_GetPointer(capsule, CAPSULE.as_ptr()) as *mut DLManagedTensor;
    if m.is_null() {
        ffi::PyErr_Clear();
        return;
    }
    if let Some(del) = (*m).deleter {
        del(m);
    }
}

unsafe extern "C" fn capsule_destructor_versioned(capsule: *mut ffi::PyObject) {
    if ffi::PyCapsule_IsValid(capsule, USED_VERSIONED.as_ptr()) == 1 {
        return;
    }
    let m = ffi::PyCapsule_GetPointer(capsule, CAPSULE_VERSIONED.as_ptr())
        as *mut DLManagedTensorVersioned;
    if m.is_null() {
        ffi::PyErr_Clear();
        return;
    }
    if let Some(del) = (*m).deleter {
        del(m);
    }
}

/// Checks the `dl_device` argument of `__dlpack__`: kiln arrays live on `(kDLCUDA, id)` only.
pub fn check_requested_device(dl_device: Option<(i32, i32)>, device_id: i32) -> PyResult<()> {
    match dl_device {
        None => Ok(()),
        Some((KDL_CUDA, id)) if id == device_id => Ok(()),
        Some(other) => Err(crate::errors::export_error(format!(
            "kiln.Array lives on (kDLCUDA, {device_id}); exporting to device {other:?} needs a copy: \
             use .numpy() for host memory"
        ))),
    }
}
