//! Per-GPU library handles (a cuBLAS handle, a cuDNN handle): each is created on first use by
//! the module that owns its type, and dropped before the GPU's context is released. The GPU
//! holds them type-erased, so it depends on no library module.

use std::any::Any;
use std::sync::{Arc, Mutex};

use crate::error::Result;

type Slot = Arc<dyn Any + Send + Sync>;

#[derive(Default)]
pub(crate) struct Handles(Mutex<Vec<Slot>>);

impl Handles {
    /// The handle of type `H`, made by `create` the first time. Each type has its own lock, held
    /// by the caller while it uses the handle.
    pub(crate) fn get_or_create<H: Send + 'static>(
        &self,
        create: impl FnOnce() -> Result<H>,
    ) -> Result<Arc<Mutex<H>>> {
        let mut slots = self.0.lock().unwrap_or_else(|p| p.into_inner());
        for s in slots.iter() {
            if let Ok(h) = Arc::clone(s).downcast::<Mutex<H>>() {
                return Ok(h);
            }
        }
        let h = Arc::new(Mutex::new(create()?));
        slots.push(h.clone());
        Ok(h)
    }

    /// Drops every handle (the GPU calls this while its context is still alive).
    pub(crate) fn clear(&self) {
        self.0.lock().map(|mut s| s.clear()).ok();
    }
}
