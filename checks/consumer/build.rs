// The whole build script: kernels/*.cu for this crate's [package.metadata.kiln] matrix, the
// bindgen ABI of kernels/include/*.h and the manifest, into OUT_DIR.
fn main() {
    if let Err(e) = kiln_build::KernelBuild::for_build_script().and_then(|b| b.run()) {
        eprintln!("error: building kernels/ failed:\n{e}");
        std::process::exit(1);
    }
}
