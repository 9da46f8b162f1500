//! What the artifact is expected to contain. Empty fields mean "no expectation": the rules
//! that need them are skipped and the report states facts only.

use std::collections::BTreeMap;

use kiln_pins::{Arch, Pins, RuntimeLib};
use serde::Serialize;

#[derive(Debug, Clone, Default, Serialize)]
pub struct Policy {
    /// SASS targets every ELF with device code (and every kernel) must carry; exact variants.
    #[serde(serialize_with = "archs_as_text")]
    pub expect_sass: Option<Vec<Arch>>,
    /// PTX targets: present exactly for these.
    #[serde(serialize_with = "archs_as_text")]
    pub expect_ptx: Option<Vec<Arch>>,
    /// Oldest driver (major version) the artifact must run on.
    pub min_driver: Option<u32>,
    /// A platform tag whose glibc ceiling applies (besides the wheel's own tags).
    pub platform: Option<String>,
    /// kiln's runtime pins: sonames -> wheel, lib dir and pinned version.
    #[serde(skip)]
    pub runtime: BTreeMap<String, RuntimeLib>,
}

impl Policy {
    /// kiln's own policy, from `[workspace.metadata.kiln]`.
    pub fn from_pins(pins: &Pins) -> Policy {
        Policy {
            expect_sass: Some(pins.matrix.sass().collect()),
            expect_ptx: Some(pins.matrix.ptx().collect()),
            min_driver: Some(pins.min_driver),
            platform: None,
            runtime: pins.runtime.clone(),
        }
    }

    /// PTX ISA ceiling of `min_driver` (None: no driver policy, or a driver older than the table).
    pub fn max_ptx_isa(&self) -> Option<(u32, u32)> {
        self.min_driver
            .and_then(kiln_pins::max_ptx_isa_for_driver)
            .map(|row| row.ptx_isa)
    }

    pub fn is_empty(&self) -> bool {
        self.expect_sass.is_none()
            && self.expect_ptx.is_none()
            && self.min_driver.is_none()
            && self.platform.is_none()
    }
}

/// Parses "80,86,90a,100f,120" (also "sm_90", "9.0") into archs.
pub fn parse_arch_list(text: &str) -> Result<Vec<Arch>, String> {
    let mut out = Vec::new();
    for item in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let arch = Arch::parse_any(item).ok_or_else(|| {
            format!("{item:?} is not an arch (expected e.g. 80, 90a, 100f, sm_120)")
        })?;
        if !out.contains(&arch) {
            out.push(arch);
        }
    }
    Ok(out)
}

/// JSON form: ["80", "90a", "100f"] (fatbinary's spelling).
fn archs_as_text<S: serde::Serializer>(archs: &Option<Vec<Arch>>, s: S) -> Result<S::Ok, S::Error> {
    let text: Option<Vec<String>> = archs.as_ref().map(|v| v.iter().map(Arch::short).collect());
    serde::Serialize::serialize(&text, s)
}
