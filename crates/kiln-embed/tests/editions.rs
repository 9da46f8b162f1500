//! `embed!` and `abi!` expand in a crate of every edition kiln's users write (2021 and 2024:
//! 2024 refuses a bare `#[link_section]`), and `module(name)` finds each module's bytes: a
//! throwaway crate per edition, built with cargo, whose build script writes the files
//! kiln-build would (a two-module table).

use std::path::Path;
use std::process::Command;

fn crate_for(dir: &Path, edition: &str) {
    let embed = Path::new(env!("CARGO_MANIFEST_DIR"));
    std::fs::create_dir_all(dir.join("src")).unwrap();
    std::fs::write(
        dir.join("Cargo.toml"),
        format!(
            "[package]\nname = \"embeds-{edition}\"\nversion = \"0.1.0\"\nedition = \"{edition}\"\n\n\
             [dependencies]\nkiln-embed = {{ path = {:?} }}\n\n[workspace]\n",
            embed.display().to_string()
        ),
    )
    .unwrap();
    std::fs::write(
        dir.join("build.rs"),
        r#"fn main() {
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR").unwrap());
    // Two 8-byte-aligned "modules" of 8 and 16 bytes.
    let mut fatbin = vec![1u8; 8];
    fatbin.extend([2u8; 16]);
    std::fs::write(out.join("kernels.fatbin"), fatbin).unwrap();
    std::fs::write(out.join("kernels.manifest.json"), "{}").unwrap();
    std::fs::write(out.join("kernels.modules.rs"), "[(\"a\", 0, 8), (\"b\", 8, 16)]").unwrap();
    std::fs::write(out.join("kiln_abi.rs"), "pub struct Params { pub n: u32 }").unwrap();
}
"#,
    )
    .unwrap();
    std::fs::write(
        dir.join("src/main.rs"),
        "kiln_embed::embed!();\nkiln_embed::abi!();\n\
         fn main() {\n\
         \x20   assert_eq!(module(\"a\"), Some(&[1u8; 8][..]));\n\
         \x20   assert_eq!(module(\"b\"), Some(&[2u8; 16][..]));\n\
         \x20   assert_eq!(module(\"c\"), None);\n\
         \x20   assert_eq!(fatbin().len(), 24);\n\
         \x20   assert_eq!(fatbin().as_ptr() as usize % 8, 0);\n\
         \x20   assert_eq!(MANIFEST_JSON, \"{}\");\n\
         \x20   let _ = abi::Params { n: 1 };\n\
         }\n",
    )
    .unwrap();
}

#[test]
fn the_macros_expand_and_find_modules_in_edition_2021_and_2024() {
    let tmp = tempfile::tempdir().unwrap();
    for edition in ["2021", "2024"] {
        let dir = tmp.path().join(edition);
        crate_for(&dir, edition);
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let out = Command::new(cargo)
            .args(["run", "--quiet", "--offline", "--manifest-path"])
            .arg(dir.join("Cargo.toml"))
            .env("CARGO_TARGET_DIR", tmp.path().join("target"))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "edition {edition}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
