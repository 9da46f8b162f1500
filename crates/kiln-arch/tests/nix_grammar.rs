//! The matrix grammar has two parsers: kiln-arch's (`MatrixEntry: FromStr`) and Nix's
//! (nix/arch-grammar.nix, which the flake evaluates without import-from-derivation). This runs
//! both over the same valid and invalid entries and requires the same verdicts, the same
//! canonical spelling of what they accept, and the same list of known capabilities.
//!
//! Nix is found as xtask's nix-check finds it: `KILN_NIX_BIN`, then `.toolchain/nix/bin` of the
//! workspace, then `nix-instantiate` on PATH. Without any, the test prints SKIPPED and passes;
//! with `KILN_REQUIRE_NIX=1` set that is a failure.

use std::path::{Path, PathBuf};
use std::process::Command;

use kiln_arch::{MatrixEntry, KNOWN_CAPABILITIES};

/// Fixtures, not kiln's matrix: every branch of the grammar, accepted and refused.
const ENTRIES: &[&str] = &[
    // accepted
    "7.5",
    "8.0",
    "8.6",
    "8.7",
    "8.8",
    "8.9",
    "9.0",
    "9.0a",
    "9.0+PTX",
    "9.0a+PTX",
    "10.0",
    "10.0a",
    "10.0f",
    "10.3f",
    "11.0",
    "12.0",
    "12.0+PTX",
    "12.0f+PTX",
    "12.1a",
    "08.0",
    "9.00",
    "010.0f",
    // refused: unknown capability, variant too early, malformed, spacing, case, suffixes
    "9.1",
    "10.1",
    "13.0",
    "6.0",
    "8.0a",
    "8.9f",
    "9.0f",
    "9.0f+PTX",
    "90",
    "sm_80",
    "compute_120",
    "9",
    "9.",
    ".0",
    "",
    "x.y",
    "9.0b",
    "9.0A",
    "9.0af",
    "9.0+ptx",
    "9.0+PTX+PTX",
    "9.0+",
    "+PTX",
    " 9.0",
    "9.0 ",
    "9.0\t",
    "9 .0",
    "9.0 +PTX",
    "-9.0",
    "9.-0",
    "4294967296.0",
    "99999999999999999999.0",
    "9.0+SASS",
    "٩.0",
    "9٫0",
];

fn nix_instantiate() -> Option<PathBuf> {
    let ws = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut dirs: Vec<PathBuf> = Vec::new();
    if let Some(d) = std::env::var_os("KILN_NIX_BIN") {
        dirs.push(d.into());
    }
    dirs.push(ws.join(".toolchain/nix/bin"));
    if let Some(path) = std::env::var_os("PATH") {
        dirs.extend(std::env::split_paths(&path));
    }
    dirs.into_iter()
        .map(|d| d.join("nix-instantiate"))
        .find(|p| p.is_file())
}

/// A JSON string literal (the entries are read by Nix's `builtins.fromJSON`).
fn json_str(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out + "\""
}

/// Evaluates `expr` (with `entries` bound to ENTRIES) to a list of strings without quotes,
/// backslashes or commas (what both sides print is "ok <canonical>" or "error").
fn eval_strings(nix: &Path, expr: &str) -> Vec<String> {
    let dir = std::env::temp_dir().join(format!("kiln-arch-nix-grammar-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let list = dir.join("entries.json");
    let json: Vec<String> = ENTRIES.iter().map(|e| json_str(e)).collect();
    std::fs::write(&list, format!("[{}]", json.join(","))).unwrap();
    let grammar = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../nix/arch-grammar.nix");
    let full = format!(
        "let g = import {}; entries = builtins.fromJSON (builtins.readFile {}); in {expr}",
        grammar.canonicalize().unwrap().display(),
        list.display()
    );
    let out = Command::new(nix)
        .args(["--eval", "--strict", "--json", "-E", &full])
        .output()
        .expect("running nix-instantiate");
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        out.status.success(),
        "nix-instantiate failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let inner = text.trim().trim_start_matches('[').trim_end_matches(']');
    if inner.is_empty() {
        return Vec::new();
    }
    inner
        .split(',')
        .map(|s| s.trim().trim_matches('"').to_string())
        .collect()
}

#[test]
fn nix_and_rust_parse_the_matrix_grammar_alike() {
    let Some(nix) = nix_instantiate() else {
        assert!(
            std::env::var_os("KILN_REQUIRE_NIX").is_none(),
            "KILN_REQUIRE_NIX is set and no nix-instantiate was found"
        );
        eprintln!("SKIPPED: no nix-instantiate (KILN_NIX_BIN, .toolchain/nix/bin, PATH)");
        return;
    };
    let nix_verdicts = eval_strings(
        &nix,
        "map (e: let r = g.parse e; in if r ? error then \"error\" else \"ok \" + r.canonical) entries",
    );
    let rust_verdicts: Vec<String> = ENTRIES
        .iter()
        .map(|e| match e.parse::<MatrixEntry>() {
            Ok(m) => format!("ok {m}"),
            Err(_) => "error".to_string(),
        })
        .collect();
    assert_eq!(nix_verdicts.len(), ENTRIES.len());
    let differ: Vec<String> = ENTRIES
        .iter()
        .zip(nix_verdicts.iter().zip(&rust_verdicts))
        .filter(|(_, (n, r))| n != r)
        .map(|(e, (n, r))| format!("{e:?}: nix {n}, rust {r}"))
        .collect();
    assert!(
        differ.is_empty(),
        "the parsers disagree:\n{}",
        differ.join("\n")
    );
    // Both sides accept some and refuse some (the list exercises both).
    assert!(rust_verdicts.iter().any(|v| v == "error"));
    assert!(rust_verdicts.iter().any(|v| v.starts_with("ok ")));

    let known = eval_strings(&nix, "g.known");
    let rust_known: Vec<String> = KNOWN_CAPABILITIES
        .iter()
        .map(|(a, b)| format!("{a}.{b}"))
        .collect();
    assert_eq!(
        known, rust_known,
        "nix/arch-grammar.nix `known` vs KNOWN_CAPABILITIES"
    );
}
