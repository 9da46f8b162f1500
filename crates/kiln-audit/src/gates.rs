//! Declared arch gates of a kiln-built binary: its build manifest's `gates`, each gated kernel
//! with the targets it exists for (a library that compiles fp8 kernels only under
//! `#if __CUDA_ARCH__ >= 890` declares it; kiln-build checks the declaration against the built
//! bytes). kiln's strict rule — every kernel on every target — expects a gated kernel only on
//! its targets. A gate is the only allowance a kiln-built binary gets, so the report names it
//! wherever it explains an absence, and wherever a gated kernel is still a hole.

use kiln_manifest::Manifest;

use crate::facts::{Binary, Target};

/// Target names one note lists; the count stays exact (an honest gate names a handful).
const TARGETS_LISTED: usize = 32;

/// The build manifest of a kiln-built binary: the strict rule and its gates apply.
pub fn manifest(binary: &Binary) -> Option<&Manifest> {
    binary.elf.as_ref()?.build_manifest.as_ref()
}

/// The targets `kernel`'s gate lists; None: not gated (it exists for every target).
pub fn of<'m>(m: &'m Manifest, kernel: &str) -> Option<&'m [Target]> {
    m.gates.get(kernel).map(Vec::as_slice)
}

/// A gate's targets (typed by the manifest: a name that is no target does not read).
pub fn targets(names: &[Target]) -> impl Iterator<Item = Target> + '_ {
    names.iter().copied()
}

/// "gated: exists for sm_89, sm_90, compute_90 (declared)".
pub fn note(names: &[Target]) -> String {
    let shown: Vec<String> = names
        .iter()
        .take(TARGETS_LISTED)
        .map(Target::name)
        .collect();
    let more = match names.len().saturating_sub(TARGETS_LISTED) {
        0 => String::new(),
        n => format!(" … ({n} more)"),
    };
    let list = if names.is_empty() {
        "no target".to_string()
    } else {
        shown.join(", ")
    };
    format!("gated: exists for {list}{more} (declared)")
}

/// `kernel`, followed by its gate's note when `m` gates it:
/// "fp8_scale (gated: exists for sm_89, sm_90 (declared))".
pub fn named(m: Option<&Manifest>, kernel: &str) -> String {
    match m.and_then(|m| of(m, kernel)) {
        Some(names) => format!("{kernel} ({})", note(names)),
        None => kernel.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notes_name_the_declared_targets_and_stay_bounded() {
        let names = ["sm_89", "sm_90", "compute_90"].map(|n| Target::parse(n).unwrap());
        assert_eq!(
            note(&names),
            "gated: exists for sm_89, sm_90, compute_90 (declared)"
        );
        let many: Vec<Target> = (10..50)
            .map(|i| Target::parse(&format!("sm_{i}")).unwrap())
            .collect();
        assert!(note(&many).ends_with("sm_41 … (8 more) (declared)"));
        assert_eq!(note(&[]), "gated: exists for no target (declared)");
        assert_eq!(targets(&names).collect::<Vec<_>>(), names);
    }
}
