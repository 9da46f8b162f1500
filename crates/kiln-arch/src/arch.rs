//! The arch matrix grammar and the target names: entries such as "8.0", "9.0a", "12.0f",
//! "12.0+PTX"; targets such as "sm_90a", "compute_120".

use std::fmt;
use std::str::FromStr;

/// Compute capabilities that exist (CUDA 13 numbering; sm_101 became sm_110). An entry outside
/// this list is a typo, not a new GPU: the list grows with the pinned toolkit.
pub const KNOWN_CAPABILITIES: &[(u32, u32)] = &[
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

/// Why a matrix, an entry, an arch or a target name was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ArchError {
    /// The matrix lists nothing.
    Empty,
    /// One matrix entry (or capability) is malformed, unknown or listed twice.
    BadEntry {
        /// The entry as written.
        entry: String,
        /// What is wrong with it.
        reason: String,
    },
    /// Not a target name (`sm_NN[a|f]` or `compute_NN[a|f]`).
    BadTarget(String),
    /// Not a target kind (`sass` or `ptx`).
    BadKind(String),
}

impl fmt::Display for ArchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ArchError::Empty => {
                f.write_str("archs is empty: list at least one compute capability, e.g. [\"9.0\"]")
            }
            ArchError::BadEntry { entry, reason } => {
                write!(f, "arch matrix entry {entry:?}: {reason}")
            }
            ArchError::BadTarget(name) => write!(
                f,
                "{name:?} is not a target (sm_NN[a|f] or compute_NN[a|f])"
            ),
            ArchError::BadKind(kind) => {
                write!(f, "{kind:?} is not a target kind (\"sass\" or \"ptx\")")
            }
        }
    }
}

impl std::error::Error for ArchError {}

/// `a`: arch-specific features, runs only on exactly that capability. `f`: family-portable
/// within one major (Blackwell and later).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Variant {
    /// No suffix: runs on this capability and (same major) newer minors.
    Plain,
    /// `a`: arch-specific instructions, exactly this capability.
    ArchSpecific,
    /// `f`: family-portable, the same major with an equal or higher minor.
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
    /// 9 of 9.0a.
    pub major: u32,
    /// 0 of 9.0a.
    pub minor: u32,
    /// `a` of 9.0a.
    pub variant: Variant,
}

impl Arch {
    /// The number nvcc and fatbinary use: 9.0 -> 90, 12.0 -> 120.
    pub fn number(&self) -> u32 {
        self.major * 10 + self.minor
    }

    /// "", "a" or "f".
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
        // Digits only: `u32::from_str` would also take a sign ("sm_+90").
        if digits.len() < 2 || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let n: u32 = digits.parse().ok()?;
        Some(Arch {
            major: n / 10,
            minor: n % 10,
            variant,
        })
    }
}

/// "9.0a": the matrix spelling, without `+PTX`.
impl fmt::Display for Arch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}{}", self.major, self.minor, self.suffix())
    }
}

/// Parses the matrix spelling of a capability, "9.0a" (no `+PTX`).
impl FromStr for Arch {
    type Err = ArchError;

    fn from_str(s: &str) -> Result<Arch, ArchError> {
        parse_capability(s).map_err(|reason| ArchError::BadEntry {
            entry: s.to_string(),
            reason: reason.to_string(),
        })
    }
}

/// SASS (a cubin) or PTX.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TargetKind {
    /// Machine code (a cubin) for exactly this arch.
    Sass,
    /// PTX for this virtual arch, JIT-compiled by the driver for newer GPUs.
    Ptx,
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

/// Parses "sass" or "ptx".
impl FromStr for TargetKind {
    type Err = ArchError;

    fn from_str(s: &str) -> Result<TargetKind, ArchError> {
        match s {
            "sass" => Ok(TargetKind::Sass),
            "ptx" => Ok(TargetKind::Ptx),
            _ => Err(ArchError::BadKind(s.to_string())),
        }
    }
}

/// One thing to compile and to find in a fatbin: SASS or PTX for one arch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Target {
    /// The (virtual, for PTX) arch.
    pub arch: Arch,
    /// SASS or PTX.
    pub kind: TargetKind,
}

impl Target {
    /// SASS for `arch`.
    pub fn sass(arch: Arch) -> Target {
        Target {
            arch,
            kind: TargetKind::Sass,
        }
    }

    /// PTX for `arch`.
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

/// The target's name, "sm_90a" or "compute_120" (also its JSON spelling).
impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name())
    }
}

/// Parses a name as [`Target::name`] writes it.
impl FromStr for Target {
    type Err = ArchError;

    fn from_str(s: &str) -> Result<Target, ArchError> {
        Target::parse(s).ok_or_else(|| ArchError::BadTarget(s.to_string()))
    }
}

/// One matrix entry: SASS for `arch`, plus PTX when `ptx`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MatrixEntry {
    /// The capability SASS is built for.
    pub arch: Arch,
    /// `+PTX`: PTX for the same arch as well.
    pub ptx: bool,
}

impl MatrixEntry {
    /// The targets this entry asks for: SASS, then PTX when `+PTX`.
    pub fn targets(&self) -> impl Iterator<Item = Target> {
        let ptx = self.ptx.then(|| Target::ptx(self.arch));
        std::iter::once(Target::sass(self.arch)).chain(ptx)
    }
}

/// "9.0a", "12.0+PTX": the matrix spelling (what Cargo.toml and the manifest write).
impl fmt::Display for MatrixEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{}", self.arch, if self.ptx { "+PTX" } else { "" })
    }
}

/// The matrix entry grammar, `MAJOR.MINOR[a|f][+PTX]`: no whitespace, `+PTX` upper case, a
/// known capability, `a` from 9.0 and `f` from 10.0 on.
impl FromStr for MatrixEntry {
    type Err = ArchError;

    fn from_str(raw: &str) -> Result<MatrixEntry, ArchError> {
        let bad = |reason: String| ArchError::BadEntry {
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
        let arch = parse_capability(cap).map_err(|e| bad(e.to_string()))?;
        Ok(MatrixEntry { arch, ptx })
    }
}

/// The validated arch matrix, in the order written: not empty, each capability once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArchMatrix {
    entries: Vec<MatrixEntry>,
}

impl ArchMatrix {
    /// Parses the entries as written (Cargo.toml's `archs`), in order: the first malformed
    /// or repeated entry is the error.
    pub fn parse<S: AsRef<str>>(entries: &[S]) -> Result<ArchMatrix, ArchError> {
        let mut matrix = ArchMatrix::empty(entries.len())?;
        for raw in entries {
            let raw = raw.as_ref();
            matrix.push(raw.parse()?, raw)?;
        }
        Ok(matrix)
    }

    /// Validates entries that are already typed (e.g. read from a build manifest).
    pub fn new(entries: Vec<MatrixEntry>) -> Result<ArchMatrix, ArchError> {
        let mut matrix = ArchMatrix::empty(entries.len())?;
        for entry in entries {
            matrix.push(entry, &entry.to_string())?;
        }
        Ok(matrix)
    }

    fn empty(len: usize) -> Result<ArchMatrix, ArchError> {
        if len == 0 {
            return Err(ArchError::Empty);
        }
        Ok(ArchMatrix {
            entries: Vec::with_capacity(len),
        })
    }

    fn push(&mut self, entry: MatrixEntry, raw: &str) -> Result<(), ArchError> {
        if self.entries.iter().any(|p| p.arch == entry.arch) {
            return Err(ArchError::BadEntry {
                entry: raw.to_string(),
                reason: format!("{} is listed twice", entry.arch),
            });
        }
        self.entries.push(entry);
        Ok(())
    }

    /// The entries in the order written.
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
        self.sass().max().expect("matrix is never empty")
    }
}

/// The entries, space-separated: "8.0 9.0a 12.0+PTX".
impl fmt::Display for ArchMatrix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, e) in self.entries.iter().enumerate() {
            if i > 0 {
                f.write_str(" ")?;
            }
            e.fmt(f)?;
        }
        Ok(())
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

/// Why a capability ("9.0a") does not parse: the `reason` of [`ArchError::BadEntry`].
#[derive(Debug)]
enum CapabilityError {
    /// No `MAJOR.MINOR`.
    Shape(String),
    /// A part that is not a number.
    NotANumber(String),
    /// A number too large.
    Number(std::num::ParseIntError),
    /// Not in [`KNOWN_CAPABILITIES`].
    Unknown(u32, u32),
    /// An `a` variant before 9.0.
    ArchSpecificTooOld(u32, u32),
    /// An `f` variant before 10.0.
    FamilyTooOld(u32, u32),
}

impl fmt::Display for CapabilityError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CapabilityError::Shape(cap) => write!(
                f,
                "expected MAJOR.MINOR[a|f][+PTX], e.g. \"9.0\" or \"12.0+PTX\", got {cap:?}"
            ),
            CapabilityError::NotANumber(s) => write!(f, "{s:?} is not a number"),
            CapabilityError::Number(e) => e.fmt(f),
            CapabilityError::Unknown(major, minor) => {
                let known: Vec<String> = KNOWN_CAPABILITIES
                    .iter()
                    .map(|(a, b)| format!("{a}.{b}"))
                    .collect();
                write!(
                    f,
                    "{major}.{minor} is not a compute capability (known: {})",
                    known.join(", ")
                )
            }
            CapabilityError::ArchSpecificTooOld(major, minor) => {
                write!(f, "{major}.{minor}a: `a` variants exist from 9.0 on")
            }
            CapabilityError::FamilyTooOld(major, minor) => {
                write!(f, "{major}.{minor}f: `f` variants exist from 10.0 on")
            }
        }
    }
}

fn parse_capability(cap: &str) -> Result<Arch, CapabilityError> {
    let (digits, variant) = split_variant(cap);
    let (major, minor) = digits
        .split_once('.')
        .ok_or_else(|| CapabilityError::Shape(cap.to_string()))?;
    let num = |s: &str| {
        if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
            return Err(CapabilityError::NotANumber(s.to_string()));
        }
        s.parse::<u32>().map_err(CapabilityError::Number)
    };
    let (major, minor) = (num(major)?, num(minor)?);
    if !KNOWN_CAPABILITIES.contains(&(major, minor)) {
        return Err(CapabilityError::Unknown(major, minor));
    }
    match variant {
        Variant::ArchSpecific if major < 9 => {
            return Err(CapabilityError::ArchSpecificTooOld(major, minor))
        }
        Variant::Family if major < 10 => return Err(CapabilityError::FamilyTooOld(major, minor)),
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
        // A fixture with the shape of kiln's matrix (the live one is Cargo.toml's).
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
        for bad in [
            "sm_9.0",
            "90",
            "sm_",
            "compute_x",
            "kind3_90",
            "sm_+90",
            "compute_-1",
        ] {
            assert_eq!(Target::parse(bad), None, "{bad}");
        }
        assert_eq!(
            Arch::from_number(120, Variant::Plain),
            Arch::parse_any("12.0").unwrap()
        );
    }
}

#[cfg(test)]
mod text_tests {
    use super::*;

    #[test]
    fn entries_round_trip_through_display_and_from_str() {
        for raw in [
            "8.0",
            "9.0a",
            "10.0f",
            "12.0+PTX",
            "12.0f+PTX",
            "9.0a+PTX",
            "7.5",
        ] {
            let e: MatrixEntry = raw.parse().unwrap();
            assert_eq!(e.to_string(), raw);
        }
        let m = ArchMatrix::parse(&["8.0", "9.0a", "12.0+PTX"]).unwrap();
        assert_eq!(m.to_string(), "8.0 9.0a 12.0+PTX");
        assert_eq!(ArchMatrix::new(m.entries().to_vec()), Ok(m));
        assert_eq!(
            "9.0a".parse::<Arch>().unwrap(),
            Arch::parse_any("sm_90a").unwrap()
        );
        assert!("9.0+PTX".parse::<Arch>().is_err());
        assert_eq!(
            "compute_120".parse::<Target>().unwrap().to_string(),
            "compute_120"
        );
        assert_eq!(
            "sm_9.0".parse::<Target>().unwrap_err().to_string(),
            "\"sm_9.0\" is not a target (sm_NN[a|f] or compute_NN[a|f])"
        );
        assert_eq!("ptx".parse::<TargetKind>(), Ok(TargetKind::Ptx));
        assert!("PTX".parse::<TargetKind>().is_err());
    }

    #[test]
    fn typed_matrices_are_validated_like_written_ones() {
        let e: MatrixEntry = "9.0".parse().unwrap();
        let p: MatrixEntry = "9.0+PTX".parse().unwrap();
        assert!(ArchMatrix::new(vec![e, p])
            .unwrap_err()
            .to_string()
            .contains("listed twice"));
        assert_eq!(ArchMatrix::new(Vec::new()), Err(ArchError::Empty));
        let targets: Vec<String> = p.targets().map(|t| t.name()).collect();
        assert_eq!(targets, ["sm_90", "compute_90"]);
    }
}
