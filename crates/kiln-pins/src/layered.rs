//! A consumer project's kiln table, layered over kiln's own pins.
//!
//! kiln's workspace `[workspace.metadata.kiln]` states everything (it has a `toolchain`). Another
//! project states only what is its own — usually `archs` (its matrix), maybe `min-driver` and
//! `runtime` (the wheels its binaries reach) — in `[package.metadata.kiln]` or its workspace's
//! `[workspace.metadata.kiln]`, and takes the rest from the kiln it builds with
//! ([`crate::BUILT_IN_MANIFEST`]), so no consumer restates nvcc, CUDA or clang versions.
//!
//! Rules (top-level keys; a stated key replaces kiln's value whole, it is not merged into it):
//! - `toolchain` always comes from kiln (a table that states its own is a complete pin set and
//!   is not layered at all);
//! - `archs`, `min-driver`, `runtime` come from kiln when the project leaves them out;
//! - `wheel` and `test-tools` describe kiln's own wheel and checks and are never inherited;
//!   nor is `audit` (a project's waivers are its own).

/// Keys a project's table takes from kiln's when it leaves them out.
pub const INHERITED_KEYS: &[&str] = &["archs", "min-driver", "toolchain", "runtime"];

/// The kiln table of a parsed Cargo.toml, and which one it is (`"package"` or `"workspace"`):
/// the package's own table wins, being the nearer.
pub fn kiln_table(doc: &toml::Table) -> Option<(&'static str, &toml::Table)> {
    ["package", "workspace"].into_iter().find_map(|section| {
        let t = doc.get(section)?.get("metadata")?.get("kiln")?.as_table()?;
        Some((section, t))
    })
}

/// `project` with every key of [`INHERITED_KEYS`] it leaves out filled from kiln's own pins;
/// also returns the names of the keys so filled.
pub fn over_built_in(project: &toml::Table) -> (toml::Table, Vec<String>) {
    let doc: toml::Table =
        toml::from_str(crate::BUILT_IN_MANIFEST).expect("kiln's Cargo.toml is valid TOML");
    let (_, kiln) = kiln_table(&doc).expect("kiln's Cargo.toml has [workspace.metadata.kiln]");
    let mut out = project.clone();
    let mut inherited = Vec::new();
    for key in INHERITED_KEYS {
        if out.contains_key(*key) {
            continue;
        }
        if let Some(v) = kiln.get(*key) {
            out.insert(key.to_string(), v.clone());
            inherited.push(key.to_string());
        }
    }
    (out, inherited)
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use crate::{Pins, PinsError};

    const CONSUMER: &str = r#"
[package]
name = "consumer"
version = "0.1.0"

[package.metadata.kiln]
archs = ["8.9", "9.0+PTX"]
"#;

    #[test]
    fn a_package_table_takes_the_toolchain_and_runtime_from_kiln() {
        let pins = Pins::parse(CONSUMER, Path::new("c/Cargo.toml")).unwrap();
        let kiln = Pins::built_in();
        let names: Vec<String> = pins.matrix.targets().iter().map(|t| t.name()).collect();
        assert_eq!(names, ["sm_89", "sm_90", "compute_90"]);
        assert_eq!(pins.toolchain, kiln.toolchain);
        assert_eq!(pins.min_driver, kiln.min_driver);
        assert_eq!(pins.runtime, kiln.runtime);
        assert!(pins.wheel.is_none() && pins.test_tools.is_empty());
        assert_eq!(pins.inherited, ["min-driver", "toolchain", "runtime"]);
        assert_eq!(pins.root(), Path::new("c"));
        assert_eq!(pins.table("kernels"), "[package.metadata.kiln.kernels]");
    }

    #[test]
    fn stated_keys_replace_kiln_s_whole() {
        let text = format!(
            "{CONSUMER}min-driver = \"590\"\n\n[package.metadata.kiln.runtime.cudart]\n\
             wheel = \"nvidia-cuda-runtime\"\nversion = \"13.0.96\"\nrequires = \">=13.0,<14\"\n\
             lib-dir = \"nvidia/cu13/lib\"\nsonames = [\"libcudart.so.13\"]\n"
        );
        let pins = Pins::parse(&text, Path::new("Cargo.toml")).unwrap();
        assert_eq!(pins.min_driver, 590);
        assert_eq!(pins.runtime.keys().collect::<Vec<_>>(), ["cudart"]);
        assert_eq!(pins.inherited, ["toolchain"]);
    }

    #[test]
    fn the_package_table_wins_over_the_workspace_s() {
        let text = format!("{CONSUMER}\n[workspace.metadata.kiln]\narchs = [\"8.0\"]\n");
        let pins = Pins::parse(&text, Path::new("Cargo.toml")).unwrap();
        assert_eq!(pins.matrix.targets().len(), 3);
    }

    #[test]
    fn a_consumer_workspace_table_is_layered_too() {
        let text = "[workspace]\n[workspace.metadata.kiln]\narchs = [\"12.0f\"]\n";
        let pins = Pins::parse(text, Path::new("Cargo.toml")).unwrap();
        assert_eq!(pins.matrix.targets()[0].name(), "sm_120f");
        assert_eq!(pins.toolchain, Pins::built_in().toolchain);
        assert_eq!(pins.table(""), "[workspace.metadata.kiln]");
    }

    /// Mistakes in a project's table name the project's file and table, not kiln's.
    #[test]
    fn bad_project_tables_are_clear_errors() {
        for (bad, why) in [
            ("archs = [\"8.9\", \"9.1\"]", "not a compute capability"),
            ("archs = [\"8.9\"]\nmin-drivr = \"1\"", "min-drivr"),
            (
                "archs = [\"8.9\"]\nmin-driver = \"400\"",
                "predates CUDA 12",
            ),
            ("archs = \"8.9\"", "invalid type"),
        ] {
            let text = format!("[package]\nname = \"c\"\n[package.metadata.kiln]\n{bad}\n");
            let e = Pins::parse(&text, Path::new("c/Cargo.toml")).unwrap_err();
            assert!(matches!(e, PinsError::Project { .. }), "{bad}: {e:?}");
            let e = e.to_string();
            assert!(
                e.contains("c/Cargo.toml [package.metadata.kiln]") && e.contains(why),
                "{bad}: {e}"
            );
        }
    }

    #[test]
    fn discovery_finds_the_package_table_before_the_workspace() {
        let dir = std::env::temp_dir().join(format!("kiln-pins-layered-{}", std::process::id()));
        let pkg = dir.join("member");
        std::fs::create_dir_all(pkg.join("src")).unwrap();
        std::fs::write(
            dir.join("Cargo.toml"),
            "[workspace]\n[workspace.metadata.kiln]\narchs = [\"8.0\"]\n",
        )
        .unwrap();
        std::fs::write(pkg.join("Cargo.toml"), CONSUMER).unwrap();
        let found = Pins::discover(&pkg.join("src")).unwrap();
        assert_eq!(found.manifest, pkg.join("Cargo.toml"));
        std::fs::write(pkg.join("Cargo.toml"), "[package]\nname = \"m\"\n").unwrap();
        let found = Pins::discover(&pkg).unwrap();
        assert_eq!(found.manifest, dir.join("Cargo.toml"));
        assert_eq!(found.matrix.targets()[0].name(), "sm_80");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
