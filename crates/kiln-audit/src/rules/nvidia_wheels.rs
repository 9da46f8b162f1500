//! Where NVIDIA's runtime wheels put their libraries (site-packages relative), so a NEEDED or
//! dlopen'd library can be traced to the wheel that ships *that soname*. kiln's own pins
//! (`[workspace.metadata.kiln.runtime]`) are consulted first; this table covers the rest of
//! the ecosystem (third-party wheels). A directory input reads the installed RECORDs instead
//! (linkage.rs), so there the wheel named is the one that really installed the file.
//!
//! The CUDA 13 rows are derived from the RECORD files of the real wheels, one row per wheel,
//! every `*.so*` it installs under `nvidia/cu13/lib` (a directory all of them share, so only
//! the soname tells whose library it is): the component wheels `cuda-toolkit==13.0.2` pins
//! (its METADATA), fetched with `pip download --no-deps` on 2026-12-03 and read with
//! `zipfile` (nvidia-cuda-runtime, nvvm from the toolchain's installed RECORDs). Note that
//! nvidia-nvvm 13.0.88 installs `libnvvm.so.4` in `nvidia/cu13/lib`, not under `nvvm/lib64`.
//! Wheels that ship no library there (headers, static archives: cccl, crt, nvcc,
//! nvptxcompiler, culibos, profiler-api, nvml-dev) have no row. The rows for cuDNN, NCCL,
//! NVSHMEM, cuSPARSELt, cuTENSOR and the CUDA 12 wheels (one directory per wheel) are kept by
//! hand.

pub struct WheelLayout {
    /// Distribution names (normalized) that ship the library; any one satisfies.
    pub wheels: &'static [&'static str],
    pub lib_dir: &'static str,
    /// The sonames (file names) the wheel installs in `lib_dir`.
    pub sonames: &'static [&'static str],
    /// The CUDA major the wheel is built for (its name's -cu12/-cu13, or the cu13 directory).
    pub cuda_major: u32,
}

/// The library directory every CUDA 13 component wheel shares.
const CU13: &str = "nvidia/cu13/lib";

pub const LAYOUTS: &[WheelLayout] = &[
    WheelLayout {
        // nvidia-cublas 13.1.0.3
        wheels: &["nvidia-cublas", "nvidia-cublas-cu13"],
        lib_dir: CU13,
        sonames: &["libcublas.so.13", "libcublasLt.so.13", "libnvblas.so.13"],
        cuda_major: 13,
    },
    WheelLayout {
        // nvidia-cuda-cupti 13.0.85
        wheels: &["nvidia-cuda-cupti", "nvidia-cuda-cupti-cu13"],
        lib_dir: CU13,
        sonames: &[
            "libcheckpoint.so",
            "libcupti.so.13",
            "libnvperf_host.so",
            "libnvperf_target.so",
            "libpcsamplingutil.so",
        ],
        cuda_major: 13,
    },
    WheelLayout {
        // nvidia-cuda-nvrtc 13.0.88
        wheels: &["nvidia-cuda-nvrtc", "nvidia-cuda-nvrtc-cu13"],
        lib_dir: CU13,
        sonames: &[
            "libnvrtc-builtins.alt.so.13.0",
            "libnvrtc-builtins.so.13.0",
            "libnvrtc.alt.so.13",
            "libnvrtc.so.13",
        ],
        cuda_major: 13,
    },
    WheelLayout {
        // nvidia-cuda-opencl 13.0.85
        wheels: &["nvidia-cuda-opencl", "nvidia-cuda-opencl-cu13"],
        lib_dir: CU13,
        sonames: &["libOpenCL.so.1"],
        cuda_major: 13,
    },
    WheelLayout {
        // nvidia-cuda-runtime 13.0.96
        wheels: &["nvidia-cuda-runtime", "nvidia-cuda-runtime-cu13"],
        lib_dir: CU13,
        sonames: &["libcudart.so.13"],
        cuda_major: 13,
    },
    WheelLayout {
        // nvidia-cuda-sanitizer-api 13.0.85
        wheels: &[
            "nvidia-cuda-sanitizer-api",
            "nvidia-cuda-sanitizer-api-cu13",
        ],
        lib_dir: CU13,
        sonames: &[
            "libInterceptorInjectionTarget.so",
            "libTreeLauncherPlaceholder.so",
            "libTreeLauncherTargetInjection.so",
            "libTreeLauncherTargetUpdatePreloadInjection.so",
            "libsanitizer-collection.so",
            "libsanitizer-public.so",
        ],
        cuda_major: 13,
    },
    WheelLayout {
        // nvidia-cufft 12.0.0.61
        wheels: &["nvidia-cufft", "nvidia-cufft-cu13"],
        lib_dir: CU13,
        sonames: &["libcufft.so.12", "libcufftw.so.12"],
        cuda_major: 13,
    },
    WheelLayout {
        // nvidia-cufile 1.15.1.6
        wheels: &["nvidia-cufile", "nvidia-cufile-cu13"],
        lib_dir: CU13,
        sonames: &["libcufile.so.0", "libcufile_rdma.so.1"],
        cuda_major: 13,
    },
    WheelLayout {
        // nvidia-curand 10.4.0.35
        wheels: &["nvidia-curand", "nvidia-curand-cu13"],
        lib_dir: CU13,
        sonames: &["libcurand.so.10"],
        cuda_major: 13,
    },
    WheelLayout {
        // nvidia-cusolver 12.0.4.66
        wheels: &["nvidia-cusolver", "nvidia-cusolver-cu13"],
        lib_dir: CU13,
        sonames: &["libcusolver.so.12", "libcusolverMg.so.12"],
        cuda_major: 13,
    },
    WheelLayout {
        // nvidia-cusparse 12.6.3.3
        wheels: &["nvidia-cusparse", "nvidia-cusparse-cu13"],
        lib_dir: CU13,
        sonames: &["libcusparse.so.12"],
        cuda_major: 13,
    },
    WheelLayout {
        // nvidia-npp 13.0.1.2
        wheels: &["nvidia-npp", "nvidia-npp-cu13"],
        lib_dir: CU13,
        sonames: &[
            "libnppc.so.13",
            "libnppial.so.13",
            "libnppicc.so.13",
            "libnppidei.so.13",
            "libnppif.so.13",
            "libnppig.so.13",
            "libnppim.so.13",
            "libnppist.so.13",
            "libnppisu.so.13",
            "libnppitc.so.13",
            "libnpps.so.13",
        ],
        cuda_major: 13,
    },
    WheelLayout {
        // nvidia-nvfatbin 13.0.85
        wheels: &["nvidia-nvfatbin", "nvidia-nvfatbin-cu13"],
        lib_dir: CU13,
        sonames: &["libnvfatbin.so.13"],
        cuda_major: 13,
    },
    WheelLayout {
        // nvidia-nvjitlink 13.0.88
        wheels: &["nvidia-nvjitlink", "nvidia-nvjitlink-cu13"],
        lib_dir: CU13,
        sonames: &["libnvJitLink.so.13"],
        cuda_major: 13,
    },
    WheelLayout {
        // nvidia-nvjpeg 13.0.1.86
        wheels: &["nvidia-nvjpeg", "nvidia-nvjpeg-cu13"],
        lib_dir: CU13,
        sonames: &["libnvjpeg.so.13"],
        cuda_major: 13,
    },
    WheelLayout {
        // nvidia-nvtx 13.0.85
        wheels: &["nvidia-nvtx", "nvidia-nvtx-cu13"],
        lib_dir: CU13,
        sonames: &["libnvtx3interop.so.1"],
        cuda_major: 13,
    },
    WheelLayout {
        // nvidia-nvvm 13.0.88
        wheels: &["nvidia-nvvm", "nvidia-nvvm-cu13"],
        lib_dir: CU13,
        sonames: &["libnvvm.so.4"],
        cuda_major: 13,
    },
    // Wheels with a directory of their own (one wheel per directory).
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
    // Unversioned helpers (cupti's libnvperf_host.so) and the OpenCL ICD loader are no evidence
    // of a CUDA major.
    if !soname.contains(".so.") || soname == "libOpenCL.so.1" {
        return None;
    }
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
        assert_eq!(cuda_major_of("libOpenCL.so.1"), None);
        assert_eq!(cuda_major_of("libnvperf_host.so"), None);
    }

    /// Per soname, not per directory: `nvidia/cu13/lib` is shared, and each of its sonames is
    /// shipped by exactly one wheel (the RECORDs this table comes from).
    #[test]
    fn each_cu13_soname_has_one_wheel() {
        let mut seen = std::collections::BTreeMap::new();
        for l in layouts_at(CU13) {
            for s in l.sonames {
                assert!(seen.insert(*s, l.wheels[0]).is_none(), "{s} twice");
            }
        }
        assert_eq!(seen["libcublasLt.so.13"], "nvidia-cublas");
        assert_eq!(seen["libnvrtc.so.13"], "nvidia-cuda-nvrtc");
        assert_eq!(seen["libcudart.so.13"], "nvidia-cuda-runtime");
        assert_eq!(seen["libnvvm.so.4"], "nvidia-nvvm");
        assert!(layouts_at(CU13).count() > 10);
    }
}
