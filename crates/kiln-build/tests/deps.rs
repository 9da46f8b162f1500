//! The textual include scan agrees with nvcc's own preprocessor (`-MM`) on the real kernels and
//! on the kernel-library fixture (headers outside kernels/, toolkit headers left out).

mod common;

#[test]
fn textual_scan_matches_nvcc_mm_on_every_kernel() {
    let nvcc = common::real_nvcc();
    let kernels = common::repo_root().join("kernels");
    let flags = vec![format!("-I{}", kernels.join("include").display())];
    let mut sources: Vec<_> = std::fs::read_dir(&kernels)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "cu"))
        .collect();
    sources.sort();
    assert!(sources.len() >= 7);
    let fixture = common::repo_root().join("checks/kernel-library/kernels");
    for f in ["affine.cu", "unary.cu", "fp8.cu"] {
        sources.push(fixture.join(f));
    }
    let home = nvcc.parent().unwrap().parent().unwrap().to_path_buf();
    for s in &sources {
        let textual = kiln_build::deps::headers(&nvcc, s, &flags, &home).unwrap();
        let mm = kiln_build::deps::preprocessor_headers(&nvcc, s, &flags, &home).unwrap();
        assert_eq!(textual, mm, "{}", s.display());
        assert!(
            !textual.is_empty(),
            "{} includes project headers",
            s.display()
        );
    }
}
