//! GPU generations the reach table is computed for: compute capability, example products and
//! the CUDA release that first compiled for it. Data only; the compatibility rule is
//! [`crate::runs_on`].
//!
//! Sources: NVIDIA, "CUDA GPUs — Compute Capability" (developer.nvidia.com/cuda-gpus) for the
//! capability and products of each row; the CUDA Toolkit release notes of the release named
//! in `introduced_in` (docs.nvidia.com/cuda/cuda-toolkit-release-notes) for when nvcc gained
//! the target. CUDA 13.0 renumbered Thor from sm_101 (CUDA 12.8) to sm_110 (checked: the
//! cuRANDDx 0.2.1 and nvCOMPDx 0.1.1 release notes, docs.nvidia.com/cuda/curanddx/release_notes.html:
//! "Thor SM renaming from sm_101 to sm_110 starting from CUDA 13.0; for CUDA 12.9 and older
//! releases Thor stays labeled as sm_101"; cuRANDDx 0.2.0 lists SM100, SM101, SM103, SM120 and
//! SM121 as the Blackwell architectures). Checked against developer.nvidia.com/cuda-gpus (read
//! 2026-12-01 through the docs index): 12.1 GB10 (DGX Spark); 12.0 RTX PRO 6000 Blackwell,
//! GeForce RTX 50xx; 11.0 Jetson T5000/T4000 (Thor); 10.3 GB300, B300; 10.0 GB200, B200; 9.0
//! GH200, H200, H100; 8.9 L4, L40, L40S, RTX 6000 Ada, GeForce RTX 40xx; 8.7 Jetson AGX Orin,
//! Orin NX, Orin Nano; 8.6 A40, A10, RTX A6000, GeForce RTX 30xx.
//!
//! `introduced_in`, checked 2026-12-02: 10.3 and 12.1 from NVIDIA's CUDA Features Archive,
//! CUDA 12.9 section ("adds compiler target support for SM architecture 10.3 (sm_103, sm_103f,
//! sm_103a) and 12.1 (sm_121)"), and its 13.0 section for Thor ("SM101 has been renumbered as
//! SM110"); 10.0 and 12.0 from the Blackwell Compatibility Guide (building for Blackwell
//! "Using CUDA Toolkit 12.8"). 7.5 (10.0), 8.0 (11.0), 8.6 (11.1), 8.7 (11.4), 8.9 and 9.0
//! (11.8) agree with CMake's architecture gates (gitlab.kitware.com/cmake/cmake MR 8031: "Add
//! 8.7 ... for CUDA >= 11.4", "Add Ada(8.9) and Hopper(9.0) ... for CUDA >= 11.8") and with
//! the per-release arch ranges other projects' build scripts gate on (sm_75 the highest before
//! 11.0, sm_80 in 11.0, sm_86 from 11.1): secondary sources, not the release notes themselves.
//! Not checked from here: the 8.0 and 7.5 rows' products.
//!
//! `host`: the CPU a GPU of the row is attached to. Three rows exist only as Arm systems-on-chip
//! or Arm superchips, never as a card for an x86_64 host: 8.7 — NVIDIA Jetson AGX Orin Series
//! Technical Brief (Arm Cortex-A78AE CPU, 12 cores on AGX Orin); 11.0 — NVIDIA Jetson Thor
//! product page and T5000 module data sheet (14-core Arm Neoverse-V3AE); 12.1 — NVIDIA DGX Spark
//! product page and hardware guide (GB10 Grace Blackwell: 20-core Arm, 10 Cortex-X925 + 10
//! Cortex-A725; DGX OS for arm64 only). Read 2026-12-03. Every other row ships as PCIe or SXM
//! parts in x86_64 servers (and several also with Grace, aarch64: GH200, GB200, GB300).

/// One GPU generation (one compute capability).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GpuGeneration {
    /// 9 of 9.0.
    pub major: u32,
    /// 0 of 9.0.
    pub minor: u32,
    /// NVIDIA's architecture name.
    pub architecture: &'static str,
    /// A few products with this capability.
    pub products: &'static str,
    /// The CUDA release whose nvcc first targets it, "major.minor".
    pub introduced_in: (u32, u32),
    /// The CPU architectures its GPUs are attached to (module docs: sources).
    pub host: Host,
}

/// CPU architectures a host binary is built for (ELF `e_machine`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum CpuArch {
    /// EM_X86_64 (62).
    X86_64,
    /// EM_AARCH64 (183).
    Aarch64,
}

impl CpuArch {
    /// The architecture of an ELF `e_machine`, when it is one a CUDA host can be.
    pub fn from_elf_machine(machine: u16) -> Option<CpuArch> {
        match machine {
            62 => Some(CpuArch::X86_64),
            183 => Some(CpuArch::Aarch64),
            _ => None,
        }
    }

    /// "x86_64", "aarch64" (as wheel platform tags spell them).
    pub fn as_str(self) -> &'static str {
        match self {
            CpuArch::X86_64 => "x86_64",
            CpuArch::Aarch64 => "aarch64",
        }
    }
}

/// Which CPUs a generation's GPUs come with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Host {
    /// Cards and modules for x86_64 and aarch64 hosts alike.
    Any,
    /// Only in Arm systems (Jetson, DGX Spark): an x86_64 binary never meets this GPU.
    Aarch64Only,
}

impl Host {
    /// Whether a binary built for `cpu` can be on a host with this GPU.
    pub fn admits(self, cpu: CpuArch) -> bool {
        match self {
            Host::Any => true,
            Host::Aarch64Only => cpu == CpuArch::Aarch64,
        }
    }
}

impl GpuGeneration {
    /// "9.0"
    pub fn capability(&self) -> String {
        format!("{}.{}", self.major, self.minor)
    }
}

/// Ordered by capability. 8.8 is a valid nvcc target in CUDA 13 but NVIDIA lists no product
/// for it, so it has no row.
pub const GPU_GENERATIONS: &[GpuGeneration] = &[
    GpuGeneration {
        major: 7,
        minor: 5,
        architecture: "Turing",
        products: "T4, RTX 20xx, Quadro RTX",
        introduced_in: (10, 0),
        host: Host::Any,
    },
    GpuGeneration {
        major: 8,
        minor: 0,
        architecture: "Ampere",
        products: "A100, A30",
        introduced_in: (11, 0),
        host: Host::Any,
    },
    GpuGeneration {
        major: 8,
        minor: 6,
        architecture: "Ampere",
        products: "A10, A40, RTX 30xx, RTX A6000",
        introduced_in: (11, 1),
        host: Host::Any,
    },
    GpuGeneration {
        major: 8,
        minor: 7,
        architecture: "Ampere",
        products: "Jetson AGX Orin, Orin NX, Orin Nano",
        introduced_in: (11, 4),
        host: Host::Aarch64Only,
    },
    GpuGeneration {
        major: 8,
        minor: 9,
        architecture: "Ada Lovelace",
        products: "L4, L40S, RTX 40xx, RTX 6000 Ada",
        introduced_in: (11, 8),
        host: Host::Any,
    },
    GpuGeneration {
        major: 9,
        minor: 0,
        architecture: "Hopper",
        products: "H100, H200, GH200",
        introduced_in: (11, 8),
        host: Host::Any,
    },
    GpuGeneration {
        major: 10,
        minor: 0,
        architecture: "Blackwell",
        products: "B200, GB200",
        introduced_in: (12, 8),
        host: Host::Any,
    },
    GpuGeneration {
        major: 10,
        minor: 3,
        architecture: "Blackwell Ultra",
        products: "B300, GB300",
        introduced_in: (12, 9),
        host: Host::Any,
    },
    GpuGeneration {
        major: 11,
        minor: 0,
        architecture: "Blackwell",
        products: "Jetson Thor (T5000, T4000)",
        introduced_in: (13, 0),
        host: Host::Aarch64Only,
    },
    GpuGeneration {
        major: 12,
        minor: 0,
        architecture: "Blackwell",
        products: "RTX 50xx, RTX PRO 6000 Blackwell",
        introduced_in: (12, 8),
        host: Host::Any,
    },
    GpuGeneration {
        major: 12,
        minor: 1,
        architecture: "Blackwell",
        products: "DGX Spark (GB10)",
        introduced_in: (12, 9),
        host: Host::Aarch64Only,
    },
];

/// The generation of capability `major.minor`, if it has a row.
pub fn gpu_generation(major: u32, minor: u32) -> Option<&'static GpuGeneration> {
    GPU_GENERATIONS
        .iter()
        .find(|g| g.major == major && g.minor == minor)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generations_are_sorted_known_capabilities() {
        for w in GPU_GENERATIONS.windows(2) {
            assert!((w[0].major, w[0].minor) < (w[1].major, w[1].minor), "{w:?}");
        }
        for g in GPU_GENERATIONS {
            let arch = crate::ArchMatrix::parse(&[g.capability()]);
            assert!(arch.is_ok(), "{} is not a known capability", g.capability());
        }
        assert_eq!(
            gpu_generation(11, 0).unwrap().products,
            "Jetson Thor (T5000, T4000)"
        );
        assert!(gpu_generation(10, 1).is_none(), "sm_101 became sm_110");
        let arm_only: Vec<String> = GPU_GENERATIONS
            .iter()
            .filter(|g| !g.host.admits(CpuArch::X86_64))
            .map(GpuGeneration::capability)
            .collect();
        assert_eq!(arm_only, ["8.7", "11.0", "12.1"]);
        assert!(GPU_GENERATIONS
            .iter()
            .all(|g| g.host.admits(CpuArch::Aarch64)));
        assert_eq!(CpuArch::from_elf_machine(62), Some(CpuArch::X86_64));
        assert_eq!(CpuArch::from_elf_machine(183), Some(CpuArch::Aarch64));
        assert_eq!(CpuArch::from_elf_machine(190), None, "EM_CUDA is no host");
    }
}
