//! Leaving the caller's CUDA context as it was.
//!
//! kiln makes its GPU's context current for each call (cudarc does too, inside), but the thread
//! belongs to the caller: torch and cupy read "the current device" from the current context, so
//! a kiln call on cuda:1 must not leave cuda:1 current for code that expected cuda:0.

use cudarc::driver::{result, sys};

/// Saves the calling thread's current context; restores it when dropped.
pub struct ContextGuard {
    saved: Option<sys::CUcontext>,
}

impl ContextGuard {
    /// Saves the current context (when there is no driver, there is nothing to restore).
    pub fn save() -> ContextGuard {
        // Loading is idempotent and what the call being guarded does anyway.
        if crate::loader::driver().is_err() {
            return ContextGuard { saved: None };
        }
        let current = result::ctx::get_current()
            .ok()
            .map(|c| c.unwrap_or(std::ptr::null_mut()));
        ContextGuard { saved: current }
    }
}

impl Drop for ContextGuard {
    fn drop(&mut self) {
        if let Some(ctx) = self.saved {
            // Nothing to do when the call left it as it was (the common case: the caller's
            // context is the GPU's primary context kiln binds).
            if result::ctx::get_current()
                .ok()
                .map(|c| c.unwrap_or(std::ptr::null_mut()))
                == Some(ctx)
            {
                return;
            }
            // SAFETY: `ctx` was current on this thread when saved (or null: unbind), and the
            // contexts kiln and its callers use are primary contexts that outlive the call.
            let _ = unsafe { result::ctx::set_current(ctx) };
        }
    }
}
