//! The few facts kiln needs from PTX text: ISA version, target and kernel entries.

use crate::{Error, Result};

/// What kiln reads from one PTX text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PtxInfo {
    /// `.version 9.0` -> (9, 0)
    pub isa: (u32, u32),
    /// `.target sm_120` -> "sm_120" (first word; `, debug` etc. dropped)
    pub target: String,
    /// `.entry` names, sorted.
    pub kernels: Vec<String>,
}

/// `sm_90a` -> (90, ArchSpecific): a SASS target name read with kiln-arch's one grammar
/// ([`kiln_arch::Target::parse`]); None for anything else (`compute_90`, `sm_9x`).
pub fn target_arch(target: &str) -> Option<(u32, kiln_arch::Variant)> {
    let t = kiln_arch::Target::parse(target)?;
    (t.kind == kiln_arch::TargetKind::Sass).then(|| (t.arch.number(), t.arch.variant))
}

/// Reads `.version`, `.target` and the `.entry` names.
pub fn parse(text: &str) -> Result<PtxInfo> {
    parse_bytes(text.as_bytes())
}

/// [`parse`] over the bytes as stored (PTX is ASCII; names are taken lossily): `.version` and
/// `.target` from the first lines that carry them, `.entry` names from one substring search
/// over the whole text (cuDNN's PTX runs to hundreds of MB; a per-line search was a tenth of
/// the audit's time).
pub fn parse_bytes(text: &[u8]) -> Result<PtxInfo> {
    let mut isa = None;
    let mut target = None;
    for line in text.split(|&b| b == b'\n') {
        if isa.is_some() && target.is_some() {
            break;
        }
        let line = line.trim_ascii();
        if let Some(rest) = line.strip_prefix(b".version") {
            let v = String::from_utf8_lossy(rest.trim_ascii()).into_owned();
            let bad = || Error::Ptx(format!("bad .version {v:?}"));
            let (a, b) = v.split_once('.').ok_or_else(bad)?;
            let num = |s: &str| s.trim().parse::<u32>().map_err(|_| bad());
            isa = Some((num(a)?, num(b)?));
        } else if let Some(rest) = line.strip_prefix(b".target") {
            let first = rest
                .split(|&b| b == b',')
                .next()
                .unwrap_or(b"")
                .trim_ascii();
            target = Some(String::from_utf8_lossy(first).into_owned());
        }
    }
    // A set of borrowed names: a text repeating one `.entry` a million times costs one name.
    let mut kernels = std::collections::BTreeSet::new();
    for at in memchr::memmem::find_iter(text, b".entry ") {
        // `.visible .entry name(` or `.entry name (`; the name ends at '(' or whitespace.
        let rest = text[at + ".entry ".len()..].trim_ascii_start();
        let end = rest
            .iter()
            .position(|&c| c == b'(' || c.is_ascii_whitespace())
            .unwrap_or(rest.len());
        if end > 0 {
            kernels.insert(&rest[..end]);
        }
    }
    let kernels = kernels
        .into_iter()
        .map(|k| String::from_utf8_lossy(k).into_owned())
        .collect();
    Ok(PtxInfo {
        isa: isa.ok_or_else(|| Error::Ptx("no .version directive".into()))?,
        target: target.ok_or_else(|| Error::Ptx("no .target directive".into()))?,
        kernels,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_version_target_and_entries() {
        let text = "//\n.version 9.0\n.target sm_120\n.address_size 64\n\n.visible .entry vecadd(\n.param .u64 a\n)\n.entry _Z3addIfEvv (\n";
        let info = parse(text).unwrap();
        assert_eq!(info.isa, (9, 0));
        assert_eq!(info.target, "sm_120");
        assert_eq!(info.kernels, ["_Z3addIfEvv", "vecadd"]);
    }

    #[test]
    fn targets_name_number_and_variant() {
        use kiln_arch::Variant;
        assert_eq!(target_arch("sm_120"), Some((120, Variant::Plain)));
        assert_eq!(target_arch("sm_90a"), Some((90, Variant::ArchSpecific)));
        assert_eq!(target_arch("sm_100f"), Some((100, Variant::Family)));
        assert_eq!(target_arch("compute_90"), None);
        assert_eq!(target_arch("sm_"), None);
        assert_eq!(target_arch("sm_9x"), None);
        assert_eq!(target_arch("sm_+90"), None);
        assert_eq!(target_arch("sm_9.0"), None);
        assert_eq!(target_arch("90"), None);
    }

    #[test]
    fn missing_directives_are_errors() {
        assert!(parse(".target sm_90\n").is_err());
        assert!(parse(".version 9.x\n.target sm_90").is_err());
        assert!(parse(".version 9.0\n").is_err());
    }
}
