//! One kiln_runtime::Gpu per device ordinal for the life of the process (opening one retains
//! the primary context and loads the fatbin, so it is done once), and the NCCL communicators.

use std::collections::HashMap;
#[cfg(feature = "nccl")]
use std::sync::Arc;
use std::sync::{Mutex, OnceLock};

use pyo3::prelude::*;

use crate::errors::IntoPy;

static GPUS: OnceLock<Mutex<HashMap<usize, kiln_runtime::Gpu>>> = OnceLock::new();

/// The Gpu for `ordinal`, opened on first use. Failures (no driver, no such device) are not
/// cached: the next call tries again and reports the same clear error.
pub fn gpu(py: Python<'_>, ordinal: usize) -> PyResult<kiln_runtime::Gpu> {
    let map = GPUS.get_or_init(|| Mutex::new(HashMap::new()));
    if let Some(g) = map.lock().expect("gpu map").get(&ordinal) {
        return Ok(g.clone());
    }
    let g = crate::device::detach(py, || kiln_runtime::Gpu::new(ordinal)).py_err(py)?;
    Ok(map
        .lock()
        .expect("gpu map")
        .entry(ordinal)
        .or_insert(g)
        .clone())
}

#[cfg(feature = "nccl")]
static COMMS: OnceLock<Mutex<HashMap<Vec<usize>, Arc<kiln_runtime::Communicator>>>> =
    OnceLock::new();

/// The NCCL communicator over exactly these devices (in this order), created once.
#[cfg(feature = "nccl")]
pub fn communicator(
    py: Python<'_>,
    ordinals: &[usize],
) -> PyResult<Arc<kiln_runtime::Communicator>> {
    let map = COMMS.get_or_init(|| Mutex::new(HashMap::new()));
    if let Some(c) = map.lock().expect("comm map").get(ordinals) {
        return Ok(c.clone());
    }
    let gpus = ordinals
        .iter()
        .map(|&o| gpu(py, o))
        .collect::<PyResult<Vec<_>>>()?;
    let comm =
        Arc::new(crate::device::detach(py, || kiln_runtime::Communicator::new(&gpus)).py_err(py)?);
    Ok(map
        .lock()
        .expect("comm map")
        .entry(ordinals.to_vec())
        .or_insert(comm)
        .clone())
}

/// Runs `f` without the GIL, leaving the thread's current CUDA context as the caller had it:
/// torch and cupy take "the current device" from it, and kiln binds its own GPU's context.
pub fn detach<T: Send>(py: Python<'_>, f: impl FnOnce() -> T + Send) -> T {
    py.detach(|| {
        let _restore = kiln_runtime::ContextGuard::save();
        f()
    })
}
