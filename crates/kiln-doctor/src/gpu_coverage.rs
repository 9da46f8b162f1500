//! Which target of the arch matrix a GPU of a given compute capability would run: exact SASS,
//! binary-compatible SASS, PTX JIT, or nothing ("no kernel image is available").

use kiln_pins::{Arch, ArchMatrix, Variant, DRIVER_PTX_ISA};

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

/// Does a cubin for `target` run on a GPU of capability (major, minor)?
fn sass_runs_on(target: Arch, major: u32, minor: u32) -> bool {
    match target.variant {
        // `a` cubins use arch-specific instructions: that capability only.
        Variant::ArchSpecific => target.major == major && target.minor == minor,
        // Plain and family cubins run on the same major with an equal or higher minor.
        Variant::Plain | Variant::Family => target.major == major && target.minor <= minor,
    }
}

/// Can PTX for virtual arch `target` be JIT-compiled for capability (major, minor)?
fn ptx_jits_to(target: Arch, major: u32, minor: u32) -> bool {
    match target.variant {
        Variant::ArchSpecific => target.major == major && target.minor == minor,
        Variant::Family => target.major == major && target.minor <= minor,
        Variant::Plain => (target.major, target.minor) <= (major, minor),
    }
}

pub fn coverage(matrix: &ArchMatrix, major: u32, minor: u32) -> Coverage {
    if let Some(a) = matrix.sass().find(|a| a.major == major && a.minor == minor) {
        return Coverage::ExactSass(a);
    }
    if let Some(a) = matrix
        .sass()
        .filter(|a| sass_runs_on(*a, major, minor))
        .max()
    {
        return Coverage::CompatibleSass(a);
    }
    if let Some(a) = matrix.ptx().filter(|a| ptx_jits_to(*a, major, minor)).max() {
        return Coverage::PtxJit(a);
    }
    Coverage::None
}

/// The PTX ISA that the pinned CUDA release emits ("13.0" -> 9.0), read from the same
/// driver/ISA table kiln-pins keeps, so nothing restates it.
pub fn ptx_isa_of_cuda(cuda_major_minor: &str) -> Option<(u32, u32)> {
    let (ma, mi) = cuda_major_minor.split_once('.')?;
    let release = (ma.parse().ok()?, mi.parse().ok()?);
    DRIVER_PTX_ISA
        .iter()
        .find(|row| row.cuda == release)
        .map(|row| row.ptx_isa)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn matrix(entries: &[&str]) -> ArchMatrix {
        ArchMatrix::parse(entries).unwrap()
    }

    #[test]
    fn h200_is_covered_by_exact_sass() {
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
