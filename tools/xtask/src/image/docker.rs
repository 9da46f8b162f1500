//! The Docker engine, through its CLI: the one check that it runs, and the few calls the image
//! and the container build make.

use std::path::Path;
use std::process::{Command, Output, Stdio};

use anyhow::{bail, Context, Result};

/// `docker info`: the engine answers, or one line saying why not.
pub fn engine() -> Result<String> {
    let out = match Command::new("docker")
        .args(["info", "--format", "{{.ServerVersion}}"])
        .stdin(Stdio::null())
        .output()
    {
        Ok(out) => out,
        Err(e) => bail!(
            "no Docker engine: the `docker` command cannot be started ({e}); install Docker and start its daemon"
        ),
    };
    let version = String::from_utf8_lossy(&out.stdout).trim().to_string();
    if !out.status.success() || version.is_empty() {
        let why = String::from_utf8_lossy(&out.stderr);
        let why = why
            .lines()
            .map(str::trim)
            .find(|l| !l.is_empty())
            .unwrap_or("no output");
        bail!(
            "no Docker engine: `docker info` failed ({}): {why}",
            out.status
        );
    }
    Ok(version)
}

pub fn docker() -> Command {
    let mut c = Command::new("docker");
    c.stdin(Stdio::null());
    c
}

/// Runs `docker ARGS`; on failure the error carries its output.
pub fn checked(args: &[&str]) -> Result<Output> {
    crate::toolchain::run_checked(docker().args(args))
}

/// The image ID (`sha256:…`) of `reference`, when the engine has it.
pub fn image_id(reference: &str) -> Option<String> {
    let out = docker()
        .args(["image", "inspect", "--format", "{{.Id}}", reference])
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
        .filter(|s| !s.is_empty())
}

/// A label of an image the engine has.
pub fn image_label(reference: &str, label: &str) -> Option<String> {
    let format = format!("{{{{index .Config.Labels \"{label}\"}}}}");
    let out = docker()
        .args(["image", "inspect", "--format", &format, reference])
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
        .filter(|s| !s.is_empty() && s != "<no value>")
}

/// The diff IDs of an image's layers, bottom first, when the engine has it.
pub fn image_layers(reference: &str) -> Option<Vec<String>> {
    let out = docker()
        .args([
            "image",
            "inspect",
            "--format",
            "{{range .RootFS.Layers}}{{println .}}{{end}}",
            reference,
        ])
        .output()
        .ok()?;
    out.status.success().then(|| {
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map(String::from)
            .collect()
    })
}

/// The engine's size of an image (bytes, all layers unpacked).
pub fn image_size(reference: &str) -> Option<u64> {
    let out = docker()
        .args(["image", "inspect", "--format", "{{.Size}}", reference])
        .output()
        .ok()?;
    String::from_utf8_lossy(&out.stdout).trim().parse().ok()
}

/// `-v HOST:CONTAINER[:ro]` for a host path (made absolute: docker wants absolute paths).
pub fn mount(host: &Path, container: &str, read_only: bool) -> Result<String> {
    let host = host
        .canonicalize()
        .with_context(|| format!("{} (to mount at {container})", host.display()))?;
    Ok(format!(
        "{}:{container}{}",
        host.display(),
        if read_only { ":ro" } else { "" }
    ))
}

/// A created (not started) container of `image`, removed when dropped.
pub struct Created {
    pub id: String,
}

impl Created {
    pub fn new(image: &str) -> Result<Created> {
        let out = checked(&["create", image, "true"])?;
        Ok(Created {
            id: String::from_utf8_lossy(&out.stdout).trim().to_string(),
        })
    }
}

impl Drop for Created {
    fn drop(&mut self) {
        let _ = docker()
            .args(["rm", "-f", &self.id])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}
