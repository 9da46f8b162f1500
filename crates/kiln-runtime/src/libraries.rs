//! The runtime libraries kiln-runtime reaches, listed from their modules (the top layer: it
//! imports the library modules; none of them imports it).

use crate::loader::LibraryStatus;

/// Loads cuBLAS, cuDNN and NCCL (no GPU or driver needed) and resolves every function
/// kiln-runtime calls in each: what a doctor or `build_info()` reports as available features.
pub fn runtime_libraries() -> Vec<LibraryStatus> {
    vec![
        crate::blas::CUBLAS.status(),
        crate::dnn::CUDNN.status(),
        crate::nccl::NCCL.status(),
    ]
}

#[cfg(test)]
mod tests {
    /// Layers point one way: the loader, the GPU and its handle store name no library module,
    /// so a new library (cuFFT, cuRAND) is one file plus its line above.
    #[test]
    fn lower_layers_name_no_library_module() {
        let src = concat!(env!("CARGO_MANIFEST_DIR"), "/src");
        for file in [
            "loader.rs",
            "gpu.rs",
            "handles.rs",
            "context.rs",
            "error.rs",
        ] {
            let text = std::fs::read_to_string(format!("{src}/{file}")).unwrap();
            for module in ["blas", "dnn", "nccl", "libraries"] {
                for pattern in [format!("crate::{module}"), format!("{module}::")] {
                    assert!(
                        !text.contains(&pattern),
                        "{file} reaches up into {module} ({pattern})"
                    );
                }
            }
        }
    }
}
