//! Readable kernel names: Rust (legacy `_ZN…17h<hash>E` and v0 `_R…`) and Itanium C++ (what
//! nvcc writes) symbols demangled, at a bounded cost whatever the name: a C++ name of a few
//! hundred bytes can demangle to gigabytes through back-references, so the output is cut at
//! [`MAX_OUTPUT`] bytes and such a name is kept raw.

/// Names longer than this are not demangled (real kernel names are a few KiB at most).
pub const MAX_INPUT: usize = 4096;
/// Demangled text longer than this is abandoned.
pub const MAX_OUTPUT: usize = 16 << 10;

/// Names whose demangling each worker thread remembers; past it the memory starts over.
const CACHE_LIMIT: usize = 16 << 10;

/// [`demangle`], remembered per thread: a library repeats each kernel in every target's
/// entry (cuDNN 9.22: 19,861 kernel names over 4,867 cubins), and demangling was 7% of its audit.
pub fn demangle_cached(name: &str) -> Option<String> {
    thread_local! {
        static SEEN: std::cell::RefCell<std::collections::HashMap<Box<str>, Option<Box<str>>>> =
            std::cell::RefCell::new(std::collections::HashMap::new());
    }
    SEEN.with_borrow_mut(|seen| {
        if let Some(d) = seen.get(name) {
            return d.as_deref().map(str::to_string);
        }
        let d = demangle(name);
        if seen.len() >= CACHE_LIMIT {
            seen.clear();
        }
        seen.insert(name.into(), d.as_deref().map(Box::from));
        d
    })
}

/// The demangled name, or None when `name` is not a mangled name (e.g. `extern "C"` kernels)
/// or would not demangle within the bounds.
pub fn demangle(name: &str) -> Option<String> {
    if name.len() > MAX_INPUT {
        return None;
    }
    if let Ok(d) = rustc_demangle::try_demangle(name) {
        // `{:#}` leaves out the legacy hash; the size limit guards the v0 grammar's recursion.
        let mut out = Bounded(String::new());
        return std::fmt::write(&mut out, format_args!("{d:#}"))
            .ok()
            .map(|()| out.0);
    }
    if !name.starts_with("_Z") {
        return None;
    }
    let symbol = cpp_demangle::Symbol::new(name).ok()?;
    let mut out = Bounded(String::new());
    symbol
        .structured_demangle(&mut out, &cpp_demangle::DemangleOptions::default())
        .ok()?;
    Some(out.0)
}

/// A `fmt::Write` that fails past [`MAX_OUTPUT`] bytes.
struct Bounded(String);

impl std::fmt::Write for Bounded {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        if self.0.len() + s.len() > MAX_OUTPUT {
            return Err(std::fmt::Error);
        }
        self.0.push_str(s);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::demangle;

    #[test]
    fn cpp_rust_and_plain_names() {
        // nvcc's mangling of `template<class T> __global__ void vecadd(T*, const T*, int)`.
        assert_eq!(
            demangle("_Z6vecaddIfEvPT_PKS0_i").as_deref(),
            Some("void vecadd<float>(float*, float const*, int)")
        );
        assert_eq!(
            demangle("_ZN4core3ptr13drop_in_place17h0123456789abcdefE").as_deref(),
            Some("core::ptr::drop_in_place")
        );
        assert_eq!(demangle("vecadd_f32"), None);
        assert_eq!(demangle("_Z"), None);
        // Remembered answers are the same answers, the second time too.
        for _ in 0..2 {
            for name in ["_Z6vecaddIfEvPT_PKS0_i", "vecadd_f32", "_Z"] {
                assert_eq!(super::demangle_cached(name), demangle(name), "{name}");
            }
        }
    }

    #[test]
    fn a_back_reference_bomb_is_cut_not_expanded() {
        // Each template argument repeats the whole previous list: output doubles per level.
        let mut name = String::from("_Z1fI");
        for _ in 0..40 {
            name += "S_";
        }
        name += "EvT_";
        let started = std::time::Instant::now();
        let d = demangle(&name);
        assert!(
            d.as_ref().is_none_or(|d| d.len() <= super::MAX_OUTPUT),
            "{d:?}"
        );
        // The same shape a few levels deep demangles: the bound, not the grammar, stops it.
        assert!(demangle("_Z1fIiS_EvT_T0_").is_some());
        assert!(started.elapsed().as_secs() < 2);
    }
}
