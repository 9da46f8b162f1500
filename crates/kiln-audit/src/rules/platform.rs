//! What the target platform provides: manylinux system libraries, the NVIDIA driver's
//! libraries, and the glibc ceiling of each platform tag.

/// Libraries every manylinux platform provides (PEP 600 / auditwheel policy lists).
const MANYLINUX_LIBS: &[&str] = &[
    "libc.so.6",
    "libm.so.6",
    "libdl.so.2",
    "librt.so.1",
    "libpthread.so.0",
    "libutil.so.1",
    "libcrypt.so.1",
    "libnsl.so.1",
    "libresolv.so.2",
    "libgcc_s.so.1",
    "libstdc++.so.6",
    "ld-linux-x86-64.so.2",
    "ld-linux-aarch64.so.1",
    "libGL.so.1",
    "libX11.so.6",
    "libXext.so.6",
    "libXrender.so.1",
    "libICE.so.6",
    "libSM.so.6",
    "libglib-2.0.so.0",
    "libgobject-2.0.so.0",
    "libgthread-2.0.so.0",
    "libz.so.1",
    "libexpat.so.1",
];

/// Installed by the NVIDIA driver, matching the kernel module: never bundle these.
const DRIVER_LIBS: &[&str] = &[
    "libcuda.so.1",
    "libnvidia-ml.so.1",
    "libnvidia-ptxjitcompiler.so.1",
    "libnvidia-nvvm.so.4",
    "libcudadebugger.so.1",
    "libnvcuvid.so.1",
    "libnvidia-encode.so.1",
    "libnvidia-opencl.so.1",
    "libnvidia-fatbinaryloader.so",
];

pub fn is_system_lib(soname: &str) -> bool {
    MANYLINUX_LIBS.contains(&soname)
}

pub fn is_driver_lib(soname: &str) -> bool {
    DRIVER_LIBS.contains(&soname)
}

/// The unversioned development name of a driver library (`libcuda.so`), which exists only
/// as a link-time stub in the toolkit; at run time only `libcuda.so.1` is there.
pub fn driver_stub_for(soname: &str) -> Option<&'static str> {
    DRIVER_LIBS.iter().copied().find(|d| {
        d.rsplit_once(".so")
            .is_some_and(|(base, _)| format!("{base}.so") == soname)
            && *d != soname
    })
}

/// A member path looks like a bundled driver library (any `libcuda.so*`, `libnvidia-ml.so*` …).
pub fn bundled_driver_lib(file_name: &str) -> Option<&'static str> {
    DRIVER_LIBS.iter().copied().find(|d| {
        let base = d.split(".so").next().unwrap_or(d);
        file_name == base.to_string() + ".so" || file_name.starts_with(&format!("{base}.so."))
    })
}

pub fn is_libpython(soname: &str) -> bool {
    soname.starts_with("libpython")
}

/// Highest glibc a platform tag allows: manylinux_2_28_x86_64 -> (2, 28); legacy aliases too.
/// None for non-Linux or unknown tags (musllinux is not glibc).
pub fn glibc_ceiling(platform: &str) -> Option<(u32, u32)> {
    if platform.starts_with("manylinux1_") {
        return Some((2, 5));
    }
    if platform.starts_with("manylinux2010_") {
        return Some((2, 12));
    }
    if platform.starts_with("manylinux2014_") {
        return Some((2, 17));
    }
    let rest = platform.strip_prefix("manylinux_")?;
    let mut parts = rest.splitn(3, '_');
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    parts.next()?;
    Some((major, minor))
}

/// Newest GLIBCXX and CXXABI symbol versions each manylinux policy allows, per glibc minor:
/// (glibc minor, x86_64 GLIBCXX, x86_64 CXXABI, aarch64 GLIBCXX, aarch64 CXXABI). From
/// auditwheel's policy file, src/auditwheel/policy/manylinux-policy.json at pypa/auditwheel
/// 86154d15 (2026-08-17): the highest numeric entry of each list.
const CXX_POLICIES: &[(u32, &str, &str, &str, &str)] = &[
    (5, "3.4.8", "1.3.1", "", ""),
    (12, "3.4.13", "1.3.3", "", ""),
    (17, "3.4.19", "1.3.7", "3.4.19", "1.3.7"),
    (24, "3.4.22", "1.3.10", "3.4.22", "1.3.10"),
    (26, "3.4.22", "1.3.10", "3.4.24", "1.3.11"),
    (27, "3.4.24", "1.3.11", "3.4.24", "1.3.11"),
    (28, "3.4.24", "1.3.11", "3.4.24", "1.3.11"),
    (31, "3.4.28", "1.3.12", "3.4.28", "1.3.12"),
    (34, "3.4.29", "1.3.13", "3.4.29", "1.3.13"),
    (35, "3.4.30", "1.3.13", "3.4.30", "1.3.13"),
    (36, "3.4.30", "1.3.13", "3.4.30", "1.3.13"),
    (37, "3.4.30", "1.3.13", "3.4.30", "1.3.13"),
    (38, "3.4.30", "1.3.13", "3.4.30", "1.3.13"),
    (39, "3.4.33", "1.3.15", "3.4.33", "1.3.15"),
    (40, "3.4.33", "1.3.15", "3.4.33", "1.3.15"),
    (41, "3.4.33", "1.3.15", "3.4.33", "1.3.15"),
];

/// The newest (GLIBCXX, CXXABI) a manylinux platform tag guarantees: the policy of the highest
/// glibc minor at or below the tag's (a manylinux_2_29 system has at least 2_28's libstdc++).
/// None for non-manylinux tags and architectures the policy file does not list here.
pub fn cxx_ceiling(platform: &str) -> Option<(&'static str, &'static str)> {
    let (major, minor) = glibc_ceiling(platform)?;
    if major != 2 {
        return None;
    }
    let aarch64 = platform.ends_with("_aarch64");
    if !aarch64 && !platform.ends_with("_x86_64") {
        return None;
    }
    let row = CXX_POLICIES.iter().rev().find(|r| r.0 <= minor)?;
    let (glibcxx, cxxabi) = if aarch64 {
        (row.3, row.4)
    } else {
        (row.1, row.2)
    };
    (!glibcxx.is_empty()).then_some((glibcxx, cxxabi))
}

/// The glibc minors of the manylinux policies auditwheel lists for `arch` ("x86_64",
/// "aarch64"), oldest first ([`CXX_POLICIES`]); empty for other architectures.
pub fn manylinux_policies(arch: &str) -> impl Iterator<Item = u32> + '_ {
    CXX_POLICIES
        .iter()
        .filter(move |r| match arch {
            "x86_64" => !r.1.is_empty(),
            "aarch64" => !r.3.is_empty(),
            _ => false,
        })
        .map(|r| r.0)
}

/// The PEP 513/571/599 name of a manylinux_2_X policy, for the glibc minors that have one.
pub fn legacy_alias(glibc_minor: u32) -> Option<&'static str> {
    match glibc_minor {
        5 => Some("manylinux1"),
        12 => Some("manylinux2010"),
        17 => Some("manylinux2014"),
        _ => None,
    }
}

/// The platform part of "py-abi-platform".
pub fn platform_of(tag: &str) -> &str {
    tag.rsplit('-').next().unwrap_or(tag)
}

/// The ELF `e_machine` a platform tag's architecture runs (the manylinux/musllinux/linux
/// architectures; values from the ELF gABI / <elf.h>). None: the tag names no architecture
/// (`any`) or one this table does not know.
pub fn machine_for(platform: &str) -> Option<(u16, &'static str)> {
    const ARCHES: &[(&str, u16, &str)] = &[
        ("x86_64", 62, "EM_X86_64"),
        ("aarch64", 183, "EM_AARCH64"),
        ("i686", 3, "EM_386"),
        ("ppc64le", 21, "EM_PPC64"),
        ("ppc64", 21, "EM_PPC64"),
        ("s390x", 22, "EM_S390"),
        ("armv7l", 40, "EM_ARM"),
        ("riscv64", 243, "EM_RISCV"),
    ];
    if !(platform.starts_with("manylinux")
        || platform.starts_with("musllinux")
        || platform.starts_with("linux_"))
    {
        return None;
    }
    ARCHES
        .iter()
        .find(|(arch, _, _)| platform.ends_with(&format!("_{arch}")))
        .map(|(_, m, name)| (*m, *name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ceilings() {
        assert_eq!(glibc_ceiling("manylinux_2_28_x86_64"), Some((2, 28)));
        assert_eq!(glibc_ceiling("manylinux2014_aarch64"), Some((2, 17)));
        assert_eq!(glibc_ceiling("linux_x86_64"), None);
        assert_eq!(glibc_ceiling("manylinux_2_x86"), None);
    }

    #[test]
    fn cxx_ceilings_follow_auditwheel_policies() {
        assert_eq!(
            cxx_ceiling("manylinux_2_28_x86_64"),
            Some(("3.4.24", "1.3.11"))
        );
        assert_eq!(
            cxx_ceiling("manylinux2014_x86_64"),
            Some(("3.4.19", "1.3.7"))
        );
        assert_eq!(
            cxx_ceiling("manylinux_2_29_x86_64"),
            Some(("3.4.24", "1.3.11"))
        );
        assert_eq!(
            cxx_ceiling("manylinux_2_26_aarch64"),
            Some(("3.4.24", "1.3.11"))
        );
        assert_eq!(
            cxx_ceiling("manylinux_2_34_x86_64"),
            Some(("3.4.29", "1.3.13"))
        );
        assert_eq!(cxx_ceiling("linux_x86_64"), None);
        assert_eq!(cxx_ceiling("manylinux_2_17_ppc64le"), None);
    }

    #[test]
    fn machines() {
        assert_eq!(machine_for("manylinux_2_17_x86_64").unwrap().0, 62);
        assert_eq!(machine_for("manylinux2014_aarch64").unwrap().0, 183);
        assert_eq!(machine_for("musllinux_1_2_i686").unwrap().0, 3);
        assert_eq!(machine_for("any"), None);
        assert_eq!(machine_for("macosx_11_0_arm64"), None);
    }

    #[test]
    fn driver_names() {
        assert_eq!(driver_stub_for("libcuda.so"), Some("libcuda.so.1"));
        assert_eq!(driver_stub_for("libcuda.so.1"), None);
        assert_eq!(bundled_driver_lib("libcuda.so.1"), Some("libcuda.so.1"));
        assert_eq!(
            bundled_driver_lib("libcuda.so.580.95"),
            Some("libcuda.so.1")
        );
        assert_eq!(bundled_driver_lib("libcudart.so.13"), None);
    }
}
