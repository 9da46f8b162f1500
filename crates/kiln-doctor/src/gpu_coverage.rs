//! Which target of the arch matrix a GPU of a given compute capability would run: exact SASS,
//! binary-compatible SASS, PTX JIT, or nothing ("no kernel image is available"). The rule is
//! kiln-arch's [`runs_on`], the same one the audit's reach table asks.

use kiln_pins::{runs_on, Arch, ArchMatrix, Runs, Target};

/// The PTX ISA a CUDA release emits: kiln-arch's driver table (re-exported for the doctor's
/// callers).
pub use kiln_pins::ptx_isa_of_cuda;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Coverage {
    /// A cubin built for exactly this capability.
    ExactSass(Arch),
    /// A cubin of the same major and a lower minor (binary compatible).
    CompatibleSass(Arch),
    /// Only PTX for an older virtual arch, compiled by the driver's JIT at load time.
    PtxJit(Arch),
    None,
}

/// The best target of `matrix` for a GPU of capability `major.minor`: exact SASS (the first
/// in matrix order), else the newest SASS that runs there (plain or family), else the newest
/// PTX that JITs there.
pub fn coverage(matrix: &ArchMatrix, major: u32, minor: u32) -> Coverage {
    let sass = |a: &Arch| runs_on(Target::sass(*a), major, minor);
    if let Some(a) = matrix.sass().find(|a| sass(a) == Some(Runs::Exact)) {
        return Coverage::ExactSass(a);
    }
    if let Some(a) = matrix.sass().filter(|a| sass(a).is_some()).max() {
        return Coverage::CompatibleSass(a);
    }
    let jits = |a: &Arch| runs_on(Target::ptx(*a), major, minor).is_some();
    if let Some(a) = matrix.ptx().filter(jits).max() {
        return Coverage::PtxJit(a);
    }
    Coverage::None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn matrix(entries: &[&str]) -> ArchMatrix {
        ArchMatrix::parse(entries).unwrap()
    }

    #[test]
    fn h200_is_covered_by_exact_sass() {
        // A fixture with the shape of kiln's matrix (the live one is Cargo.toml's).
        let m = matrix(&["8.0", "8.6", "8.9", "9.0", "10.0", "12.0+PTX"]);
        assert_eq!(
            coverage(&m, 9, 0),
            Coverage::ExactSass(Arch::parse_any("sm_90").unwrap())
        );
    }

    #[test]
    fn compatible_sass_and_ptx_jit_and_none() {
        let m = matrix(&["8.0", "9.0a", "12.0+PTX"]);
        // sm_80 cubins run on 8.6 and 8.9.
        assert_eq!(
            coverage(&m, 8, 9),
            Coverage::CompatibleSass(Arch::parse_any("sm_80").unwrap())
        );
        // 9.0a is exact on 9.0 ...
        assert_eq!(
            coverage(&m, 9, 0),
            Coverage::ExactSass(Arch::parse_any("sm_90a").unwrap())
        );
        // ... compute_120 PTX does not JIT down to sm_100, and nothing else runs there.
        assert_eq!(coverage(&m, 10, 0), Coverage::None);
        // A future 12.1 part: sm_120 SASS is binary compatible.
        assert_eq!(
            coverage(&m, 12, 1),
            Coverage::CompatibleSass(Arch::parse_any("sm_120").unwrap())
        );
        // Turing is older than everything.
        assert_eq!(coverage(&m, 7, 5), Coverage::None);
        let ptx_only = matrix(&["8.0+PTX"]);
        assert_eq!(
            coverage(&ptx_only, 9, 0),
            Coverage::PtxJit(Arch::parse_any("8.0").unwrap())
        );
    }

    #[test]
    fn isa_of_the_pinned_release() {
        assert_eq!(ptx_isa_of_cuda("13.0"), Some((9, 0)));
        assert_eq!(ptx_isa_of_cuda("12.8"), Some((8, 7)));
        assert_eq!(ptx_isa_of_cuda("99.0"), None);
    }
}
