//! The one compatibility rule: does code built for a target run on a GPU of a given compute
//! capability, and how. The doctor ("which target would this GPU run") and the audit's reach
//! table ("how does each kernel get onto each generation") both ask [`runs_on`]; sources for
//! the rule: docs/reach.md.

use crate::{Target, TargetKind, Variant};

/// How code for one target gets onto a GPU, best first (the driver prefers SASS over a JIT).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Runs {
    /// SASS for exactly this capability (any variant).
    Exact,
    /// Plain SASS of the same major and a lower minor (binary compatible).
    Compatible,
    /// `f` SASS of the same family (same major, lower minor).
    Family,
    /// PTX the driver JIT-compiles at load time (whether the driver's ISA ceiling admits it
    /// is a separate question: [`crate::oldest_driver_for_ptx_isa`]).
    Jit,
}

/// Does code built for `target` run on a GPU of capability `major.minor`, and how? None: it
/// does not ("no kernel image is available for execution on the device").
///
/// - SASS: exact capability, any variant; plain SASS also on the same major with a higher
///   minor; `f` SASS likewise (family); `a` SASS on exactly its capability only.
/// - PTX: plain PTX JITs to any capability at or above its own (across majors); `a` PTX only
///   to exactly its capability; `f` PTX within its major (so compute_120 never reaches sm_100).
pub fn runs_on(target: Target, major: u32, minor: u32) -> Option<Runs> {
    let a = target.arch;
    let same = a.major == major && a.minor == minor;
    let family = a.major == major && a.minor <= minor;
    match target.kind {
        TargetKind::Sass => match a.variant {
            _ if same => Some(Runs::Exact),
            Variant::Plain if family => Some(Runs::Compatible),
            Variant::Family if family => Some(Runs::Family),
            _ => None,
        },
        TargetKind::Ptx => {
            let runs = match a.variant {
                Variant::Plain => (a.major, a.minor) <= (major, minor),
                Variant::ArchSpecific => same,
                Variant::Family => family,
            };
            runs.then_some(Runs::Jit)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(name: &str) -> Target {
        name.parse().unwrap()
    }

    #[test]
    fn sass_rules() {
        assert_eq!(runs_on(t("sm_90a"), 9, 0), Some(Runs::Exact));
        assert_eq!(runs_on(t("sm_80"), 8, 9), Some(Runs::Compatible));
        assert_eq!(runs_on(t("sm_100f"), 10, 3), Some(Runs::Family));
        assert_eq!(runs_on(t("sm_100a"), 10, 3), None);
        assert_eq!(
            runs_on(t("sm_90"), 10, 0),
            None,
            "SASS never crosses a major"
        );
        assert_eq!(runs_on(t("sm_86"), 8, 0), None, "nor runs on a lower minor");
    }

    #[test]
    fn ptx_rules() {
        assert_eq!(runs_on(t("compute_80"), 12, 0), Some(Runs::Jit));
        assert_eq!(runs_on(t("compute_120"), 10, 0), None);
        assert_eq!(runs_on(t("compute_90a"), 9, 0), Some(Runs::Jit));
        assert_eq!(runs_on(t("compute_90a"), 10, 0), None);
        assert_eq!(runs_on(t("compute_100f"), 10, 3), Some(Runs::Jit));
        assert_eq!(runs_on(t("compute_100f"), 12, 0), None);
    }
}
