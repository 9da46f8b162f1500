fn main() {
    match kiln_build::KernelBuild::for_build_script().and_then(|b| b.run()) {
        Ok(_) => {}
        Err(e) => {
            eprintln!("error: building kernels/ failed:\n{e}");
            std::process::exit(1);
        }
    }
}
