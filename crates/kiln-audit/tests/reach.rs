//! GPU reach on device code built here by the pinned nvcc: plain SASS, SASS + PTX, `a`-only
//! SASS, `f` SASS, and a shared library whose kernels were built for different target sets.
//! The paths and the reach/* findings must follow from the bytes nvcc wrote.

use std::path::{Path, PathBuf};
use std::process::Command;

use kiln_audit::{NoProgress, Options, Policy, ReachPath, Report};
use kiln_test_support::nvcc;

fn run(cmd: &mut Command) {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn source(dir: &Path, name: &str, kernel: &str) -> PathBuf {
    let src = dir.join(format!("{name}.cu"));
    let text = format!("extern \"C\" __global__ void {kernel}(float *a, int n) {{ int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) a[i] += 1.0f; }}\n");
    std::fs::write(&src, text).unwrap();
    src
}

/// A bare fatbin of one kernel for `gencodes`.
fn fatbin(dir: &Path, name: &str, gencodes: &[&str]) -> PathBuf {
    let src = source(dir, name, &format!("k_{name}"));
    let out = dir.join(format!("{name}.fatbin"));
    let mut cmd = Command::new(nvcc());
    cmd.arg("-fatbin").arg("-o").arg(&out).arg(&src);
    for g in gencodes {
        cmd.arg("-gencode").arg(g);
    }
    run(&mut cmd);
    out
}

fn audit(path: &Path, policy: &Policy) -> Report {
    kiln_audit::audit(path, policy, &Options::default(), &NoProgress).unwrap()
}

/// The cell of `generation` for the first binary.
fn path(r: &Report, generation: &str) -> (ReachPath, Option<u32>) {
    let i = r
        .reach
        .generations
        .iter()
        .position(|g| g == generation)
        .unwrap();
    let c = &r.reach.binaries[0].cells[i];
    (c.path, c.min_driver)
}

fn rules(r: &Report) -> Vec<&str> {
    r.findings.iter().map(|f| f.rule.as_str()).collect()
}

#[test]
fn nvcc_fixtures_reach_what_the_compatibility_rules_say() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let none = Policy::default();

    // Plain SASS only: its own minors and the higher ones of the same major, nothing else.
    let r = audit(
        &fatbin(
            d,
            "plain",
            &["arch=compute_80,code=sm_80", "arch=compute_86,code=sm_86"],
        ),
        &none,
    );
    assert_eq!(path(&r, "8.6").0, ReachPath::Exact);
    assert_eq!(path(&r, "8.7").0, ReachPath::Compatible);
    assert_eq!(path(&r, "9.0").0, ReachPath::None);
    assert_eq!(path(&r, "7.5").0, ReachPath::None);
    assert!(rules(&r).is_empty(), "{:?}", r.findings);

    // SASS + PTX: the JIT carries it to every newer GPU, from the driver of nvcc 13.0's ISA 9.0.
    let ptx = fatbin(d, "ptx", &["arch=compute_80,code=[sm_80,compute_80]"]);
    let r = audit(&ptx, &none);
    assert_eq!(path(&r, "8.6"), (ReachPath::Compatible, None));
    assert_eq!(path(&r, "12.1"), (ReachPath::Ptx, Some(580)));
    assert!(rules(&r).is_empty(), "{:?}", r.findings);
    let mut p = Policy {
        require_gpus: Some(vec![(9, 0), (12, 0)]),
        min_driver: Some(580),
        ..Policy::default()
    };
    assert!(rules(&audit(&ptx, &p)).is_empty());
    p.min_driver = Some(570);
    let r = audit(&ptx, &p);
    assert_eq!(
        path(&r, "12.0").0,
        ReachPath::None,
        "ISA 9.0 PTX is no path under driver 570"
    );
    assert_eq!(
        rules(&r)
            .iter()
            .filter(|x| **x == "reach/required-gpu")
            .count(),
        2,
        "{:?}",
        r.findings
    );

    // `a`-only SASS: exactly 9.0, and nothing newer can run it.
    let r = audit(
        &fatbin(d, "archspecific", &["arch=compute_90a,code=sm_90a"]),
        &none,
    );
    assert_eq!(path(&r, "9.0").0, ReachPath::Exact);
    assert_eq!(path(&r, "10.0").0, ReachPath::None);
    assert_eq!(rules(&r), ["reach/no-forward-path"], "{:?}", r.findings);

    // `f` SASS (nvcc 13.0 accepts sm_100f and sm_120f): the family, not the next major.
    let r = audit(
        &fatbin(
            d,
            "family",
            &[
                "arch=compute_100f,code=sm_100f",
                "arch=compute_120f,code=sm_120f",
            ],
        ),
        &none,
    );
    assert_eq!(path(&r, "10.0").0, ReachPath::Exact);
    assert_eq!(path(&r, "10.3").0, ReachPath::Family);
    assert_eq!(path(&r, "12.1").0, ReachPath::Family);
    // 11.0 lies between the binary's targets, and no `f` SASS of 10.x or 12.x reaches it.
    assert_eq!(path(&r, "11.0").0, ReachPath::None);
    let mut got = rules(&r);
    got.sort();
    assert_eq!(
        got,
        ["reach/gap", "reach/no-forward-path"],
        "{:?}",
        r.findings
    );
}

#[test]
fn a_library_whose_kernels_have_different_targets_reaches_their_intersection() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let mut objects = Vec::new();
    for (name, gencodes) in [
        (
            "wide",
            &["arch=compute_80,code=sm_80", "arch=compute_90,code=sm_90"][..],
        ),
        ("narrow", &["arch=compute_90,code=sm_90"][..]),
    ] {
        let src = source(d, name, &format!("k_{name}"));
        let obj = d.join(format!("{name}.o"));
        let mut cmd = Command::new(nvcc());
        cmd.args(["-c", "-Xcompiler", "-fPIC", "-o"])
            .arg(&obj)
            .arg(&src);
        for g in gencodes {
            cmd.arg("-gencode").arg(g);
        }
        run(&mut cmd);
        objects.push(obj);
    }
    let lib = d.join("libmixed.so");
    run(Command::new("g++")
        .arg("-shared")
        .arg("-o")
        .arg(&lib)
        .args(&objects));
    let r = audit(&lib, &Policy::default());
    assert_eq!(r.reach.binaries.len(), 1);
    let b = &r.reach.binaries[0];
    assert_eq!(
        (b.kernels, b.lowest.as_str(), b.highest.as_str()),
        (2, "8.0", "9.0")
    );
    assert_eq!(path(&r, "9.0").0, ReachPath::Exact);
    let i = r.reach.generations.iter().position(|g| g == "8.6").unwrap();
    // Per kernel: the intersection — k_narrow has no way to 8.6.
    assert_eq!(b.cells[i].kernel_path, ReachPath::None);
    assert_eq!(b.cells[i].unreached, ["k_narrow"]);
    // Per library: k_narrow starts at sm_90 (gated by arch, as NCCL's sm_90+ fp8 kernels), so
    // the library runs on 8.6 by k_wide's sm_80 code, and there is no gap.
    assert_eq!(
        (b.cells[i].path, b.cells[i].holes_count),
        (ReachPath::Compatible, 0)
    );
    assert!(!rules(&r).contains(&"reach/gap"), "{:?}", r.findings);
    // 8.7 (Jetson Orin, Arm only) has no row for this x86_64 library.
    assert!(r.reach.omitted.iter().any(|o| o.generation == "8.7"));
}

/// The `a`/`f` variant of a cubin is proven by its own toolkit note, not by the fatbin entry's
/// flags: nvcc's sm_90a / sm_100f / sm_120 cubins pass under their true labels, and each
/// relabelled variant (flag cleared, or added) is a target mismatch that proves no target.
#[test]
fn cubin_variants_come_from_the_cubins_own_note() {
    use kiln_fatbin::container::{self, FLAG_ARCH_SPECIFIC, FLAG_FAMILY};
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let path = fatbin(
        d,
        "variants",
        &[
            "arch=compute_90a,code=sm_90a",
            "arch=compute_100f,code=sm_100f",
            "arch=compute_120,code=sm_120",
        ],
    );
    let none = Policy::default();
    let r = audit(&path, &none);
    assert!(
        !rules(&r).contains(&"fatbin/target-mismatch"),
        "{:?}",
        rules(&r)
    );
    let labels: Vec<String> = r.binaries[0]
        .device
        .as_ref()
        .unwrap()
        .entries
        .iter()
        .map(|e| e.target.to_string())
        .collect();
    for t in ["sm_90a", "sm_100f", "sm_120"] {
        assert!(labels.iter().any(|l| l == t), "{t} missing from {labels:?}");
    }
    let bytes = std::fs::read(&path).unwrap();
    let cubins: Vec<(usize, u32)> = container::parse(&bytes).unwrap()[0]
        .entries
        .iter()
        .filter(|e| e.kind == container::EntryKind::Elf)
        .map(|e| (e.offset, e.sm))
        .collect();
    // Clear sm_90a's and sm_100f's variant bit, set `f` on the plain sm_120.
    for (sm, clear, set) in [
        (90, FLAG_ARCH_SPECIFIC, 0),
        (100, FLAG_FAMILY, 0),
        (120, 0, FLAG_FAMILY),
    ] {
        let (at, _) = *cubins.iter().find(|c| c.1 == sm).unwrap();
        let mut lied = bytes.clone();
        let flags = u64::from_le_bytes(lied[at + 40..at + 48].try_into().unwrap());
        lied[at + 40..at + 48].copy_from_slice(&((flags & !clear) | set).to_le_bytes());
        let p = d.join(format!("lied{sm}.fatbin"));
        std::fs::write(&p, &lied).unwrap();
        let r = audit(&p, &none);
        assert!(
            rules(&r).contains(&"fatbin/target-mismatch"),
            "sm_{sm}: {:?}",
            rules(&r)
        );
        let e = r.binaries[0]
            .device
            .as_ref()
            .unwrap()
            .entries
            .iter()
            .find(|e| e.offset == at)
            .unwrap();
        let why = e.label_mismatch.as_deref().unwrap_or("");
        assert!(why.contains("toolkit note"), "sm_{sm}: {why}");
    }
}

/// A shared library from `asm` (gas, `.incbin` of files in `dir`) and one C function.
fn library_with(dir: &Path, name: &str, asm: &str) -> PathBuf {
    std::fs::write(dir.join(format!("{name}.S")), asm).unwrap();
    std::fs::write(dir.join("f.c"), "int kiln_f(void) { return 1; }\n").unwrap();
    let out = dir.join(format!("lib{name}.so"));
    run(Command::new("cc")
        .current_dir(dir)
        .args(["-shared", "-fPIC", "-Wa,--noexecstack", "-o"])
        .arg(&out)
        .arg(format!("{name}.S"))
        .arg("f.c"));
    out
}

/// Device code outside `.nv_fatbin`: a fatbin in a vendor section and a raw cubin in .rodata
/// are found where they are, reported as loaded by the library itself and counted in reach;
/// PTX only in `__nv_relfatbin` (an -rdc object) is reported and reaches nothing.
#[test]
fn device_code_is_found_wherever_it_hides() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let none = Policy::default();
    fatbin(
        d,
        "vendor",
        &[
            "arch=compute_80,code=sm_80",
            "arch=compute_90,code=compute_90",
        ],
    );
    let lib = library_with(
        d,
        "vendor",
        ".section .vendor_gpu,\"a\",@progbits\n.balign 8\n.incbin \"vendor.fatbin\"\n",
    );
    let r = audit(&lib, &none);
    assert!(
        rules(&r).contains(&"fatbin/outside-nv-fatbin"),
        "{:?}",
        rules(&r)
    );
    let entries = &r.binaries[0].device.as_ref().unwrap().entries;
    assert_eq!(entries.len(), 2);
    assert!(entries
        .iter()
        .all(|e| e.section.as_deref() == Some(".vendor_gpu")));
    assert_eq!(path(&r, "8.0").0, ReachPath::Exact);
    assert_eq!(path(&r, "9.0").0, ReachPath::Ptx);
    assert_eq!(path(&r, "7.5").0, ReachPath::None);

    // A raw cubin (nvcc -cubin) assembled into .rodata.
    let src = source(d, "raw", "k_raw");
    run(Command::new(nvcc())
        .args(["-cubin", "-arch=sm_86", "-o"])
        .arg(d.join("raw.cubin"))
        .arg(&src));
    let lib = library_with(
        d,
        "raw",
        ".section .rodata\n.balign 8\n.incbin \"raw.cubin\"\n",
    );
    let r = audit(&lib, &none);
    let entries = &r.binaries[0].device.as_ref().unwrap().entries;
    assert_eq!(entries.len(), 1, "{entries:?}");
    assert_eq!(entries[0].section.as_deref(), Some(".rodata"));
    assert_eq!(entries[0].target.to_string(), "sm_86");
    assert_eq!(entries[0].kernels, ["k_raw"]);
    assert_eq!(path(&r, "8.6").0, ReachPath::Exact);
    assert_eq!(path(&r, "8.9").0, ReachPath::Compatible);

    // PTX only in __nv_relfatbin: relocatable, never loaded, no reach.
    let src = source(d, "rdc", "k_rdc");
    let obj = d.join("rdc.o");
    run(Command::new(nvcc())
        .args(["-rdc=true", "-c", "-Xcompiler", "-fPIC"])
        .args(["-gencode", "arch=compute_80,code=compute_80", "-o"])
        .arg(&obj)
        .arg(&src));
    let r = audit(&obj, &none);
    assert!(
        rules(&r).contains(&"arch/relocatable-only"),
        "{:?}",
        rules(&r)
    );
    assert!(r.binaries[0].device.is_none());
    let rel = r.binaries[0]
        .relocatable
        .as_ref()
        .expect("relocatable device code");
    let ptx = rel
        .entries
        .iter()
        .find(|e| e.kind == kiln_audit::facts::EntryKind::Ptx)
        .expect("the PTX entry");
    // Read from its header: the ISA nvcc 13.0 states there, no payload decoded for kernels.
    assert_eq!(ptx.ptx_isa.as_deref(), Some("9.0"));
    assert!(ptx.kernels.is_empty(), "{:?}", ptx.kernels);
    assert!(r.reach.binaries.is_empty());
    assert_eq!(r.counts.binaries_with_device_code, 0);
}

/// `f` PTX (compute_100f) JITs only within its family (10.x), `a` PTX only on its own arch.
#[test]
fn family_and_arch_specific_ptx_stay_in_their_family_and_arch() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let none = Policy::default();
    let r = audit(
        &fatbin(d, "fptx", &["arch=compute_100f,code=compute_100f"]),
        &none,
    );
    let targets: Vec<String> = r.binaries[0]
        .device
        .as_ref()
        .unwrap()
        .entries
        .iter()
        .map(|e| e.target.to_string())
        .collect();
    assert_eq!(targets, ["compute_100f"]);
    assert_eq!(path(&r, "10.0").0, ReachPath::Ptx);
    assert_eq!(path(&r, "10.3").0, ReachPath::Ptx);
    for g in ["9.0", "11.0", "12.0", "12.1"] {
        assert_eq!(path(&r, g).0, ReachPath::None, "{g}");
    }
    let r = audit(
        &fatbin(d, "aptx", &["arch=compute_90a,code=compute_90a"]),
        &none,
    );
    assert_eq!(path(&r, "9.0").0, ReachPath::Ptx);
    for g in ["8.9", "10.0", "12.0"] {
        assert_eq!(path(&r, g).0, ReachPath::None, "{g}");
    }
}

/// A large cubin is read from a stream that keeps only its ELF tables (kiln_fatbin::sparse).
/// On nvcc's own layout (tables first, section headers last), a sparse read either gives the
/// whole cubin's answer or reports that it missed bytes: never a different answer. Swept over
/// how much of the start is kept, from the ELF header alone to the whole cubin.
#[test]
fn sparse_reads_of_an_nvcc_cubin_answer_as_the_whole_cubin_or_miss() {
    use kiln_fatbin::{cubin, sparse::SparseCubin};
    use object::{Object, ObjectSection};
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let src = d.join("many.cu");
    let kernels: String = (0..40)
        .map(|i| {
            format!("extern \"C\" __global__ void k{i}(float *a) {{ a[threadIdx.x] *= {i}.0f; }}\n")
        })
        .collect();
    std::fs::write(&src, kernels).unwrap();
    let out = d.join("many.cubin");
    run(Command::new(nvcc())
        .args(["-cubin", "-arch=sm_90a", "-o"])
        .arg(&out)
        .arg(&src));
    let bytes = std::fs::read(&out).unwrap();
    let whole = (
        cubin::sm(bytes.as_slice()).unwrap(),
        cubin::toolkit_target(bytes.as_slice()),
        cubin::kernels(bytes.as_slice()).unwrap(),
    );
    assert_eq!(whole.2.len(), 40);
    assert_eq!(whole.1, Some((90, kiln_pins::Variant::ArchSpecific)));
    let file = object::File::parse(bytes.as_slice()).unwrap();
    let tables_end = file
        .sections()
        .filter(|s| {
            let n = s.name().unwrap_or("");
            n == ".symtab" || n.ends_with("strtab") || n.starts_with(".note")
        })
        .filter_map(|s| s.file_range())
        .map(|(o, n)| (o + n) as usize)
        .max()
        .unwrap();
    let shoff = u64::from_le_bytes(bytes[40..48].try_into().unwrap()) as usize;
    assert!(
        tables_end < shoff,
        "nvcc writes its tables before the section headers"
    );
    let z = zstd::bulk::compress(&bytes, 19).unwrap();
    let mut answered = Vec::new();
    let mut prefixes = vec![64, tables_end - 1, tables_end, bytes.len()];
    prefixes.extend((1..16).map(|i| tables_end * i / 16));
    for prefix in prefixes {
        let s = SparseCubin::from_zstd_keeping(&z, bytes.len() as u64, prefix).unwrap();
        let got = (
            cubin::sm(&s).unwrap(),
            cubin::toolkit_target(&s),
            cubin::kernels(&s).unwrap_or_default(),
        );
        if s.missed() {
            assert!(
                prefix < tables_end,
                "prefix {prefix} holds every table and still missed"
            );
        } else {
            assert_eq!(
                got, whole,
                "prefix {prefix}: an answer that is not the whole cubin's"
            );
            answered.push(prefix);
        }
    }
    assert!(
        answered.contains(&tables_end) && !answered.contains(&64),
        "{answered:?}"
    );
}

/// The paths for large inputs give the facts of small ones: a library over the 32 MiB spill
/// threshold (inflated into a mapped temporary file) whose `.nv_fatbin` holds a zstd cubin over
/// the 8 MiB sparse threshold (read keeping only its ELF tables), in a wheel with its RECORD,
/// and on its own.
#[test]
fn a_large_library_with_a_large_cubin_gives_the_facts_of_a_small_one() {
    use kiln_fatbin::container::{self, FLAG_COMPRESSED};
    use std::io::Write;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let small = std::fs::read(fatbin(d, "small", &["arch=compute_90,code=sm_90"])).unwrap();
    let e = container::parse(&small).unwrap()[0]
        .entries
        .iter()
        .find(|e| e.kind == container::EntryKind::Elf)
        .cloned()
        .unwrap();
    let mut cubin = e.decompress().unwrap().into_owned();
    let kernels = kiln_fatbin::cubin::kernels(cubin.as_slice()).unwrap();
    assert_eq!(kernels, ["k_small"]);
    // Bytes after an ELF's last table are read by nobody: 9 MiB of them make the cubin large
    // without changing what it says.
    cubin.resize(cubin.len() + (9 << 20), 0);
    let z = zstd::bulk::compress(&cubin, 3).unwrap();
    let at = e.offset;
    let header_size = u32::from_le_bytes(small[at + 4..at + 8].try_into().unwrap()) as usize;
    let mut header = small[at..at + header_size].to_vec();
    let stored = z.len().next_multiple_of(8);
    header[8..16].copy_from_slice(&(stored as u64).to_le_bytes());
    header[16..20].copy_from_slice(&(z.len() as u32).to_le_bytes());
    let flags = u64::from_le_bytes(header[40..48].try_into().unwrap()) | FLAG_COMPRESSED;
    header[40..48].copy_from_slice(&flags.to_le_bytes());
    header[56..64].copy_from_slice(&(cubin.len() as u64).to_le_bytes());
    let mut big = container::MAGIC.to_le_bytes().to_vec();
    big.extend_from_slice(&small[4..6]);
    big.extend_from_slice(&16u16.to_le_bytes());
    big.extend_from_slice(&((header.len() + stored) as u64).to_le_bytes());
    big.extend_from_slice(&header);
    big.extend_from_slice(&z);
    big.resize(16 + header.len() + stored, 0);
    std::fs::write(d.join("big.fatbin"), &big).unwrap();
    let entry = &container::parse(&big).unwrap()[0].entries[0];
    assert!(entry.decompressed_size > 8 << 20);
    let sparse =
        kiln_fatbin::sparse::SparseCubin::from_zstd(entry.payload, entry.decompressed_size)
            .unwrap();
    assert_eq!(kiln_fatbin::cubin::kernels(&sparse).unwrap(), kernels);
    assert!(
        !sparse.missed(),
        "the sparse read answers without the fallback"
    );

    std::fs::write(d.join("pad.bin"), vec![0x5a; 40 << 20]).unwrap();
    let lib = library_with(
        d,
        "big",
        ".section .nv_fatbin,\"a\"\n.balign 8\n.incbin \"big.fatbin\"\n.section .pad_data,\"a\"\n.incbin \"pad.bin\"\n",
    );
    let so = std::fs::read(&lib).unwrap();
    assert!(so.len() > 40 << 20);
    let whl = d.join("demo-1.0-py3-none-manylinux_2_17_x86_64.whl");
    let mut w = zip::ZipWriter::new(std::fs::File::create(&whl).unwrap());
    let opts = zip::write::SimpleFileOptions::default();
    let members = [
        ("demo/libbig.so", so),
        (
            "demo-1.0.dist-info/METADATA",
            b"Metadata-Version: 2.1\nName: demo\nVersion: 1.0\n".to_vec(),
        ),
        (
            "demo-1.0.dist-info/WHEEL",
            b"Wheel-Version: 1.0\nTag: py3-none-manylinux_2_17_x86_64\n".to_vec(),
        ),
    ];
    let mut record = String::new();
    for (name, data) in &members {
        let digest = kiln_wheel::record::MemberDigest::of(data);
        record += &format!("{name},{},{}\n", digest.hash, digest.size);
        w.start_file(*name, opts).unwrap();
        w.write_all(data).unwrap();
    }
    record += "demo-1.0.dist-info/RECORD,,\n";
    w.start_file("demo-1.0.dist-info/RECORD", opts).unwrap();
    w.write_all(record.as_bytes()).unwrap();
    w.finish().unwrap();

    let r = audit(&whl, &Policy::default());
    let broken: Vec<&str> = rules(&r)
        .into_iter()
        .filter(|rule| {
            rule.starts_with("wheel/") || rule.starts_with("elf/") || rule.starts_with("fatbin/")
        })
        .collect();
    assert!(broken.is_empty(), "{broken:?}");
    let device = r.binaries[0].device.as_ref().expect("device code");
    assert_eq!(device.entries.len(), 1);
    let got = &device.entries[0];
    assert_eq!(got.size, cubin.len() as u64);
    assert_eq!(got.kernels, kernels);
    assert_eq!((got.error.as_deref(), got.section.as_deref()), (None, None));

    // The library on its own (a lone ELF input, spilled the same way) says the same.
    let alone = audit(&lib, &Policy::default());
    let got = &alone.binaries[0]
        .device
        .as_ref()
        .expect("device code")
        .entries[0];
    assert_eq!((got.size, &got.kernels), (cubin.len() as u64, &kernels));
}

/// checks/reach-dispatch: a library whose specialised kernels are built for one target each and
/// picked at run time (README there: which real libraries each models), linked from one object
/// per kernel. `scale_gencodes`: the portable `scale` kernel's targets; `specialised`: whether
/// the three specialised kernels are linked in. Objects are reused within `dir`.
fn dispatching_library(
    dir: &Path,
    name: &str,
    scale_gencodes: &[&str],
    specialised: bool,
) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../checks/reach-dispatch");
    let units: [(&str, &[&str]); 5] = [
        (
            "general",
            &[
                "arch=compute_80,code=sm_80",
                "arch=compute_90,code=sm_90",
                "arch=compute_100,code=sm_100",
            ],
        ),
        ("sm80_xmma_gemm", &["arch=compute_80,code=sm_80"]),
        ("sm90_xmma_gemm", &["arch=compute_90a,code=sm_90a"]),
        ("multicast", &["arch=compute_100f,code=sm_100f"]),
        ("scale", scale_gencodes),
    ];
    let mut objects = Vec::new();
    for (unit, gencodes) in units {
        if !specialised && !matches!(unit, "general" | "scale") {
            continue;
        }
        let obj = dir.join(format!(
            "{unit}-{}.o",
            gencodes.join("+").replace([',', '='], "_")
        ));
        objects.push(obj.clone());
        if obj.exists() {
            continue;
        }
        let mut cmd = Command::new(nvcc());
        cmd.args(["-c", "-Xcompiler", "-fPIC", "-o"])
            .arg(&obj)
            .arg(src.join(format!("{unit}.cu")));
        for g in gencodes {
            cmd.arg("-gencode").arg(g);
        }
        run(&mut cmd);
    }
    // The toolkit's lib/ next to its bin/ (the pip layout ships lib/, not lib64/).
    let cuda_lib = nvcc().parent().unwrap().join("../lib");
    let lib = dir.join(format!("lib{name}.so"));
    run(Command::new("g++")
        .arg("-shared")
        .arg("-o")
        .arg(&lib)
        .args(&objects)
        .arg(format!("-L{}", cuda_lib.display()))
        .arg("-l:libcudart.so.13"));
    lib
}

/// Per library, a dispatching library runs where its portable kernels and the kernels meant for
/// each GPU are; per kernel, its specialised kernels are missing nearly everywhere. A portable
/// kernel built without one target is a hole there, and only there.
#[test]
fn a_dispatching_library_runs_where_its_kernels_are_meant_to() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let all = [
        "arch=compute_80,code=sm_80",
        "arch=compute_90,code=sm_90",
        "arch=compute_100,code=sm_100",
    ];
    let r = audit(
        &dispatching_library(d, "whole", &all, true),
        &Policy::default(),
    );
    let b = &r.reach.binaries[0];
    assert_eq!((b.kernels, b.specialised), (5, 3));
    let cell = |r: &Report, g: &str| {
        let i = r.reach.generations.iter().position(|x| x == g);
        i.map(|i| r.reach.binaries[0].cells[i].clone())
    };
    // x86_64: no rows for the Arm-only Orin, Thor and Spark.
    for g in ["8.7", "11.0", "12.1"] {
        assert!(cell(&r, g).is_none(), "{g}: {:?}", r.reach.generations);
    }
    for (g, lib) in [
        ("7.5", ReachPath::None),
        ("8.0", ReachPath::Exact),
        ("8.6", ReachPath::Compatible),
        ("8.9", ReachPath::Compatible),
        ("9.0", ReachPath::Exact),
        ("10.0", ReachPath::Exact),
        ("10.3", ReachPath::Family),
        ("12.0", ReachPath::None),
    ] {
        let c = cell(&r, g).unwrap();
        assert_eq!((c.path, c.holes_count), (lib, 0), "{g}: {c:?}");
    }
    // Per kernel: at 9.0 the sm_80-only and sm_100f-only kernels have no way there.
    let c = cell(&r, "9.0").unwrap();
    assert_eq!((c.kernel_path, c.unreached_count), (ReachPath::None, 2));
    assert_eq!(c.dispatched_count, 2);
    assert!(
        !rules(&r).contains(&"reach/gap"),
        "dispatch is no gap: {:?}",
        r.findings
    );

    let r = audit(
        &dispatching_library(d, "holed", &[all[0], all[2]], true),
        &Policy::default(),
    );
    let c = cell(&r, "9.0").unwrap();
    assert_eq!(
        (c.path, c.holes.clone()),
        (ReachPath::None, vec!["scale".to_string()])
    );
    for g in ["8.0", "8.6", "8.9", "10.0", "10.3"] {
        assert_eq!(cell(&r, g).unwrap().holes_count, 0, "{g}");
    }
    let gaps: Vec<&str> = r
        .findings
        .iter()
        .filter(|f| f.rule == "reach/gap")
        .map(|f| f.message.as_str())
        .collect();
    assert_eq!(gaps.len(), 1, "{gaps:?}");
    assert!(
        gaps[0].contains("GPU 9.0") && gaps[0].contains("scale"),
        "{gaps:?}"
    );
}

/// A raw cubin in `.rodata`, followed by more data: its size is its own ELF extent, not the
/// rest of the section, and its `a` variant comes from its own note.
#[test]
fn raw_cubins_have_their_own_size_and_variant() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let src = source(d, "rawa", "k_rawa");
    let cubin = d.join("rawa.cubin");
    run(Command::new(nvcc())
        .args(["-cubin", "-arch=sm_90a", "-o"])
        .arg(&cubin)
        .arg(&src));
    let len = std::fs::metadata(&cubin).unwrap().len();
    let lib = library_with(
        d,
        "rawa",
        ".section .rodata\n.balign 8\n.incbin \"rawa.cubin\"\n.fill 100000,1,0x5a\n",
    );
    let r = audit(&lib, &Policy::default());
    let e = &r.binaries[0].device.as_ref().unwrap().entries[0];
    assert_eq!(e.target.to_string(), "sm_90a");
    assert_eq!((e.size, e.stored_size as u64), (len, len));
    assert!(
        rules(&r).contains(&"reach/no-forward-path"),
        "{:?}",
        r.findings
    );
}

/// kiln's own rule: a binary carrying kiln's build manifest gets no dispatch allowance. The
/// fixture's portable kernels (`gemm`, `scale`) with an honest manifest (what the bytes hold,
/// matrix 8.0 9.0 10.0) added as kiln-build would: clean when every kernel has every target;
/// with `scale` compiled out of sm_90 the audit FAILS with `reach/matrix-hole` naming `scale`
/// and sm_90 (without the manifest the same bytes are a `reach/gap` warning only).
#[test]
fn a_kiln_built_binary_with_a_kernel_compiled_out_fails() {
    use kiln_pins::{MatrixEntry, Target, TargetKind};
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let all = [
        "arch=compute_80,code=sm_80",
        "arch=compute_90,code=sm_90",
        "arch=compute_100,code=sm_100",
    ];
    let kiln_built = |name: &str, scale: &[&str]| {
        let lib = dispatching_library(d, name, scale, false);
        let plain = audit(&lib, &Policy::default());
        let mut m = kiln_kernels::manifest();
        m.matrix = ["8.0", "9.0", "10.0"]
            .iter()
            .map(|e| e.parse::<MatrixEntry>().unwrap())
            .collect();
        let device = plain.binaries[0].device.as_ref().unwrap();
        m.targets = ["sm_80", "sm_90", "sm_100"]
            .iter()
            .map(|t| {
                let target: Target = t.parse().unwrap();
                let mut kernels: Vec<String> = device
                    .entries
                    .iter()
                    .filter(|e| e.target.device() == Some(target))
                    .flat_map(|e| e.kernels.clone())
                    .collect();
                kernels.sort();
                kiln_manifest::TargetKernels {
                    target,
                    kind: TargetKind::Sass,
                    ptx_isa: None,
                    kernels,
                }
            })
            .collect();
        let json = d.join(format!("{name}.json"));
        std::fs::write(&json, m.to_json()).unwrap();
        let built = d.join(format!("lib{name}-built.so"));
        run(Command::new("objcopy")
            .arg(format!("--add-section=.kiln_manifest={}", json.display()))
            .arg(&lib)
            .arg(&built));
        let r = audit(&built, &Policy::default());
        assert!(
            !rules(&r).iter().any(|x| x.starts_with("manifest/")),
            "the manifest is honest: {:?}",
            r.findings
        );
        assert!(r.reach.binaries[0].strict);
        (plain, r)
    };
    let (_, whole) = kiln_built("kilnwhole", &all);
    assert!(
        !rules(&whole).contains(&"reach/matrix-hole"),
        "{:?}",
        whole.findings
    );
    assert_ne!(whole.worst(), Some(kiln_audit::Severity::Error));
    let (plain, holed) = kiln_built("kilnholed", &[all[0], all[2]]);
    assert_eq!(
        plain.worst(),
        Some(kiln_audit::Severity::Warning),
        "{:?}",
        plain.findings
    );
    assert_eq!(
        holed.worst(),
        Some(kiln_audit::Severity::Error),
        "{:?}",
        holed.findings
    );
    let holes: Vec<&str> = holed
        .findings
        .iter()
        .filter(|f| f.rule == "reach/matrix-hole")
        .map(|f| f.message.as_str())
        .collect();
    assert_eq!(holes.len(), 1, "{holes:?}");
    assert!(
        holes[0].contains("no sm_90 code") && holes[0].contains("scale"),
        "{holes:?}"
    );
}

/// A copy of `lib` carrying a build manifest as kiln-build writes it: `matrix`, every target
/// of the bytes with the kernels the bytes hold there (honest), and `gates`.
fn with_kiln_manifest(
    lib: &Path,
    out: &Path,
    matrix: &[&str],
    gates: &[(&str, &[&str])],
) -> PathBuf {
    use kiln_pins::MatrixEntry;
    let plain = audit(lib, &Policy::default());
    let device = plain.binaries[0].device.as_ref().unwrap();
    let mut m = kiln_kernels::manifest();
    m.matrix = matrix
        .iter()
        .map(|e| e.parse::<MatrixEntry>().unwrap())
        .collect();
    let mut targets: Vec<kiln_pins::Target> = device
        .entries
        .iter()
        .filter_map(|e| e.target.device())
        .collect();
    targets.sort();
    targets.dedup();
    m.targets = targets
        .into_iter()
        .map(|target| {
            let of_target = || {
                device
                    .entries
                    .iter()
                    .filter(move |e| e.target.device() == Some(target))
            };
            let mut kernels: Vec<String> = of_target().flat_map(|e| e.kernels.clone()).collect();
            kernels.sort();
            kiln_manifest::TargetKernels {
                target,
                kind: target.kind,
                ptx_isa: of_target().find_map(|e| e.ptx_isa.clone()),
                kernels,
            }
        })
        .collect();
    m.gates = gates
        .iter()
        .map(|(k, ts)| {
            (
                k.to_string(),
                ts.iter().map(|t| t.parse().unwrap()).collect(),
            )
        })
        .collect();
    let json = out.with_extension("json");
    std::fs::write(&json, m.to_json()).unwrap();
    run(Command::new("objcopy")
        .arg(format!("--add-section=.kiln_manifest={}", json.display()))
        .arg(lib)
        .arg(out));
    out.to_path_buf()
}

/// A library that compiles its fp8 kernel only under `#if __CUDA_ARCH__ >= 890` (nvcc, matrix
/// 8.0 8.9 9.0+PTX: no `fp8_scale` in the sm_80 cubin), made kiln-built three ways. With the
/// gate declared (`fp8_scale` exists for sm_89, sm_90, compute_90) the audit is clean of
/// reach/arch/manifest findings, and the coverage row and the 8.0 cell say why; the same bytes
/// with the gate removed FAIL with `reach/matrix-hole` on sm_80; a gate that also declares sm_80
/// (which lacks the kernel) fails the same way, naming the gate.
#[test]
fn a_kiln_built_binary_honours_its_declared_arch_gates() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let src = d.join("fp8.cu");
    std::fs::write(
        &src,
        r#"
extern "C" __global__ void gemm(float *a, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) a[i] *= 2.0f; }
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 890
extern "C" __global__ void fp8_scale(float *a, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) a[i] += 1.0f; }
#endif
extern "C" void launch(float *a, int n) { gemm<<<1, 256>>>(a, n); }
"#,
    )
    .unwrap();
    let obj = d.join("fp8.o");
    run(Command::new(nvcc())
        .args(["-c", "-Xcompiler", "-fPIC", "-o"])
        .arg(&obj)
        .arg(&src)
        .args(["-gencode", "arch=compute_80,code=sm_80"])
        .args(["-gencode", "arch=compute_89,code=sm_89"])
        .args(["-gencode", "arch=compute_90,code=[sm_90,compute_90]"]));
    let cuda_lib = nvcc().parent().unwrap().join("../lib");
    let lib = d.join("libfp8.so");
    run(Command::new("g++")
        .arg("-shared")
        .arg("-o")
        .arg(&lib)
        .arg(&obj)
        .arg(format!("-L{}", cuda_lib.display()))
        .arg("-l:libcudart.so.13"));
    // The bytes nvcc wrote: fp8_scale everywhere but sm_80 (else this test proves nothing).
    let plain = audit(&lib, &Policy::default());
    let holders: Vec<String> = plain.binaries[0]
        .device
        .as_ref()
        .unwrap()
        .entries
        .iter()
        .filter(|e| e.kernels.iter().any(|k| k == "fp8_scale"))
        .map(|e| e.target.to_string())
        .collect();
    assert_eq!(holders, ["sm_89", "sm_90", "compute_90"], "nvcc's layout");

    let matrix = ["8.0", "8.9", "9.0+PTX"];
    let policy = Policy {
        expect_sass: Some(kiln_audit::parse_arch_list("80,89,90").unwrap()),
        expect_ptx: Some(kiln_audit::parse_arch_list("90").unwrap()),
        ..Policy::default()
    };
    let judged = |r: &Report| -> Vec<(String, String)> {
        r.findings
            .iter()
            .filter(|f| {
                ["reach/", "arch/", "manifest/"]
                    .iter()
                    .any(|p| f.rule.as_str().starts_with(p))
            })
            .map(|f| (f.rule.to_string(), f.message.clone()))
            .collect()
    };

    // (1) Declared: clean, and the report says why fp8_scale is absent on 8.0.
    let gate: &[&str] = &["sm_89", "sm_90", "compute_90"];
    let gated = with_kiln_manifest(
        &lib,
        &d.join("libgated.so"),
        &matrix,
        &[("fp8_scale", gate)],
    );
    let r = audit(&gated, &policy);
    assert_eq!(judged(&r), vec![], "{:?}", r.findings);
    assert_ne!(
        r.worst(),
        Some(kiln_audit::Severity::Error),
        "{:?}",
        r.findings
    );
    let b = &r.reach.binaries[0];
    assert!(b.strict);
    assert_eq!(b.specialised, 1);
    let at = |r: &Report, g: &str| {
        let i = r.reach.generations.iter().position(|x| x == g).unwrap();
        r.reach.binaries[0].cells[i].clone()
    };
    let c = at(&r, "8.0");
    assert_eq!(
        (
            c.path,
            c.holes_count,
            c.dispatched_count,
            c.unreached.clone()
        ),
        (ReachPath::Exact, 0, 1, vec!["fp8_scale".to_string()])
    );
    let row = r.coverage[0]
        .rows
        .iter()
        .find(|row| row.kernels == ["fp8_scale"])
        .unwrap();
    assert_eq!(
        row.gate.as_deref(),
        Some("gated: exists for sm_89, sm_90, compute_90 (declared)")
    );
    let json = serde_json::to_string(&r).unwrap();
    assert!(json.contains(r#""gate":"gated: exists for sm_89, sm_90, compute_90 (declared)""#));

    // (2) The same bytes, the gate removed: the hole the strict rule has always reported.
    let ungated = with_kiln_manifest(&lib, &d.join("libungated.so"), &matrix, &[]);
    let r = audit(&ungated, &policy);
    assert_eq!(r.worst(), Some(kiln_audit::Severity::Error));
    let found = judged(&r);
    assert!(
        found.iter().any(|(rule, m)| rule == "reach/matrix-hole"
            && m.contains("no sm_80 code: fp8_scale")
            && !m.contains("gated")),
        "{found:?}"
    );
    assert!(
        found
            .iter()
            .any(|(rule, m)| rule == "arch/kernel-missing-sass" && m.contains("fp8_scale")),
        "{found:?}"
    );
    assert_eq!(at(&r, "8.0").holes, ["fp8_scale"]);

    // (3) A gate declaring sm_80, which lacks the kernel: a hole, named with its gate.
    let wide: &[&str] = &["sm_80", "sm_89", "sm_90", "compute_90"];
    let lying = with_kiln_manifest(&lib, &d.join("libwide.so"), &matrix, &[("fp8_scale", wide)]);
    let r = audit(&lying, &policy);
    assert_eq!(r.worst(), Some(kiln_audit::Severity::Error));
    let holes: Vec<String> = judged(&r)
        .into_iter()
        .filter(|(rule, _)| rule == "reach/matrix-hole")
        .map(|(_, m)| m)
        .collect();
    assert_eq!(holes.len(), 1, "{holes:?}");
    assert!(
        holes[0].contains(
            "no sm_80 code: fp8_scale (gated: exists for sm_80, sm_89, sm_90, compute_90 (declared))"
        ),
        "{holes:?}"
    );
    assert_eq!(at(&r, "8.0").holes, ["fp8_scale"]);
}
