//! `KILN_CUDA_CAPABILITIES`: nix/crates.nix hands kiln's derivations the matrix as nix/arch.nix
//! read it (nixpkgs' `cudaCapabilities`, ";"-separated, the `+PTX` entry last). kiln-build
//! reads the matrix itself (kiln-pins, kiln-arch's grammar), so in a Nix build the two readings
//! must agree; a disagreement is a bug in one of the two parsers and fails the build here
//! rather than shipping a wheel built for one matrix and audited against another.

use kiln_pins::ArchMatrix;

use crate::error::BuildError;

/// The environment variable nix/crates.nix sets.
pub const VAR: &str = "KILN_CUDA_CAPABILITIES";

/// Ok when `value` is unset or names exactly the matrix's capabilities (any order).
pub fn check(matrix: &ArchMatrix, value: Option<&str>) -> Result<(), BuildError> {
    let Some(value) = value else { return Ok(()) };
    let mut nix: Vec<&str> = value.split(';').collect();
    nix.sort_unstable();
    let mut ours: Vec<String> = matrix.sass().map(|a| a.to_string()).collect();
    ours.sort_unstable();
    if nix == ours {
        return Ok(());
    }
    Err(BuildError::Env(format!(
        "{VAR}={value:?} (nix/arch.nix's reading of `archs`) is not the matrix kiln-build read, \
         [{matrix}]: the Nix grammar (nix/arch-grammar.nix) and kiln-arch's disagree"
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nix_capabilities_must_be_the_matrix() {
        // A fixture matrix, not kiln's.
        let m = ArchMatrix::parse(&["8.0", "9.0a", "12.0+PTX"]).unwrap();
        assert!(check(&m, None).is_ok());
        assert!(check(&m, Some("8.0;9.0a;12.0")).is_ok());
        assert!(check(&m, Some("12.0;8.0;9.0a")).is_ok());
        let e = check(&m, Some("8.0;9.0;12.0")).unwrap_err().to_string();
        assert!(
            e.contains("KILN_CUDA_CAPABILITIES") && e.contains("[8.0 9.0a 12.0+PTX]"),
            "{e}"
        );
        assert!(check(&m, Some("8.0;9.0a")).is_err());
        assert!(check(&m, Some("")).is_err());
    }
}
