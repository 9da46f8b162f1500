//! The human report: the verdict first, then the counts and the exit code, the environment
//! inventory, and one line per check (`ok|warn|fail|skip  <id>  <message>`, indented `fix:`
//! lines). Colour only when asked (the caller decides: a terminal, NO_COLOR, `--color`).

use kiln_doctor::{Blocker, Inventory, Mode, Report, Status};

struct Paint(bool);

impl Paint {
    fn sgr(&self, code: &str, text: &str) -> String {
        if self.0 {
            format!("\x1b[{code}m{text}\x1b[0m")
        } else {
            text.to_string()
        }
    }
    fn status(&self, s: Status, text: &str) -> String {
        let code = match s {
            Status::Ok => "32",
            Status::Warn => "33",
            Status::Fail => "1;31",
            Status::Skip => "2",
        };
        self.sgr(code, text)
    }
    fn yes_no(&self, yes: bool) -> String {
        if yes {
            self.sgr("1;32", "yes")
        } else {
            self.sgr("1;31", "no")
        }
    }
    fn bold(&self, text: &str) -> String {
        self.sgr("1", text)
    }
}

pub fn render(report: &Report, colour: bool) -> String {
    let p = Paint(colour);
    let mut out = String::new();
    out.push_str(&verdict_line(report, &p));
    out.push('\n');
    let s = &report.summary;
    out.push_str(&format!(
        "{} ok · {} warn · {} fail · {} skipped · {:.1} s · exit {}\n",
        s.ok,
        s.warn,
        s.fail,
        s.skip,
        report.elapsed_ms as f64 / 1000.0,
        u8::from(report.failed())
    ));
    out.push('\n');
    out.push_str(&p.bold("environment"));
    out.push('\n');
    for (k, v) in inventory_rows(&report.inventory) {
        out.push_str(&format!("  {k:<7}  {v}\n"));
    }
    out.push('\n');
    out.push_str(&p.bold("checks"));
    out.push('\n');
    let width = report.checks.iter().map(|c| c.id.len()).max().unwrap_or(0);
    for c in &report.checks {
        let softened = if c.softened {
            match report.mode {
                Mode::BuildOnly => " (a run failure; warns with --build-only)",
                Mode::RuntimeOnly => " (a build failure; warns with --runtime-only)",
                Mode::Full => "",
            }
        } else {
            ""
        };
        let label = format!("{:<4}", c.status.label());
        out.push_str(&format!(
            "{}  {:<width$}  {}{softened}\n",
            p.status(c.status, &label),
            c.id,
            c.message
        ));
        for f in &c.fix {
            out.push_str(&format!("      {:<width$}  fix: {f}\n", ""));
        }
    }
    out
}

/// "can build: yes · can run: no — no NVIDIA driver found (driver.libcuda)".
fn verdict_line(report: &Report, p: &Paint) -> String {
    let v = &report.verdict;
    let why = |b: &Option<Blocker>, waived: bool| -> String {
        match b {
            None => String::new(),
            Some(b) => {
                let whose = match &b.subject {
                    Some(s) => format!("{}, {s}", b.id),
                    None => b.id.to_string(),
                };
                let note = if waived { "; not needed here" } else { "" };
                format!(" — {} ({whose}{note})", b.reason)
            }
        }
    };
    format!(
        "{}  can build: {}{} · can run: {}{}",
        p.bold("kiln doctor"),
        p.yes_no(v.can_build),
        why(&v.build_blocker, report.mode == Mode::RuntimeOnly),
        p.yes_no(v.can_run),
        why(&v.run_blocker, report.mode == Mode::BuildOnly),
    )
}

fn inventory_rows(inv: &Inventory) -> Vec<(&'static str, String)> {
    let mut rows = Vec::new();
    let mut os = vec![inv.os.clone().unwrap_or_else(|| "unknown OS".into())];
    if let Some(k) = &inv.kernel {
        os.push(format!("Linux {k}"));
    }
    os.push(inv.arch.to_string());
    os.push(match &inv.glibc {
        Some(g) => format!("glibc {g}"),
        None => "not glibc".into(),
    });
    rows.push(("os", os.join(" · ")));
    match (&inv.python, &inv.python_error) {
        (Some(py), _) => {
            rows.push(("python", format!("{} ({})", py.version, py.executable)));
            rows.push((
                "kiln",
                match &py.kiln {
                    Some(k) => format!("{} {} (Python wheel)", k.name, k.version),
                    None => "the Python wheel is not installed in this Python".into(),
                },
            ));
            if !py.other_kiln_imports.is_empty() {
                rows.push((
                    "",
                    format!(
                        "`import kiln` may get {}, which is not kiln's wheel",
                        py.other_kiln_imports.join(", ")
                    ),
                ));
            }
            rows.push((
                "torch",
                match &py.torch {
                    Some(t) => match &t.cuda {
                        Some(c) => format!("{} (built with CUDA {c})", t.version),
                        None => format!("{} (CPU build)", t.version),
                    },
                    None => "not installed".into(),
                },
            ));
            rows.push((
                "nvidia",
                if py.nvidia.is_empty() {
                    "no nvidia-* wheels installed".into()
                } else {
                    py.nvidia
                        .iter()
                        .map(|d| format!("{} {}", d.name, d.version))
                        .collect::<Vec<_>>()
                        .join(", ")
                },
            ));
        }
        (None, e) => rows.push(("python", e.clone().unwrap_or_default())),
    }
    rows.push((
        "driver",
        match (&inv.driver, &inv.driver_error) {
            (Some(d), _) => format!(
                "{} (CUDA {}) at {}",
                d.release.as_deref().unwrap_or("release unknown"),
                d.cuda.as_deref().unwrap_or("?"),
                d.path
            ),
            (None, e) => format!(
                "none (libcuda.so.1: {})",
                e.as_deref().unwrap_or("not loaded")
            ),
        },
    ));
    rows.push((
        "gpus",
        if inv.gpus.is_empty() {
            "none".into()
        } else {
            inv.gpus.join(", ")
        },
    ));
    rows.push((
        "nvcc",
        inv.nvcc.clone().unwrap_or_else(|| "not found".into()),
    ));
    rows
}

#[cfg(test)]
mod tests {
    use super::Paint;
    use kiln_doctor::Status;

    #[test]
    fn paint_adds_escapes_only_when_on() {
        assert_eq!(Paint(false).status(Status::Fail, "fail"), "fail");
        assert_eq!(
            Paint(true).status(Status::Fail, "fail"),
            "\x1b[1;31mfail\x1b[0m"
        );
        assert_eq!(Paint(true).yes_no(true), "\x1b[1;32myes\x1b[0m");
    }
}
