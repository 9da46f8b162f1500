//! The best manylinux tag a set of binaries could carry, computed the way auditwheel does: the
//! newest GLIBC_, GLIBCXX_ and CXXABI_ symbol versions the binaries need, against each
//! manylinux policy's symbol-version lists; the oldest policy that admits them all wins. The
//! policy lists are auditwheel's (`src/auditwheel/policy/manylinux-policy.json`, pypa/auditwheel
//! 86154d15, kept in `rules/platform.rs`). auditwheel also demands that every NEEDED be on the
//! policy's library allow-list (it bundles the rest on `repair`); the linkage rules judge that.
//! A view for the report, next to the tags the wheel declares; it decides no finding.

use serde::Serialize;

use crate::facts::{Binary, ElfFacts, WheelMeta};
use crate::rules::platform;

/// One group of binaries (a wheel, one distribution of a directory, or the loose files): the
/// platform tags it declares and the best manylinux tag its binaries allow.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct ManylinuxTag {
    /// The distribution (`<name>-<version>.dist-info`); None for a bare ELF, and for the files
    /// of a directory that no RECORD lists.
    pub dist_info: Option<String>,
    /// ELF binaries judged.
    pub binaries: usize,
    /// The platform tags the WHEEL file (and file name) declare, deduplicated.
    pub declared: Vec<String>,
    /// The oldest manylinux policy whose symbol versions admit every binary, e.g.
    /// `manylinux_2_28_x86_64`; None when none does or the architecture is not in the table
    /// (`why` says which).
    pub best: Option<String>,
    /// The legacy alias of `best` (`manylinux2014_x86_64` for 2_17), when it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub alias: Option<String>,
    /// The newest symbol versions needed: `GLIBC_2.34`, `GLIBCXX_3.4.30`, `CXXABI_1.3.13`.
    pub needs: Vec<String>,
    /// The binary that sets the glibc floor (the newest GLIBC_ needed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limited_by: Option<String>,
    /// Why there is no best tag.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
}

/// The architecture names of the policy table (auditwheel's keys) for an ELF `e_machine`.
fn arch_of(machine: u16) -> Option<&'static str> {
    match machine {
        62 => Some("x86_64"),
        183 => Some("aarch64"),
        _ => None,
    }
}

/// The best tag for `binaries` (ELF only; a bare fatbin needs nothing), declared by `meta`.
pub fn of(meta: Option<&WheelMeta>, binaries: &[&Binary]) -> ManylinuxTag {
    let elfs: Vec<(&Binary, &ElfFacts)> = binaries
        .iter()
        .filter_map(|b| b.elf.as_ref().map(|e| (*b, e)))
        .collect();
    let needs = Needs::of(&elfs);
    let mut tag = ManylinuxTag {
        dist_info: meta.and_then(|m| m.dist_info.first().cloned()),
        binaries: elfs.len(),
        declared: declared_platforms(meta),
        best: None,
        alias: None,
        needs: needs.names(),
        limited_by: needs.glibc.map(|(_, p)| p.to_string()),
        why: None,
    };
    let arch = match single_arch(&elfs) {
        SingleArch::Known(arch) => arch,
        SingleArch::Not(why) => {
            tag.why = Some(why);
            return tag;
        }
    };
    match platform::manylinux_policies(arch).find(|m| needs.admitted_by(*m, arch)) {
        Some(minor) => {
            tag.alias = platform::legacy_alias(minor).map(|a| format!("{a}_{arch}"));
            tag.best = Some(format!("manylinux_2_{minor}_{arch}"));
        }
        None => {
            tag.why = Some(format!(
                "needs {}: newer than any manylinux policy auditwheel lists",
                tag.needs.join(", ")
            ));
        }
    }
    tag
}

/// The platforms the wheel's tags (WHEEL and the file name) declare, each once, in order.
fn declared_platforms(meta: Option<&WheelMeta>) -> Vec<String> {
    let mut declared: Vec<String> = Vec::new();
    if let Some(m) = meta {
        let tags = m.tags.iter().chain(m.filename.iter().flat_map(|f| &f.tags));
        for t in tags {
            let p = platform::platform_of(t).to_string();
            if !declared.contains(&p) {
                declared.push(p);
            }
        }
    }
    declared
}

/// The architecture the ELFs share, or why no manylinux tag applies.
enum SingleArch {
    /// One architecture, in auditwheel's policy table.
    Known(&'static str),
    /// No ELF, several architectures, or one the table lacks: the report's `why`.
    Not(String),
}

fn single_arch(elfs: &[(&Binary, &ElfFacts)]) -> SingleArch {
    let mut machines: Vec<u16> = elfs.iter().map(|(_, e)| e.machine).collect();
    machines.sort_unstable();
    machines.dedup();
    match machines.as_slice() {
        [] => SingleArch::Not("no ELF binary".into()),
        [m] => match arch_of(*m) {
            Some(arch) => SingleArch::Known(arch),
            None => SingleArch::Not(format!(
                "e_machine {m} is not in auditwheel's manylinux policy table as kiln carries it (x86_64, aarch64)"
            )),
        },
        _ => SingleArch::Not(format!("binaries of {} architectures", machines.len())),
    }
}

/// The newest symbol versions the ELFs need together.
struct Needs<'a> {
    /// The newest GLIBC_ version, with the binary that needs it.
    glibc: Option<((u32, u32), &'a str)>,
    glibcxx: Option<String>,
    cxxabi: Option<String>,
}

impl<'a> Needs<'a> {
    fn of(elfs: &[(&'a Binary, &ElfFacts)]) -> Needs<'a> {
        let newest = |key: fn(&ElfFacts) -> Option<&String>| {
            elfs.iter()
                .filter_map(|(_, e)| key(e))
                .max_by_key(|v| crate::read::elf::version_key(v))
                .cloned()
        };
        Needs {
            glibc: elfs
                .iter()
                .filter_map(|(b, e)| e.max_glibc.map(|g| (g, b.path.as_str())))
                .max_by_key(|(g, _)| *g),
            glibcxx: newest(|e| e.max_glibcxx.as_ref()),
            cxxabi: newest(|e| e.max_cxxabi.as_ref()),
        }
    }

    /// As the report lists them: `GLIBC_2.34`, `GLIBCXX_3.4.30`, `CXXABI_1.3.13`.
    fn names(&self) -> Vec<String> {
        let mut needs = Vec::new();
        if let Some(((a, b), _)) = self.glibc {
            needs.push(format!("GLIBC_{a}.{b}"));
        }
        needs.extend(self.glibcxx.iter().map(|v| format!("GLIBCXX_{v}")));
        needs.extend(self.cxxabi.iter().map(|v| format!("CXXABI_{v}")));
        needs
    }

    /// Whether `manylinux_2_{minor}_{arch}` guarantees all of them.
    fn admitted_by(&self, minor: u32, arch: &str) -> bool {
        let plat = format!("manylinux_2_{minor}_{arch}");
        let Some((max_cxx, max_abi)) = platform::cxx_ceiling(&plat) else {
            return false;
        };
        let within = |have: &Option<String>, max: &str| {
            have.as_deref().is_none_or(|h| {
                crate::read::elf::version_key(h) <= crate::read::elf::version_key(max)
            })
        };
        self.glibc.is_none_or(|((a, b), _)| (a, b) <= (2, minor))
            && within(&self.glibcxx, max_cxx)
            && within(&self.cxxabi, max_abi)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::ElfFacts;

    fn elf(glibc: (u32, u32), cxx: Option<&str>, abi: Option<&str>) -> Binary {
        let mut e =
            crate::read::elf::read(&std::fs::read(std::env::current_exe().unwrap()).unwrap())
                .unwrap();
        e.max_glibc = Some(glibc);
        e.max_glibcxx = cxx.map(str::to_string);
        e.max_cxxabi = abi.map(str::to_string);
        e.machine = 62;
        Binary {
            path: format!("lib_{}_{}.so", glibc.0, glibc.1),
            size: 1,
            elf: Some::<ElfFacts>(e),
            device: None,
            relocatable: None,
            elf_error: None,
            device_error: None,
        }
    }

    /// Values from auditwheel's policy file: 2.17 with GLIBCXX_3.4.19 is manylinux2014; a
    /// GLIBCXX_3.4.20 pushes to 2_24 (its first policy listing 3.4.20+); GLIBC_2.34 is 2_34;
    /// the newest of several binaries decides, and names the binary.
    #[test]
    fn best_tag_follows_the_newest_symbol_versions() {
        let a = elf((2, 17), Some("3.4.19"), Some("1.3.7"));
        let t = of(None, &[&a]);
        assert_eq!(t.best.as_deref(), Some("manylinux_2_17_x86_64"), "{t:?}");
        assert_eq!(t.alias.as_deref(), Some("manylinux2014_x86_64"));
        let b = elf((2, 17), Some("3.4.20"), None);
        assert_eq!(
            of(None, &[&a, &b]).best.as_deref(),
            Some("manylinux_2_24_x86_64")
        );
        let c = elf((2, 34), None, None);
        let t = of(None, &[&a, &c]);
        assert_eq!(t.best.as_deref(), Some("manylinux_2_34_x86_64"));
        assert_eq!(t.limited_by.as_deref(), Some("lib_2_34.so"));
        assert_eq!(t.needs[0], "GLIBC_2.34");
        let d = elf((2, 99), None, None);
        let t = of(None, &[&d]);
        assert_eq!(t.best, None);
        assert!(t.why.unwrap().contains("GLIBC_2.99"));
    }
}
