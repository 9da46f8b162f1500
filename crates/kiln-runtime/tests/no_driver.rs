//! Without an NVIDIA driver (this build machine, CI), every entry point returns
//! Error::NoDriver with the documented message — never a panic.

use kiln_runtime::{Error, Gpu};

/// Straight to the stderr file descriptor: libtest captures print!/eprint! of passing tests,
/// and a skip must be visible in a normal run.
macro_rules! skip {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($t)*);
    }};
}

fn driver_present() -> bool {
    // SAFETY: only probes whether the driver library can be loaded.
    unsafe { libloading::Library::new("libcuda.so.1") }.is_ok()
}

#[test]
fn gpu_new_without_driver_is_a_clear_error() {
    if driver_present() {
        skip!("SKIP: libcuda.so.1 is present on this machine, so the no-driver path cannot be exercised here");
        return;
    }
    for attempt in 0..2 {
        let err = Gpu::new(0)
            .err()
            .expect("Gpu::new must fail without a driver");
        assert!(
            matches!(err, Error::NoDriver(_)),
            "attempt {attempt}: {err:?}"
        );
        let msg = err.to_string();
        assert!(
            msg.starts_with("no NVIDIA driver found: libcuda.so.1"),
            "{msg}"
        );
        assert!(
            msg.contains("LD_LIBRARY_PATH"),
            "the message says how to fix it: {msg}"
        );
    }
    let err = Gpu::device_count().unwrap_err();
    assert!(
        err.to_string()
            .starts_with("no NVIDIA driver found: libcuda.so.1"),
        "{err}"
    );
    assert!(matches!(
        kiln_runtime::Communicator::all_visible(),
        Err(Error::NoDriver(_))
    ));
}

#[test]
fn dlopen_note_lists_every_library() {
    let v: serde_json::Value = serde_json::from_str(kiln_runtime::note::DLOPEN_JSON).unwrap();
    let sonames: Vec<&str> = v
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|e| {
            e["soname"]
                .as_array()
                .unwrap()
                .iter()
                .map(|s| s.as_str().unwrap())
        })
        .collect();
    for s in [
        kiln_runtime::loader::sonames::DRIVER_SONAME,
        kiln_runtime::loader::sonames::CUBLAS_SONAME,
        kiln_runtime::loader::sonames::CUDNN_SONAME,
        kiln_runtime::loader::sonames::NCCL_SONAME,
    ] {
        assert!(sonames.contains(&s), "{s} missing from {sonames:?}");
    }
    assert!(
        !sonames.iter().any(|s| s.ends_with(".so")),
        "no unversioned names: {sonames:?}"
    );
}

/// The note really is in a linked binary (this test executable), as an SHT_NOTE section with
/// the FDO owner and type and the same JSON payload.
#[test]
fn dlopen_note_is_in_the_linked_binary() {
    use object::{Object, ObjectSection, SectionKind};
    let exe = std::fs::read(std::env::current_exe().unwrap()).unwrap();
    let file = object::File::parse(&*exe).unwrap();
    let section = file
        .section_by_name(".note.dlopen")
        .expect(".note.dlopen section in the test binary");
    assert_eq!(section.kind(), SectionKind::Note);
    let data = section.data().unwrap();
    let word = |i: usize| u32::from_le_bytes(data[i..i + 4].try_into().unwrap()) as usize;
    let (namesz, descsz, kind) = (word(0), word(4), word(8));
    assert_eq!(kind, 0x407c_0c0a);
    assert_eq!(&data[12..12 + namesz], b"FDO\0");
    let desc_at = 12 + namesz.div_ceil(4) * 4;
    let desc = &data[desc_at..desc_at + descsz];
    let json = std::str::from_utf8(desc).unwrap().trim_end_matches('\0');
    assert_eq!(json, kiln_runtime::note::DLOPEN_JSON);
}

/// The handles cross threads (Python calls from any thread; the GC frees anywhere).
#[test]
fn handles_are_send_and_sync() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<kiln_runtime::Gpu>();
    send_sync::<kiln_runtime::Tensor>();
    send_sync::<kiln_runtime::Communicator>();
    send_sync::<kiln_runtime::View>();
}
