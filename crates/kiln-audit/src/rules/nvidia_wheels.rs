//! Where NVIDIA's runtime wheels put their libraries (site-packages relative), so a NEEDED
//! library can be traced to the wheel that must be in Requires-Dist. kiln's own pins
//! (`[workspace.metadata.kiln.runtime]`) are consulted first; this table covers the rest of
//! the ecosystem (third-party wheels). Maintained by hand: add a row when NVIDIA ships a wheel.

pub struct WheelLayout {
    /// Distribution names (normalized) that ship the library; any one satisfies.
    pub wheels: &'static [&'static str],
    pub lib_dir: &'static str,
    /// soname prefixes (before the version), e.g. "libcublas.so." matches libcublas.so.13.
    pub sonames: &'static [&'static str],
    /// The CUDA major the wheel is built for (its name's -cu12/-cu13, or the cu13 directory).
    pub cuda_major: u32,
}

const CU13: &str = "nvidia/cu13/lib";

pub const LAYOUTS: &[WheelLayout] = &[
    WheelLayout {
        wheels: &["nvidia-cuda-runtime", "nvidia-cuda-runtime-cu13"],
        lib_dir: CU13,
        sonames: &["libcudart.so.13"],
        cuda_major: 13,
    },
    WheelLayout {
        wheels: &["nvidia-cublas", "nvidia-cublas-cu13"],
        lib_dir: CU13,
        sonames: &["libcublas.so.13", "libcublasLt.so.13"],
        cuda_major: 13,
    },
    WheelLayout {
        wheels: &["nvidia-cufft", "nvidia-cufft-cu13"],
        lib_dir: CU13,
        sonames: &["libcufft.so.12", "libcufftw.so.12"],
        cuda_major: 13,
    },
    WheelLayout {
        wheels: &["nvidia-curand", "nvidia-curand-cu13"],
        lib_dir: CU13,
        sonames: &["libcurand.so.10"],
        cuda_major: 13,
    },
    WheelLayout {
        wheels: &["nvidia-cusolver", "nvidia-cusolver-cu13"],
        lib_dir: CU13,
        sonames: &["libcusolver.so.12", "libcusolverMg.so.12"],
        cuda_major: 13,
    },
    WheelLayout {
        wheels: &["nvidia-cusparse", "nvidia-cusparse-cu13"],
        lib_dir: CU13,
        sonames: &["libcusparse.so.12"],
        cuda_major: 13,
    },
    WheelLayout {
        wheels: &["nvidia-cuda-nvrtc", "nvidia-cuda-nvrtc-cu13"],
        lib_dir: CU13,
        sonames: &["libnvrtc.so.13", "libnvrtc-builtins.so.13.0"],
        cuda_major: 13,
    },
    WheelLayout {
        wheels: &["nvidia-nvjitlink", "nvidia-nvjitlink-cu13"],
        lib_dir: CU13,
        sonames: &["libnvJitLink.so.13"],
        cuda_major: 13,
    },
    WheelLayout {
        wheels: &["nvidia-cuda-cupti", "nvidia-cuda-cupti-cu13"],
        lib_dir: CU13,
        sonames: &["libcupti.so.13"],
        cuda_major: 13,
    },
    WheelLayout {
        wheels: &["nvidia-cufile", "nvidia-cufile-cu13"],
        lib_dir: CU13,
        sonames: &["libcufile.so.0"],
        cuda_major: 13,
    },
    WheelLayout {
        wheels: &["nvidia-nvjpeg", "nvidia-nvjpeg-cu13"],
        lib_dir: CU13,
        sonames: &["libnvjpeg.so.13"],
        cuda_major: 13,
    },
    WheelLayout {
        wheels: &["nvidia-nvvm"],
        lib_dir: "nvidia/cu13/nvvm/lib64",
        sonames: &["libnvvm.so.4"],
        cuda_major: 13,
    },
    WheelLayout {
        wheels: &["nvidia-cudnn-cu13"],
        lib_dir: "nvidia/cudnn/lib",
        sonames: &[
            "libcudnn.so.9",
            "libcudnn_graph.so.9",
            "libcudnn_ops.so.9",
            "libcudnn_cnn.so.9",
            "libcudnn_adv.so.9",
            "libcudnn_engines_precompiled.so.9",
            "libcudnn_engines_runtime_compiled.so.9",
            "libcudnn_heuristic.so.9",
        ],
        cuda_major: 13,
    },
    WheelLayout {
        wheels: &["nvidia-nccl-cu13"],
        lib_dir: "nvidia/nccl/lib",
        sonames: &["libnccl.so.2"],
        cuda_major: 13,
    },
    WheelLayout {
        wheels: &["nvidia-nvshmem-cu13"],
        lib_dir: "nvidia/nvshmem/lib",
        sonames: &["libnvshmem_host.so.3"],
        cuda_major: 13,
    },
    WheelLayout {
        wheels: &["nvidia-cusparselt-cu13"],
        lib_dir: "nvidia/cusparselt/lib",
        sonames: &["libcusparseLt.so.0"],
        cuda_major: 13,
    },
    WheelLayout {
        wheels: &["nvidia-cutensor-cu13", "cutensor-cu13"],
        lib_dir: "cutensor/lib",
        sonames: &["libcutensor.so.2", "libcutensorMg.so.2"],
        cuda_major: 13,
    },
    // CUDA 12 wheels (one directory per library).
    WheelLayout {
        wheels: &["nvidia-cuda-runtime-cu12"],
        lib_dir: "nvidia/cuda_runtime/lib",
        sonames: &["libcudart.so.12"],
        cuda_major: 12,
    },
    WheelLayout {
        wheels: &["nvidia-cublas-cu12"],
        lib_dir: "nvidia/cublas/lib",
        sonames: &["libcublas.so.12", "libcublasLt.so.12"],
        cuda_major: 12,
    },
    WheelLayout {
        wheels: &["nvidia-cufft-cu12"],
        lib_dir: "nvidia/cufft/lib",
        sonames: &["libcufft.so.11", "libcufftw.so.11"],
        cuda_major: 12,
    },
    WheelLayout {
        wheels: &["nvidia-curand-cu12"],
        lib_dir: "nvidia/curand/lib",
        sonames: &["libcurand.so.10"],
        cuda_major: 12,
    },
    WheelLayout {
        wheels: &["nvidia-cusolver-cu12"],
        lib_dir: "nvidia/cusolver/lib",
        sonames: &["libcusolver.so.11"],
        cuda_major: 12,
    },
    WheelLayout {
        wheels: &["nvidia-cusparse-cu12"],
        lib_dir: "nvidia/cusparse/lib",
        sonames: &["libcusparse.so.12"],
        cuda_major: 12,
    },
    WheelLayout {
        wheels: &["nvidia-cuda-nvrtc-cu12"],
        lib_dir: "nvidia/cuda_nvrtc/lib",
        sonames: &["libnvrtc.so.12"],
        cuda_major: 12,
    },
    WheelLayout {
        wheels: &["nvidia-nvjitlink-cu12"],
        lib_dir: "nvidia/nvjitlink/lib",
        sonames: &["libnvJitLink.so.12"],
        cuda_major: 12,
    },
    WheelLayout {
        wheels: &["nvidia-cuda-cupti-cu12"],
        lib_dir: "nvidia/cuda_cupti/lib",
        sonames: &["libcupti.so.12"],
        cuda_major: 12,
    },
    WheelLayout {
        wheels: &["nvidia-cudnn-cu12"],
        lib_dir: "nvidia/cudnn/lib",
        sonames: &["libcudnn.so.9"],
        cuda_major: 12,
    },
    WheelLayout {
        wheels: &["nvidia-nccl-cu12"],
        lib_dir: "nvidia/nccl/lib",
        sonames: &["libnccl.so.2"],
        cuda_major: 12,
    },
];

/// Layouts whose wheels ship `soname`.
pub fn layouts_for(soname: &str) -> impl Iterator<Item = &'static WheelLayout> + '_ {
    LAYOUTS.iter().filter(move |l| l.sonames.contains(&soname))
}

/// The CUDA major a soname belongs to, when only wheels of one major ship it (libcurand.so.10,
/// libcusparse.so.12, libcudnn.so.9 and libnccl.so.2 exist for both 12 and 13: no evidence).
pub fn cuda_major_of(soname: &str) -> Option<u32> {
    let mut majors = layouts_for(soname).map(|l| l.cuda_major);
    let first = majors.next()?;
    majors.all(|m| m == first).then_some(first)
}

/// The layouts whose library directory is `dir` (site-packages relative); several CUDA 13
/// wheels share `nvidia/cu13/lib`.
pub fn layouts_at(dir: &str) -> impl Iterator<Item = &'static WheelLayout> + '_ {
    LAYOUTS.iter().filter(move |l| l.lib_dir == dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn majors_only_where_the_soname_tells() {
        assert_eq!(cuda_major_of("libcudart.so.12"), Some(12));
        assert_eq!(cuda_major_of("libcublas.so.13"), Some(13));
        assert_eq!(cuda_major_of("libcufft.so.11"), Some(12));
        assert_eq!(cuda_major_of("libcurand.so.10"), None);
        assert_eq!(cuda_major_of("libcudnn.so.9"), None);
        assert_eq!(cuda_major_of("libz.so.1"), None);
    }
}
