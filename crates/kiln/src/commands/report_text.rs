//! The parts of `kiln audit`'s human report that frame the facts: the verdict (first and again
//! last), findings grouped when they repeat, waived findings with their reasons, the manylinux
//! tags, and colour — on a terminal only. The fact tables (binaries, coverage, reach) stay in
//! audit.rs.

use std::collections::BTreeMap;
use std::io::Write;

use anstyle::{AnsiColor, Style};
use kiln_audit::{Finding, ManylinuxTag, Report, Severity};

use super::escape::{self, text as esc};

/// `--color`: whether the report uses colour.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ColorWhen {
    /// On a terminal, unless NO_COLOR (or CLICOLOR=0, TERM=dumb) says otherwise.
    Auto,
    /// Always (also into a pipe).
    Always,
    /// Never.
    Never,
}

/// Styles, or none when colour is off (then every style prints nothing).
#[derive(Clone, Copy)]
pub struct Paint {
    on: bool,
}

impl Paint {
    /// Decides once, for stdout: `auto` asks anstream (NO_COLOR, CLICOLOR, CLICOLOR_FORCE,
    /// TERM=dumb, and whether stdout is a terminal).
    pub fn for_stdout(when: ColorWhen) -> Paint {
        let on = match when {
            ColorWhen::Always => true,
            ColorWhen::Never => false,
            ColorWhen::Auto => {
                anstream::AutoStream::choice(&std::io::stdout()) != anstream::ColorChoice::Never
            }
        };
        Paint { on }
    }

    #[cfg(test)]
    pub fn plain() -> Paint {
        Paint { on: false }
    }

    /// `text` in `style` (as is when colour is off).
    pub fn paint(&self, style: Style, text: &str) -> String {
        if self.on {
            format!("{style}{text}{style:#}")
        } else {
            text.to_string()
        }
    }

    fn severity(&self, s: Severity) -> String {
        let colour = match s {
            Severity::Error => AnsiColor::Red,
            Severity::Warning => AnsiColor::Yellow,
            Severity::Info => AnsiColor::Cyan,
        };
        self.paint(
            Style::new().fg_color(Some(colour.into())).bold(),
            &format!("{:<7}", s.as_str()),
        )
    }
}

/// The verdict line, e.g. `FAIL: x.whl — 2 error(s), 0 warning(s), 1 note(s), 3 waived`.
pub fn verdict(
    out: &mut impl Write,
    r: &Report,
    failed: bool,
    paint: Paint,
) -> std::io::Result<()> {
    let c = &r.counts;
    let (word, colour) = if failed {
        ("FAIL", AnsiColor::Red)
    } else if c.errors + c.warnings > 0 {
        (
            "PASS (with findings below the threshold)",
            AnsiColor::Yellow,
        )
    } else {
        ("PASS", AnsiColor::Green)
    };
    let waived = if c.waived > 0 {
        format!(", {} waived", c.waived)
    } else {
        String::new()
    };
    writeln!(
        out,
        "{}{}: {} — {} error(s), {} warning(s), {} note(s){waived}",
        paint.paint(Style::new().fg_color(Some(colour.into())).bold(), word),
        super::audit::reach_scope(&r.reach),
        esc(&r.input),
        c.errors,
        c.warnings,
        c.infos
    )
}

/// Findings that say the same thing (rule, severity, message, fix) about several files.
pub struct Group<'a> {
    /// The first finding of the group (its text is every member's).
    pub first: &'a Finding,
    /// Every file it was found in, in report order.
    pub files: Vec<&'a str>,
}

/// Groups identical findings, keeping the report's order (first occurrence).
pub fn group(findings: &[Finding]) -> Vec<Group<'_>> {
    let mut index: BTreeMap<(&str, Severity, &str, &str), usize> = BTreeMap::new();
    let mut groups: Vec<Group<'_>> = Vec::new();
    for f in findings {
        let key = (
            f.rule.as_str(),
            f.severity,
            f.message.as_str(),
            f.fix.as_str(),
        );
        match index.get(&key) {
            Some(&i) => groups[i].files.push(&f.file),
            None => {
                index.insert(key, groups.len());
                groups.push(Group {
                    first: f,
                    files: vec![&f.file],
                });
            }
        }
    }
    groups
}

/// Paths listed per group without --full.
const GROUP_PATHS: usize = 12;

/// `files` compactly: those of one directory as `dir/{a, b}`, at most `limit` names, the rest
/// counted.
pub fn compact_paths(files: &[&str], limit: usize) -> String {
    let mut by_dir: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    let shown = files.len().min(limit);
    for f in &files[..shown] {
        let (dir, name) = f.rsplit_once('/').unwrap_or(("", f));
        by_dir.entry(dir).or_default().push(name);
    }
    let mut parts: Vec<String> = by_dir
        .into_iter()
        .map(|(dir, names)| {
            let names: Vec<String> = names.iter().map(|n| esc(n).into_owned()).collect();
            match (dir, names.as_slice()) {
                ("", _) => names.join(", "),
                (d, [one]) => format!("{}/{one}", esc(d)),
                (d, _) => format!("{}/{{{}}}", esc(d), names.join(", ")),
            }
        })
        .collect();
    if files.len() > shown {
        parts.push(format!("… and {} more", files.len() - shown));
    }
    parts.join(", ")
}

/// The findings, identical ones once with `×N` and their files.
pub fn findings(out: &mut impl Write, r: &Report, full: bool, paint: Paint) -> std::io::Result<()> {
    if r.findings.is_empty() {
        return Ok(());
    }
    writeln!(out, "\nFindings")?;
    for g in group(&r.findings) {
        let f = g.first;
        let head = match g.files.as_slice() {
            [""] => String::new(),
            [one] => format!("  {}", esc(one)),
            many => format!("  ×{}", many.len()),
        };
        writeln!(out, "  {} {}{head}", paint.severity(f.severity), f.rule)?;
        if g.files.len() > 1 {
            let limit = if full { usize::MAX } else { GROUP_PATHS };
            writeln!(out, "          in: {}", compact_paths(&g.files, limit))?;
        }
        writeln!(
            out,
            "          {}",
            escape::lines(&f.message).replace('\n', "\n          ")
        )?;
        writeln!(out, "          fix: {}", esc(&f.fix))?;
    }
    Ok(())
}

/// Waived findings with their reasons, grouped like findings; then waivers that matched
/// nothing.
pub fn waived(out: &mut impl Write, r: &Report, full: bool, paint: Paint) -> std::io::Result<()> {
    if !r.waived.is_empty() {
        writeln!(out, "\nWaived (listed, failing nothing)")?;
        let mut groups: Vec<(&str, &str, Vec<&kiln_audit::Waived>)> = Vec::new();
        for w in &r.waived {
            match groups
                .iter_mut()
                .find(|(a, m, _)| *a == w.allow && *m == w.finding.message)
            {
                Some(g) => g.2.push(w),
                None => groups.push((&w.allow, &w.finding.message, vec![w])),
            }
        }
        for (allow, message, ws) in groups {
            let f = &ws[0].finding;
            let files: Vec<&str> = ws.iter().map(|w| w.finding.file.as_str()).collect();
            let limit = if full { usize::MAX } else { GROUP_PATHS };
            let head = match files.as_slice() {
                [""] => String::new(),
                [one] => format!("  {}", esc(one)),
                many => format!("  ×{}: {}", many.len(), compact_paths(many, limit)),
            };
            writeln!(
                out,
                "  {} {}{head}",
                paint.paint(
                    Style::new().dimmed(),
                    &format!("{:<7}", f.severity.as_str())
                ),
                f.rule
            )?;
            writeln!(
                out,
                "          {}",
                escape::lines(message).replace('\n', "\n          ")
            )?;
            writeln!(
                out,
                "          waived by {}: {}",
                esc(allow),
                esc(&ws[0].reason)
            )?;
        }
    }
    for a in &r.unused_allows {
        writeln!(
            out,
            "\n  {} waiver {} matched no finding (stale or mistyped?)",
            paint.severity(Severity::Warning),
            esc(a)
        )?;
    }
    Ok(())
}

/// The declared platform tags beside the best manylinux tag the binaries allow, per wheel or
/// distribution (directories: one line each; the loose files last).
pub fn manylinux(out: &mut impl Write, tags: &[ManylinuxTag]) -> std::io::Result<()> {
    if tags.is_empty() {
        return Ok(());
    }
    writeln!(
        out,
        "\nPlatform tags (declared | best the binaries allow: auditwheel's manylinux policies, GLIBC_/GLIBCXX_/CXXABI_ symbol versions)"
    )?;
    for t in tags {
        let who = match &t.dist_info {
            Some(d) => esc(d).into_owned(),
            None if tags.len() > 1 => {
                "files in no RECORD (loose: no tags, no Requires-Dist; --platform applies)".into()
            }
            None => "the input".into(),
        };
        let declared = if t.declared.is_empty() {
            "none".to_string()
        } else {
            esc(&t.declared.join(", ")).into_owned()
        };
        let best = match (&t.best, &t.alias) {
            (Some(b), Some(a)) => format!("{b} ({a})"),
            (Some(b), None) => b.clone(),
            (None, _) => format!("none: {}", esc(t.why.as_deref().unwrap_or("?"))),
        };
        let needs = if t.needs.is_empty() {
            String::new()
        } else {
            let by = t
                .limited_by
                .as_deref()
                .map(|p| format!(", GLIBC floor set by {}", esc(p)))
                .unwrap_or_default();
            format!(" — needs {}{by}", t.needs.join(" "))
        };
        writeln!(
            out,
            "  {who} ({} ELF): declared {declared} | best {best}{needs}",
            t.binaries
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_listed_compactly_and_counted() {
        let files = ["a/x.so", "a/y.so", "b/z.so", "top.so", "a/w.so"];
        assert_eq!(
            compact_paths(&files, 12),
            "top.so, a/{x.so, y.so, w.so}, b/z.so"
        );
        assert_eq!(compact_paths(&files, 2), "a/{x.so, y.so}, … and 3 more");
    }

    #[test]
    fn colour_is_off_when_plain() {
        let p = Paint::plain();
        assert_eq!(p.severity(Severity::Error), "error  ");
        let on = Paint { on: true };
        assert!(on.severity(Severity::Error).contains("\x1b["));
    }
}
