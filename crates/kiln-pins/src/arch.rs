//! The arch matrix: entries such as "8.0", "9.0a", "12.0f", "12.0+PTX".

use std::fmt;

use crate::PinsError;

/// Compute capabilities that exist (CUDA 13 numbering; sm_101 became sm_110). An entry outside
/// this list is a typo, not a new GPU: the list grows with the pinned toolkit.
const KNOWN_CAPABILITIES: &[(u32, u32)] = &[
    (7, 5),
    (8, 0),
    (8, 6),
    (8, 7),
    (8, 8),
    (8, 9),
    (9, 0),
    (10, 0),
    (10, 3),
    (11, 0),
    (12, 0),
    (12, 1),
];

/// `a`: arch-specific features, runs only on exactly that capability. `f`: family-portable
/// within one major (Blackwell and later).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Variant {
    Plain,
    ArchSpecific,
    Family,
}

impl Variant {
    /// "", "a" or "f", as nvcc, fatbinary and the matrix write it.
    pub fn suffix(self) -> &'static str {
        match self {
            Variant::Plain => "",
            Variant::ArchSpecific => "a",
            Variant::Family => "f",
        }
    }
}

/// One compute capability with its variant, e.g. 9.0a.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Arch {
    pub major: u32,
    pub minor: u32,
    pub variant: Variant,
}

impl Arch {
    /// The number nvcc and fatbinary use: 9.0 -> 90, 12.0 -> 120.
    pub fn number(&self) -> u32 {
        self.major * 10 + self.minor
    }

    pub fn suffix(&self) -> &'static str {
        self.variant.suffix()
    }

    /// The arch of a fatbin entry or cubin: its number (90, 120) and variant.
    pub fn from_number(number: u32, variant: Variant) -> Arch {
        Arch {
            major: number / 10,
            minor: number % 10,
            variant,
        }
    }

    /// "sm_90a"
    pub fn sm(&self) -> String {
        format!("sm_{}{}", self.number(), self.suffix())
    }

    /// "compute_90a"
    pub fn compute(&self) -> String {
        format!("compute_{}{}", self.number(), self.suffix())
    }

    /// "90a": the form fatbinary's `--image3 sm=` takes.
    pub fn short(&self) -> String {
        format!("{}{}", self.number(), self.suffix())
    }

    /// Parses "sm_90a", "compute_120", "90a" or "9.0a".
    pub fn parse_any(text: &str) -> Option<Arch> {
        let t = text
            .strip_prefix("sm_")
            .or_else(|| text.strip_prefix("compute_"))
            .unwrap_or(text);
        if t.contains('.') {
            return parse_capability(t).ok();
        }
        let (digits, variant) = split_variant(t);
        let n: u32 = digits.parse().ok()?;
        if digits.len() < 2 {
            return None;
        }
        Some(Arch {
            major: n / 10,
            minor: n % 10,
            variant,
        })
    }
}

impl fmt::Display for Arch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}{}", self.major, self.minor, self.suffix())
    }
}

#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum TargetKind {
    /// Machine code (a cubin) for exactly this arch.
    Sass,
    /// PTX for this virtual arch, JIT-compiled by the driver for newer GPUs.
    Ptx,
}

/// One thing to compile and to find in a fatbin: SASS or PTX for one arch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Target {
    pub arch: Arch,
    pub kind: TargetKind,
}

impl TargetKind {
    /// "sass" or "ptx" (the manifest's and the report's spelling).
    pub fn as_str(self) -> &'static str {
        match self {
            TargetKind::Sass => "sass",
            TargetKind::Ptx => "ptx",
        }
    }
}

impl fmt::Display for TargetKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Target {
    pub fn sass(arch: Arch) -> Target {
        Target {
            arch,
            kind: TargetKind::Sass,
        }
    }

    pub fn ptx(arch: Arch) -> Target {
        Target {
            arch,
            kind: TargetKind::Ptx,
        }
    }

    /// "sm_90" for SASS, "compute_120" for PTX.
    pub fn name(&self) -> String {
        match self.kind {
            TargetKind::Sass => self.arch.sm(),
            TargetKind::Ptx => self.arch.compute(),
        }
    }

    /// Parses a name as [`Target::name`] writes it ("sm_90a", "compute_120").
    pub fn parse(name: &str) -> Option<Target> {
        let (kind, rest) = if let Some(r) = name.strip_prefix("sm_") {
            (TargetKind::Sass, r)
        } else {
            (TargetKind::Ptx, name.strip_prefix("compute_")?)
        };
        if rest.contains('.') {
            return None;
        }
        Some(Target {
            arch: Arch::parse_any(rest)?,
            kind,
        })
    }

    /// A short column label: "90a" for SASS, "ptx120" for PTX.
    pub fn label(&self) -> String {
        match self.kind {
            TargetKind::Sass => self.arch.short(),
            TargetKind::Ptx => format!("ptx{}", self.arch.short()),
        }
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name())
    }
}

/// JSON and the manifest spell a target by its name ("sm_90a", "compute_120").
impl serde::Serialize for Target {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for Target {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Target, D::Error> {
        let name = String::deserialize(d)?;
        Target::parse(&name).ok_or_else(|| {
            serde::de::Error::custom(format!(
                "{name:?} is not a target (sm_NN[a|f] or compute_NN[a|f])"
            ))
        })
    }
}

/// One matrix entry: SASS for `arch`, plus PTX when `ptx`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MatrixEntry {
    pub arch: Arch,
    pub ptx: bool,
}

/// The validated arch matrix, in the order written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArchMatrix {
    entries: Vec<MatrixEntry>,
}

impl ArchMatrix {
    pub fn parse<S: AsRef<str>>(entries: &[S]) -> Result<ArchMatrix, PinsError> {
        if entries.is_empty() {
            return Err(PinsError::Invalid(
                "archs is empty: list at least one compute capability, e.g. [\"9.0\"]".into(),
            ));
        }
        let mut parsed: Vec<MatrixEntry> = Vec::new();
        for raw in entries {
            let raw = raw.as_ref();
            let entry = parse_entry(raw)?;
            if parsed.iter().any(|p| p.arch == entry.arch) {
                return Err(PinsError::BadArch {
                    entry: raw.to_string(),
                    reason: format!("{} is listed twice", entry.arch),
                });
            }
            parsed.push(entry);
        }
        Ok(ArchMatrix { entries: parsed })
    }

    pub fn entries(&self) -> &[MatrixEntry] {
        &self.entries
    }

    /// SASS targets in matrix order.
    pub fn sass(&self) -> impl Iterator<Item = Arch> + '_ {
        self.entries.iter().map(|e| e.arch)
    }

    /// Archs that also get PTX.
    pub fn ptx(&self) -> impl Iterator<Item = Arch> + '_ {
        self.entries.iter().filter(|e| e.ptx).map(|e| e.arch)
    }

    /// Every (arch, kind) the build produces and the audit expects: SASS first, then PTX.
    pub fn targets(&self) -> Vec<Target> {
        self.sass()
            .map(Target::sass)
            .chain(self.ptx().map(Target::ptx))
            .collect()
    }

    /// The highest capability in the matrix (what `cudaForwardCompat` PTX would be for).
    pub fn newest(&self) -> Arch {
        *self
            .sass()
            .collect::<Vec<_>>()
            .iter()
            .max()
            .expect("matrix is never empty")
    }
}

fn split_variant(t: &str) -> (&str, Variant) {
    if let Some(d) = t.strip_suffix('a') {
        (d, Variant::ArchSpecific)
    } else if let Some(d) = t.strip_suffix('f') {
        (d, Variant::Family)
    } else {
        (t, Variant::Plain)
    }
}

fn parse_entry(raw: &str) -> Result<MatrixEntry, PinsError> {
    let bad = |reason: String| PinsError::BadArch {
        entry: raw.to_string(),
        reason,
    };
    if raw.trim() != raw {
        return Err(bad("has leading or trailing whitespace".into()));
    }
    let (cap, ptx) = match raw.split_once('+') {
        None => (raw, false),
        Some((cap, "PTX")) => (cap, true),
        Some((_, other)) => {
            return Err(bad(format!(
                "unknown suffix \"+{other}\" (the only suffix is \"+PTX\", upper case)"
            )))
        }
    };
    let arch = parse_capability(cap).map_err(bad)?;
    Ok(MatrixEntry { arch, ptx })
}

fn parse_capability(cap: &str) -> Result<Arch, String> {
    let (digits, variant) = split_variant(cap);
    let (major, minor) = digits.split_once('.').ok_or_else(|| {
        format!("expected MAJOR.MINOR[a|f][+PTX], e.g. \"9.0\" or \"12.0+PTX\", got {cap:?}")
    })?;
    let num = |s: &str| -> Result<u32, String> {
        if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
            return Err(format!("{s:?} is not a number"));
        }
        s.parse::<u32>().map_err(|e| e.to_string())
    };
    let (major, minor) = (num(major)?, num(minor)?);
    if !KNOWN_CAPABILITIES.contains(&(major, minor)) {
        let known: Vec<String> = KNOWN_CAPABILITIES
            .iter()
            .map(|(a, b)| format!("{a}.{b}"))
            .collect();
        return Err(format!(
            "{major}.{minor} is not a compute capability (known: {})",
            known.join(", ")
        ));
    }
    match variant {
        Variant::ArchSpecific if major < 9 => {
            return Err(format!("{major}.{minor}a: `a` variants exist from 9.0 on"))
        }
        Variant::Family if major < 10 => {
            return Err(format!("{major}.{minor}f: `f` variants exist from 10.0 on"))
        }
        _ => {}
    }
    Ok(Arch {
        major,
        minor,
        variant,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(entries: &[&str]) -> String {
        ArchMatrix::parse(entries).unwrap_err().to_string()
    }

    #[test]
    fn parses_the_default_matrix() {
        let m = ArchMatrix::parse(&["8.0", "8.6", "8.9", "9.0", "10.0", "12.0+PTX"]).unwrap();
        let names: Vec<String> = m.targets().iter().map(Target::name).collect();
        assert_eq!(
            names,
            [
                "sm_80",
                "sm_86",
                "sm_89",
                "sm_90",
                "sm_100",
                "sm_120",
                "compute_120"
            ]
        );
        assert_eq!(m.newest().sm(), "sm_120");
    }

    #[test]
    fn suffixed_targets_are_expressible() {
        let m = ArchMatrix::parse(&["9.0a", "12.0f+PTX", "10.0f"]).unwrap();
        let names: Vec<String> = m.targets().iter().map(Target::name).collect();
        assert_eq!(names, ["sm_90a", "sm_120f", "sm_100f", "compute_120f"]);
        assert_eq!(m.entries()[0].arch.short(), "90a");
    }

    #[test]
    fn rejects_unknown_capability() {
        assert!(
            err(&["9.1"]).contains("9.1 is not a compute capability"),
            "{}",
            err(&["9.1"])
        );
    }

    #[test]
    fn rejects_lowercase_ptx_and_whitespace() {
        assert!(err(&["12.0+ptx"]).contains("+PTX"));
        assert!(err(&["12.0+PTX "]).contains("whitespace"));
        assert!(err(&["12.0+ptx "]).contains("12.0+ptx "));
    }

    #[test]
    fn rejects_duplicates_and_empty() {
        assert!(err(&["9.0", "8.0", "9.0+PTX"]).contains("listed twice"));
        assert!(err(&[]).contains("empty"));
    }

    #[test]
    fn rejects_malformed_entries() {
        for bad in ["90", "sm_90", "9.0b", "8.0a", "9.0f", "", "9.", ".0", "x.y"] {
            assert!(ArchMatrix::parse(&[bad]).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn parse_any_reads_tool_spellings() {
        assert_eq!(Arch::parse_any("sm_100f").unwrap().to_string(), "10.0f");
        assert_eq!(Arch::parse_any("compute_120").unwrap().sm(), "sm_120");
        assert_eq!(Arch::parse_any("90a").unwrap().sm(), "sm_90a");
        assert!(Arch::parse_any("sm_").is_none());
    }
}

#[cfg(test)]
mod target_tests {
    use super::*;

    #[test]
    fn target_names_round_trip() {
        let m = ArchMatrix::parse(&["8.0", "9.0a", "10.0f", "12.0+PTX"]).unwrap();
        for t in m.targets() {
            assert_eq!(Target::parse(&t.name()), Some(t), "{t}");
        }
        let t = Target::parse("compute_100f").unwrap();
        assert_eq!(
            (t.kind, t.arch.number(), t.arch.variant),
            (TargetKind::Ptx, 100, Variant::Family)
        );
        assert_eq!(t.label(), "ptx100f");
        assert_eq!(Target::parse("sm_90a").unwrap().label(), "90a");
        for bad in ["sm_9.0", "90", "sm_", "compute_x", "kind3_90"] {
            assert_eq!(Target::parse(bad), None, "{bad}");
        }
        assert_eq!(
            Arch::from_number(120, Variant::Plain),
            Arch::parse_any("12.0").unwrap()
        );
    }
}
