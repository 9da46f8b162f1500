//! `cargo xtask audit-schema`: docs/audit-json-schema.json, the JSON Schema of
//! `kiln audit --json`, derived from kiln-audit's report types (`kiln_audit::json::schema`).
//! `--check` compares instead of writing; the unit suite runs that check, and the `cli-wheel`
//! suite validates real `kiln audit --json` output against the file.

use std::path::PathBuf;

use anyhow::{bail, Context, Result};

use crate::toolchain::repo_root;

#[derive(clap::Args)]
pub struct Args {
    /// Fail when the file differs from the types' schema instead of writing it.
    #[arg(long)]
    pub check: bool,
}

pub fn path() -> PathBuf {
    repo_root().join("docs/audit-json-schema.json")
}

/// The file's content: the schema, pretty, with a final newline.
pub fn rendered() -> String {
    let mut s =
        serde_json::to_string_pretty(&kiln_audit::json::schema()).expect("a JSON value serializes");
    s.push('\n');
    s
}

pub fn run(args: Args) -> Result<()> {
    let want = rendered();
    let path = path();
    if args.check {
        let have = std::fs::read_to_string(&path)
            .with_context(|| format!("reading {}", path.display()))?;
        if have != want {
            bail!(
                "{} is not the schema of kiln-audit's report types: run `cargo xtask audit-schema`",
                path.display()
            );
        }
        eprintln!("{} is current", path.display());
    } else {
        std::fs::write(&path, want).with_context(|| format!("writing {}", path.display()))?;
        eprintln!("wrote {}", path.display());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    /// The committed schema is the types' schema (else `cargo xtask audit-schema` rewrites it).
    #[test]
    fn the_committed_schema_is_current() {
        let have = std::fs::read_to_string(super::path()).unwrap();
        assert!(
            have == super::rendered(),
            "docs/audit-json-schema.json is stale: run `cargo xtask audit-schema`"
        );
    }

    /// What the schema must say for the check to mean anything: closed objects, the rule ids,
    /// and build_manifest where the output puts it (inside `binaries[].elf`).
    #[test]
    fn the_schema_is_closed_and_places_build_manifest_in_elf() {
        let s: serde_json::Value = serde_json::from_str(&super::rendered()).unwrap();
        assert_eq!(s["additionalProperties"], false, "{s:#}");
        let defs = s["$defs"].as_object().unwrap();
        assert!(defs["ElfFacts"]["properties"]["build_manifest"].is_object());
        assert!(defs["Binary"]["properties"].get("build_manifest").is_none());
        let rules = defs["Rule"]["enum"].as_array().unwrap();
        assert!(rules.iter().any(|r| r == "arch/missing-sass"), "{rules:?}");
    }
}
