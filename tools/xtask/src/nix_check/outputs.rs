//! Every output of the flake, for every system, evaluated to its drvPath with
//! import-from-derivation forbidden — what Hydra, `allow-import-from-derivation = false` and a
//! `nix flake check --all-systems` on one machine need. One `nix eval` per output, so a failure
//! names the output it belongs to.

use std::fmt::Write as _;

use anyhow::{bail, Context, Result};

use super::{nix_error, tools::Tools, Flake};

/// The systems the flake declares (flake.nix `systems`).
pub const SYSTEMS: [&str; 2] = ["x86_64-linux", "aarch64-linux"];

/// Refuses import from derivation: reading a file of a derivation's output at evaluation time.
pub const NO_IFD: [&str; 3] = ["--option", "allow-import-from-derivation", "false"];

/// How the flake's inputs are given: the override arguments, and the nixpkgs (a directory with
/// a default.nix taking `{ system, config, overlays }`) that `overlays.default` is applied to.
pub struct Inputs<'a> {
    pub label: &'a str,
    pub overrides: Vec<String>,
    pub nixpkgs_for_overlay: String,
}

/// One evaluated output: its attribute path and drvPath.
pub struct Evaluated {
    pub attr: String,
    pub drv_path: String,
}

/// The attribute paths of every derivation-valued output, found by evaluating attribute names
/// only (which needs no derivation), then the `lib` and `overlays` entry points applied.
fn attrs(tools: &Tools, flake: &Flake, inputs: &Inputs) -> Result<Vec<(String, Option<String>)>> {
    let mut out = Vec::new();
    for system in SYSTEMS {
        for group in ["packages", "devShells", "checks"] {
            let attr = format!("{group}.{system}");
            let names: Vec<String> = serde_json::from_str(&eval(
                tools,
                flake,
                inputs,
                &attr,
                Some("builtins.attrNames"),
                true,
            )?)
            .with_context(|| format!("attribute names of {attr}"))?;
            out.extend(
                names
                    .into_iter()
                    .map(|n| (format!("{attr}.{n}.drvPath"), None)),
            );
        }
        out.push((format!("formatter.{system}.drvPath"), None));
        // What other flakes call: kiln's CLI and toolchain as lib exposes them, the dev shell
        // helper, and the overlay applied to a nixpkgs of this system.
        out.push((format!("lib.{system}.kiln.drvPath"), None));
        out.push((format!("lib.{system}.toolchain.rust.drvPath"), None));
        out.push((format!("lib.{system}.cuda.home.drvPath"), None));
        out.push((
            format!("lib.{system}.mkDevShell"),
            Some("f: (f { }).drvPath".to_string()),
        ));
        out.push((
            "overlays.default".to_string(),
            Some(format!(
                "o: (import {} {{ system = \"{system}\"; config.allowUnfree = true; overlays = [ o ]; }}).kiln.drvPath",
                inputs.nixpkgs_for_overlay
            )),
        ));
    }
    Ok(out)
}

fn eval(
    tools: &Tools,
    flake: &Flake,
    inputs: &Inputs,
    attr: &str,
    apply: Option<&str>,
    json: bool,
) -> Result<String> {
    let mut cmd = tools.nix();
    cmd.args(["eval", "--impure"])
        .arg(if json { "--json" } else { "--raw" })
        .args(NO_IFD)
        .args(&inputs.overrides)
        .arg(format!("{}#{attr}", flake.flake_ref));
    if let Some(f) = apply {
        cmd.args(["--apply", f]);
    }
    let out = cmd.output().context("running nix eval")?;
    if !out.status.success() {
        bail!("{}", nix_error(&out));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// Evaluates every output; fails naming each output that does not evaluate without IFD.
pub fn every_output(tools: &Tools, flake: &Flake, inputs: &Inputs) -> Result<Vec<Evaluated>> {
    let mut done = Vec::new();
    let mut failed = String::new();
    for (attr, apply) in attrs(tools, flake, inputs)? {
        let shown = match &apply {
            Some(_) if attr == "overlays.default" => {
                // The system is inside the applied function; name it from there.
                let sys = SYSTEMS
                    .iter()
                    .find(|s| apply.as_deref().is_some_and(|a| a.contains(*s)))
                    .copied()
                    .unwrap_or("?");
                format!("overlays.default (kiln on a {sys} nixpkgs)")
            }
            Some(_) => format!("{attr} {{ }}"),
            None => attr.trim_end_matches(".drvPath").to_string(),
        };
        match eval(tools, flake, inputs, &attr, apply.as_deref(), false) {
            Ok(drv_path) => done.push(Evaluated {
                attr: shown,
                drv_path,
            }),
            Err(e) => {
                let _ = writeln!(failed, "{shown}: {}", first_lines(&format!("{e:#}"), 6));
            }
        }
    }
    if !failed.is_empty() {
        bail!(
            "outputs that do not evaluate with {} (IFD forbidden, {}):\n{failed}",
            NO_IFD.join(" "),
            inputs.label
        );
    }
    Ok(done)
}

/// The step's one-line note, and every drvPath listed under it (for the closing report).
pub fn summary(done: &[Evaluated]) -> String {
    let mut s = format!(
        "{} outputs on {} systems, IFD forbidden",
        done.len(),
        SYSTEMS.len()
    );
    for e in done {
        let _ = write!(s, "\n    {} = {}", e.attr, e.drv_path);
    }
    s
}

fn first_lines(s: &str, n: usize) -> String {
    let lines: Vec<&str> = s.lines().filter(|l| !l.trim().is_empty()).collect();
    // Nix puts the cause last; keep the end of the trace.
    let start = lines.len().saturating_sub(n);
    lines[start..].join("\n      ")
}
