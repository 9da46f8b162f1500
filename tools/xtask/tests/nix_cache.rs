//! flake.nix's `nixConfig` (the CUDA binary cache, README "Binary cache for CUDA"), read the way
//! Nix reads it: `nix eval --file flake.nix nixConfig`, offline, with the Nix in `.toolchain/`
//! (installed there by `cargo xtask nix-check --tools-only` when missing). Every substituter must
//! be https and come with a well-formed `name:base64` ed25519 public key (32 bytes), and the cache
//! the README and the CI workflow name must be the one the flake offers.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The cache kiln offers, as Flox published it:
/// https://discourse.nixos.org/t/nix-flox-nvidia-opening-up-cuda-redistribution-on-nix/69189
const SUBSTITUTER: &str = "https://cache.flox.dev";
const KEY: &str = "flox-cache-public-1:7F4OyH7ZCnFhcze3fJdfyXYLQw/aV7GEed86nQ7IsOs=";

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

fn nix_bin() -> PathBuf {
    if let Some(dir) = std::env::var_os("KILN_NIX_BIN") {
        return PathBuf::from(dir).join("nix");
    }
    let private = workspace().join(".toolchain/nix/bin/nix");
    if !private.exists() {
        let out = Command::new(env!("CARGO_BIN_EXE_xtask"))
            .args(["nix-check", "--tools-only", "--toolchain"])
            .arg(workspace().join(".toolchain"))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "installing Nix failed:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    private
}

/// `nixConfig` of a flake.nix, as Nix evaluates it (a plain attribute set at the top level).
fn nix_config(flake: &Path) -> serde_json::Value {
    let out = Command::new(nix_bin())
        .args([
            "--extra-experimental-features",
            "nix-command",
            "eval",
            "--offline",
            "--json",
            "--file",
        ])
        .arg(flake)
        .arg("nixConfig")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "nix eval nixConfig of {}:\n{}",
        flake.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Standard base64 with padding, strictly (what Nix's `PublicKey` parser accepts).
fn base64_decode(s: &str) -> Option<Vec<u8>> {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    if s.is_empty() || !s.len().is_multiple_of(4) {
        return None;
    }
    let body = s.trim_end_matches('=');
    if s.len() - body.len() > 2 {
        return None;
    }
    let mut bits: u32 = 0;
    let mut nbits = 0;
    let mut out = Vec::new();
    for c in body.bytes() {
        let v = ALPHABET.iter().position(|&a| a == c)? as u32;
        bits = (bits << 6) | v;
        nbits += 6;
        if nbits >= 8 {
            nbits -= 8;
            out.push((bits >> nbits) as u8);
            bits &= (1 << nbits) - 1;
        }
    }
    // Leftover bits must be zero (a canonical encoding).
    (bits == 0).then_some(out)
}

fn strings(v: &serde_json::Value, key: &str) -> Result<Vec<String>, String> {
    let list = v
        .get(key)
        .ok_or_else(|| format!("nixConfig has no {key}"))?
        .as_array()
        .ok_or_else(|| format!("nixConfig.{key} is not a list"))?;
    list.iter()
        .map(|s| {
            s.as_str()
                .map(str::to_owned)
                .ok_or_else(|| format!("nixConfig.{key} holds a non-string: {s}"))
        })
        .collect()
}

/// What makes a nixConfig cache entry usable: https substituters, each with a key `name:base64`
/// of a 32-byte ed25519 public key, and kiln's cache among them.
fn check(cfg: &serde_json::Value) -> Result<(), String> {
    let subs = strings(cfg, "extra-substituters")?;
    let keys = strings(cfg, "extra-trusted-public-keys")?;
    if subs.is_empty() {
        return Err("nixConfig.extra-substituters is empty".into());
    }
    if keys.len() < subs.len() {
        return Err(format!(
            "{} substituter(s) but {} key(s): a cache without its key is never used",
            subs.len(),
            keys.len()
        ));
    }
    for s in &subs {
        if !s.starts_with("https://") || s.contains(char::is_whitespace) {
            return Err(format!("substituter {s:?} is not an https URL"));
        }
    }
    for k in &keys {
        let (name, b64) = k
            .split_once(':')
            .ok_or_else(|| format!("key {k:?} is not name:base64"))?;
        if name.is_empty() || name.contains(char::is_whitespace) {
            return Err(format!("key {k:?} has no usable name"));
        }
        let bytes = base64_decode(b64).ok_or_else(|| format!("key {k:?}: not base64"))?;
        if bytes.len() != 32 {
            return Err(format!(
                "key {k:?} decodes to {} bytes, an ed25519 public key has 32",
                bytes.len()
            ));
        }
    }
    if !subs.iter().any(|s| s == SUBSTITUTER) || !keys.iter().any(|k| k == KEY) {
        return Err(format!(
            "nixConfig lacks {SUBSTITUTER} with its published key {KEY}"
        ));
    }
    Ok(())
}

#[test]
fn the_flake_offers_the_cuda_cache_with_a_well_formed_key() {
    let cfg = nix_config(&workspace().join("flake.nix"));
    check(&cfg).unwrap();
}

#[test]
fn readme_and_ci_name_the_cache_the_flake_offers() {
    for f in ["README.md", ".github/workflows/nix.yml"] {
        let text = std::fs::read_to_string(workspace().join(f)).unwrap();
        for needle in [SUBSTITUTER, KEY] {
            assert!(text.contains(needle), "{f} does not name {needle}");
        }
    }
}

/// A copy of flake.nix with one edit, evaluated and checked.
fn check_edited(from: &str, to: &str) -> Result<(), String> {
    let text = std::fs::read_to_string(workspace().join("flake.nix")).unwrap();
    assert!(text.contains(from), "flake.nix lacks {from:?}");
    let dir = tempfile::tempdir().unwrap();
    let flake = dir.path().join("flake.nix");
    std::fs::write(&flake, text.replacen(from, to, 1)).unwrap();
    check(&nix_config(&flake))
}

#[test]
fn a_broken_cache_entry_is_caught() {
    let key_b64 = KEY.split_once(':').unwrap().1;
    // One base64 character short: no longer 32 bytes (nor valid base64).
    let e = check_edited(key_b64, &key_b64[1..]).unwrap_err();
    assert!(e.contains("not base64") || e.contains("bytes"), "{e}");
    // 33 bytes.
    let e = check_edited(key_b64, "7F4OyH7ZCnFhcze3fJdfyXYLQw/aV7GEed86nQ7IsOsA").unwrap_err();
    assert!(e.contains("33 bytes"), "{e}");
    // No key name.
    let e = check_edited("flox-cache-public-1:", "").unwrap_err();
    assert!(e.contains("not name:base64"), "{e}");
    // Plain http.
    let e = check_edited("https://cache.flox.dev", "http://cache.flox.dev").unwrap_err();
    assert!(e.contains("https"), "{e}");
    // The key dropped: a substituter Nix would refuse to trust.
    let e = check_edited(&format!("\"{KEY}\""), "").unwrap_err();
    assert!(e.contains("key(s)"), "{e}");
}

#[test]
fn base64_decoder_agrees_with_known_values() {
    assert_eq!(base64_decode("AAAA").unwrap(), vec![0, 0, 0]);
    assert_eq!(base64_decode("TWE=").unwrap(), b"Ma".to_vec());
    assert_eq!(base64_decode("TQ==").unwrap(), b"M".to_vec());
    assert!(base64_decode("TR==").is_none(), "non-zero padding bits");
    assert!(base64_decode("T===").is_none());
    assert!(base64_decode("T!==").is_none());
    // cache.nixos.org's key, the best-known Nix public key: 32 bytes.
    assert_eq!(
        base64_decode("6NCHdD59X431o0gWypbMrAURkbJ16ZPMQFGspcDShjY=")
            .unwrap()
            .len(),
        32
    );
}
