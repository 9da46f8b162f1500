//! Which PTX ISA each driver branch can JIT, and which PTX ISA each CUDA release emits.

/// Highest PTX ISA a driver branch can JIT. PTX ISA x.y ships with CUDA toolkit release
/// (x-4).y for ISA 9.x+ (ISA 9.0 = CUDA 13.0); a driver JITs PTX up to the ISA of the CUDA
/// release it belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DriverPtxIsa {
    /// Lowest driver major version of the branch (Linux numbering).
    pub driver: u32,
    /// CUDA release that introduced the branch, "major.minor".
    pub cuda: (u32, u32),
    /// Highest PTX ISA version that branch JITs.
    pub ptx_isa: (u32, u32),
}

/// Ordered by driver branch. Source: the CUDA toolkit release notes' driver table and the PTX
/// ISA "release history" table.
pub const DRIVER_PTX_ISA: &[DriverPtxIsa] = &[
    DriverPtxIsa {
        driver: 525,
        cuda: (12, 0),
        ptx_isa: (8, 0),
    },
    DriverPtxIsa {
        driver: 530,
        cuda: (12, 1),
        ptx_isa: (8, 1),
    },
    DriverPtxIsa {
        driver: 535,
        cuda: (12, 2),
        ptx_isa: (8, 2),
    },
    DriverPtxIsa {
        driver: 545,
        cuda: (12, 3),
        ptx_isa: (8, 3),
    },
    DriverPtxIsa {
        driver: 550,
        cuda: (12, 4),
        ptx_isa: (8, 4),
    },
    DriverPtxIsa {
        driver: 555,
        cuda: (12, 5),
        ptx_isa: (8, 5),
    },
    DriverPtxIsa {
        driver: 560,
        cuda: (12, 6),
        ptx_isa: (8, 5),
    },
    DriverPtxIsa {
        driver: 565,
        cuda: (12, 7),
        ptx_isa: (8, 6),
    },
    DriverPtxIsa {
        driver: 570,
        cuda: (12, 8),
        ptx_isa: (8, 7),
    },
    DriverPtxIsa {
        driver: 575,
        cuda: (12, 9),
        ptx_isa: (8, 8),
    },
    DriverPtxIsa {
        driver: 580,
        cuda: (13, 0),
        ptx_isa: (9, 0),
    },
    DriverPtxIsa {
        driver: 590,
        cuda: (13, 1),
        ptx_isa: (9, 1),
    },
];

/// The PTX ISA ceiling for a driver of major version `driver`, or None when it predates the
/// table (too old for anything kiln builds).
pub fn max_ptx_isa_for_driver(driver: u32) -> Option<DriverPtxIsa> {
    DRIVER_PTX_ISA
        .iter()
        .rev()
        .find(|row| row.driver <= driver)
        .copied()
}

/// The oldest driver branch whose ceiling admits PTX ISA `isa`, or None when no branch in the
/// table JITs it. The table starts at 525: an answer of 525 means "525 or older".
pub fn oldest_driver_for_ptx_isa(isa: (u32, u32)) -> Option<DriverPtxIsa> {
    DRIVER_PTX_ISA
        .iter()
        .find(|row| row.ptx_isa >= isa)
        .copied()
}

/// The PTX ISA that CUDA release "major.minor" emits ("13.0" -> 9.0), from the same table.
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

    #[test]
    fn oldest_driver_for_an_isa_is_the_first_branch_that_admits_it() {
        assert_eq!(oldest_driver_for_ptx_isa((9, 0)).unwrap().driver, 580);
        assert_eq!(oldest_driver_for_ptx_isa((8, 5)).unwrap().driver, 555);
        assert_eq!(oldest_driver_for_ptx_isa((7, 0)).unwrap().driver, 525);
        assert!(oldest_driver_for_ptx_isa((9, 5)).is_none());
    }

    #[test]
    fn driver_580_jits_isa_9_0_but_not_newer() {
        assert_eq!(max_ptx_isa_for_driver(580).unwrap().ptx_isa, (9, 0));
        assert_eq!(max_ptx_isa_for_driver(585).unwrap().ptx_isa, (9, 0));
        assert_eq!(max_ptx_isa_for_driver(570).unwrap().ptx_isa, (8, 7));
        assert!(max_ptx_isa_for_driver(470).is_none());
    }

    #[test]
    fn isa_of_a_cuda_release() {
        assert_eq!(ptx_isa_of_cuda("13.0"), Some((9, 0)));
        assert_eq!(ptx_isa_of_cuda("12.8"), Some((8, 7)));
        assert_eq!(ptx_isa_of_cuda("99.0"), None);
    }
}
