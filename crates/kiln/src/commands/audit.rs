//! `kiln audit INPUT`: runs kiln-audit and renders its report (human, --json or --quiet).
//! Exit: 0 clean, 1 findings at or above --fail-on, 2 input or policy unreadable, or nothing to
//! audit. A closed stdout (`| head`) ends quietly with the verdict's code.
//! `kiln audit --json-schema` prints the JSON Schema of `--json` instead (no input read):
//! docs/audit-json-schema.json is its output, kept current by crates/kiln/tests/report.rs.

use std::collections::{HashMap, HashSet};
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::ValueEnum;
use kiln_audit::facts::EntryKind;
use kiln_audit::{Coverage, Options, Policy, Reach, ReachCell, ReachPath, Report, Severity, Via};

use super::escape::text as esc;
use super::report_text::{self, ColorWhen, Paint};
use super::{error, exit_code};

/// Exit codes, in `kiln audit --help`.
const EXIT_CODES: &str = "Exit codes:
  0  no finding at or above --fail-on (waived findings fail nothing)
  1  findings at or above --fail-on
  2  could not run: the input or the policy is unreadable, a flag is invalid, or the input
     is a directory with nothing to audit (no ELF or fatbin, and nothing else wrong)";

#[derive(clap::Args)]
#[command(after_help = EXIT_CODES)]
pub struct Args {
    /// A wheel (.whl), a shared library / executable, or a directory (unpacked wheel, site-packages).
    #[arg(required_unless_present = "json_schema")]
    pub input: Option<PathBuf>,
    /// Take the expectations from a workspace Cargo.toml's [workspace.metadata.kiln].
    #[arg(long, value_name = "CARGO_TOML")]
    pub policy: Option<PathBuf>,
    /// SASS targets every binary with device code must carry, e.g. 80,90,120 (90a, 100f exact).
    #[arg(long, value_name = "LIST")]
    pub expect_sass: Option<String>,
    /// PTX targets that must be present, and the only ones allowed, e.g. 120.
    #[arg(long, value_name = "LIST")]
    pub expect_ptx: Option<String>,
    /// Oldest driver (major version) that must JIT the PTX, e.g. 580.
    #[arg(long, value_name = "MAJOR")]
    pub min_driver: Option<u32>,
    /// GPU generations every kernel must reach (by SASS, or by PTX within --min-driver), e.g. 8.0,9.0,12.0.
    #[arg(long, value_name = "LIST")]
    pub require_gpus: Option<String>,
    /// Platform tag whose glibc ceiling applies, e.g. manylinux_2_28_x86_64.
    #[arg(long, value_name = "TAG")]
    pub platform: Option<String>,
    /// Waive findings of RULE (at files matching PATH_GLOB) with a reason: listed as waived,
    /// failing nothing; repeatable. E.g. reach/gap:nvidia/*/lib/*=Thor is Arm-only. The policy
    /// file's [workspace.metadata.kiln.audit] allow takes the same.
    #[arg(long, value_name = "RULE[:PATH_GLOB]=REASON")]
    pub allow: Vec<String>,
    /// Colour in the human report: auto (a terminal, unless NO_COLOR is set), always, never.
    #[arg(long, value_enum, default_value = "auto")]
    pub color: ColorWhen,
    /// Print the report as JSON (docs/audit-json-schema.md).
    #[arg(long, conflicts_with = "quiet")]
    pub json: bool,
    /// Print the JSON Schema (draft 2020-12) of the --json report, derived from its types, and
    /// audit nothing (docs/audit-json-schema.json is this output).
    #[arg(long, exclusive = true)]
    pub json_schema: bool,
    /// Print nothing; the exit code says it all.
    #[arg(long)]
    pub quiet: bool,
    /// Lowest severity that makes the exit code 1.
    #[arg(long, value_enum, default_value = "error")]
    pub fail_on: FailOn,
    /// Skip decompressing cubins (no kernel names, no per-kernel rule): headers only.
    #[arg(long)]
    pub no_kernels: bool,
    /// The GPU reach grid per library (does it run on each GPU: kernels specialised for other
    /// GPUs are dispatch, not holes) or per kernel (the worst kernel). --json carries both.
    #[arg(long, value_enum, default_value = "library")]
    pub reach: ReachView,
    /// Largest wheel member read, in bytes (zip-bomb guard).
    #[arg(long, default_value_t = Options::default().max_member_size)]
    pub max_member_size: u64,
    /// Largest input read, in bytes: the file itself, the sum of the members' declared sizes,
    /// the bytes actually inflated from them, or a directory's files together.
    #[arg(long, default_value_t = Options::default().max_total_size)]
    pub max_total_size: u64,
    /// Show every binary and every coverage row (default: the noteworthy ones, 12 rows per binary).
    #[arg(long)]
    pub full: bool,
    /// Stop listing facts in --json past this many bytes of output, and say in "omitted" how many
    /// items each list left out (counts and findings' totals stay exact). Default: 1 MiB or the
    /// input's size, whichever is larger.
    #[arg(long, value_name = "BYTES")]
    pub max_json_size: Option<usize>,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ReachView {
    Library,
    Kernel,
}

#[derive(Clone, Copy, ValueEnum)]
pub enum FailOn {
    Error,
    Warning,
    Info,
    Never,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let Some(input) = args.input.clone() else {
        // clap requires INPUT unless --json-schema, which allows no other argument.
        println!(
            "{}",
            serde_json::to_string_pretty(&kiln_audit::json::schema())?
        );
        return Ok(ExitCode::SUCCESS);
    };
    let policy = build_policy(&args)?;
    let opts = Options {
        list_kernels: !args.no_kernels,
        max_member_size: args.max_member_size,
        max_total_size: args.max_total_size,
    };
    let progress = Bar::new(args.quiet || args.json);
    let report = kiln_audit::audit(&input, &policy, &opts, &progress).map_err(error)?;
    for a in &report.unused_allows {
        eprintln!("kiln audit: warning: waiver {a} matched no finding");
    }
    let threshold = match args.fail_on {
        FailOn::Error => Some(Severity::Error),
        FailOn::Warning => Some(Severity::Warning),
        FailOn::Info => Some(Severity::Info),
        FailOn::Never => None,
    };
    let failed = matches!((report.worst(), threshold), (Some(w), Some(t)) if w >= t);
    // Stdout is line-buffered: the pretty JSON of a large wheel (64 MB for cuDNN) was one write
    // per line, a tenth of its audit.
    let mut out = std::io::BufWriter::with_capacity(1 << 20, std::io::stdout().lock());
    let written = if args.quiet {
        Ok(())
    } else if args.json {
        let budget = args
            .max_json_size
            .unwrap_or_else(|| kiln_audit::json::default_budget(input_bytes(&input, &report)));
        kiln_audit::json::write(&mut out, &report, budget).map(drop)
    } else {
        render(
            &mut out,
            &report,
            failed,
            args.full,
            args.reach,
            Paint::for_stdout(args.color),
        )
    };
    // A write error at the final flush is reported like any other.
    let written = written.and_then(|()| out.flush());
    match written {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(error(e).context("writing the report"))
        }
        _ => Ok(exit_code(failed)),
    }
}

/// The input's size as read: the file's length, or a directory's binaries together.
fn input_bytes(input: &std::path::Path, report: &Report) -> u64 {
    match std::fs::metadata(input) {
        Ok(m) if m.is_file() => m.len(),
        _ => report.binaries.iter().map(|b| b.size).sum(),
    }
}

fn build_policy(args: &Args) -> anyhow::Result<Policy> {
    let pins = match &args.policy {
        Some(path) => Some(kiln_pins::Pins::load(path).map_err(error)?),
        None => None,
    };
    let mut policy = Policy::from_flags(
        pins.as_ref(),
        args.expect_sass.as_deref(),
        args.expect_ptx.as_deref(),
        args.min_driver,
        args.platform.as_deref(),
    )
    .map_err(error)?;
    for a in &args.allow {
        policy
            .allow
            .push(kiln_audit::Allow::parse(a).map_err(|e| error(e).context("--allow"))?);
    }
    if let Some(list) = &args.require_gpus {
        policy.require_gpus =
            Some(kiln_audit::parse_gpu_list(list).map_err(|e| error(e).context("--require-gpus"))?);
    }
    Ok(policy)
}

/// A byte progress bar on stderr, shown only for inputs over 64 MiB on a terminal.
struct Bar {
    bar: indicatif::ProgressBar,
    silent: bool,
}

impl Bar {
    fn new(silent: bool) -> Bar {
        Bar {
            bar: indicatif::ProgressBar::hidden(),
            silent,
        }
    }
}

impl kiln_audit::Progress for Bar {
    fn begin(&self, total: u64, what: &str) {
        if self.silent || total < (64 << 20) {
            return;
        }
        self.bar
            .set_draw_target(indicatif::ProgressDrawTarget::stderr());
        self.bar.set_length(total);
        self.bar.set_style(
            indicatif::ProgressStyle::with_template(
                "{msg} [{bar:30}] {bytes}/{total_bytes} {elapsed}",
            )
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        self.bar.set_message(what.to_string());
    }
    fn advance(&self, bytes: u64) {
        self.bar.inc(bytes);
    }
    fn end(&self) {
        self.bar.finish_and_clear();
    }
}

/// Binaries listed without --full (each is one line; a wheel of 30k tiny ELFs would otherwise
/// print 30k lines).
const BINARY_LINES: usize = 200;
/// Coverage matrices printed without --full.
const COVERAGE_TABLES: usize = 20;

fn width() -> usize {
    std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.parse().ok())
        .filter(|&w| w >= 60)
        .unwrap_or(100)
}

fn render(
    out: &mut impl Write,
    r: &Report,
    failed: bool,
    full: bool,
    view: ReachView,
    paint: Paint,
) -> std::io::Result<()> {
    let c = &r.counts;
    report_text::verdict(out, r, failed, paint)?;
    writeln!(
        out,
        "  {:?}: {} binaries, {} with device code; {} fatbin containers, {} cubins, {} PTX, {} kernels",
        r.kind, c.binaries, c.binaries_with_device_code, c.fatbin_containers, c.cubins, c.ptx, c.kernels
    )?;
    if r.policy.is_empty() {
        writeln!(out, "  no policy: facts and policy-free rules only (use --policy or --expect-sass/--expect-ptx/--min-driver/--require-gpus/--platform)")?;
    }
    report_text::findings(out, r, full, paint)?;
    report_text::waived(out, r, full, paint)?;
    report_text::manylinux(out, &r.manylinux)?;
    writeln!(out, "\nBinaries")?;
    // Without --full: binaries with device code or findings (at most BINARY_LINES); the rest
    // are counted. Lookups are by set and map: one pass over findings and linkage, not one per
    // binary.
    let with_findings: HashSet<&str> = r.findings.iter().map(|f| f.file.as_str()).collect();
    let mut unresolved_of: HashMap<&str, usize> = HashMap::new();
    for l in r.linkage.iter().filter(|l| l.via == Via::Unresolved) {
        *unresolved_of.entry(l.file.as_str()).or_default() += 1;
    }
    let noteworthy = |b: &&kiln_audit::Binary| {
        full || b.device.is_some() || with_findings.contains(b.path.as_str())
    };
    let listed: Vec<&kiln_audit::Binary> = r
        .binaries
        .iter()
        .filter(noteworthy)
        .take(if full { usize::MAX } else { BINARY_LINES })
        .collect();
    let hidden = r.binaries.len() - listed.len();
    for b in listed {
        let mut line = format!("  {}", esc(&b.path));
        if let Some(elf) = &b.elf {
            let unresolved = unresolved_of.get(b.path.as_str()).copied().unwrap_or(0);
            let glibc = elf
                .max_glibc
                .map(|(a, b)| format!(" GLIBC_{a}.{b}"))
                .unwrap_or_default();
            line += &format!(
                "  NEEDED {} ({} unresolved){glibc}",
                elf.needed.len(),
                unresolved
            );
            if !elf.runpath.is_empty() || !elf.rpath.is_empty() {
                let mut rp = elf
                    .runpath
                    .iter()
                    .chain(&elf.rpath)
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(":");
                if rp.chars().count() > 48 && !full {
                    rp = rp.chars().take(47).collect::<String>() + "…";
                }
                line += &format!(" RUNPATH {}", esc(&rp));
            }
            if !elf.dlopen.is_empty() {
                line += &format!(" dlopen-notes {}", elf.dlopen.len());
            }
        } else if b.device.is_none() {
            line += "  (unreadable)";
        }
        if let Some(d) = &b.device {
            let isas: std::collections::BTreeSet<&str> = d
                .entries
                .iter()
                .filter_map(|e| e.ptx_isa.as_deref())
                .collect();
            line += &format!(
                " | fatbin: {} containers, {} cubins, {} PTX{}",
                d.containers,
                d.entries
                    .iter()
                    .filter(|e| e.kind == EntryKind::Cubin)
                    .count(),
                d.entries
                    .iter()
                    .filter(|e| e.kind == EntryKind::Ptx)
                    .count(),
                if isas.is_empty() {
                    String::new()
                } else {
                    format!(
                        " (ISA {})",
                        esc(&isas.into_iter().collect::<Vec<_>>().join(","))
                    )
                }
            );
        }
        writeln!(out, "{line}")?;
        if let Some(m) = b.elf.as_ref().and_then(|e| e.build_manifest.as_ref()) {
            let p = &m.provenance;
            let commit: String = p.commit.chars().take(12).collect();
            writeln!(
                out,
                "    build manifest: commit {}{} | nvcc {} | {} | matrix {} | {} targets",
                esc(&commit),
                if p.dirty { " (dirty)" } else { "" },
                esc(&m.toolchain.nvcc),
                if p.rustc.is_empty() {
                    "rustc ?".into()
                } else {
                    esc(&p.rustc)
                },
                esc(&m.matrix_text()),
                m.targets.len()
            )?;
            if !m.kernel_languages.is_empty() {
                let (cuda, rust) = (m.kernels_in("cuda").len(), m.kernels_in("rust").len());
                let rustc = m.kernel_rustc_version.lines().next().unwrap_or("?");
                let rustc = if rust > 0 {
                    format!(" (kernel {})", esc(rustc))
                } else {
                    String::new()
                };
                writeln!(
                    out,
                    "    kernel sources: {cuda} CUDA C++, {rust} Rust{rustc}"
                )?;
            }
        }
    }
    if hidden > 0 {
        writeln!(
            out,
            "  … {hidden} more binaries (host-only without findings, or past the first {BINARY_LINES}; --full lists them)"
        )?;
    }
    let tables = if full { usize::MAX } else { COVERAGE_TABLES };
    for cov in r.coverage.iter().take(tables) {
        render_coverage(out, cov, full)?;
    }
    if r.coverage.len() > tables {
        writeln!(
            out,
            "\n… {} more coverage tables (--full or --json lists them)",
            r.coverage.len() - tables
        )?;
    }
    // Binaries whose device code (some of it) sits outside .nv_fatbin: the library loads it.
    let mut own_loader: HashMap<&str, Vec<&str>> = HashMap::new();
    for b in &r.binaries {
        for e in b.device.iter().flat_map(|d| &d.entries) {
            if let Some(s) = &e.section {
                let v = own_loader.entry(b.path.as_str()).or_default();
                if !v.contains(&s.as_str()) {
                    v.push(s);
                }
            }
        }
    }
    render_reach(out, &r.reach, &own_loader, view)?;
    // Again last: after a long report the verdict is what the eye lands on.
    writeln!(out)?;
    report_text::verdict(out, r, failed, paint)
}

/// Binary columns in the reach grid (past them, the "all" column still covers every binary).
const REACH_COLUMNS: usize = 6;

/// What the verdict did not look at: under --no-kernels, which kernel reaches which GPU.
pub(crate) fn reach_scope(reach: &Reach) -> &'static str {
    if reach.kernels_listed || reach.binaries.is_empty() {
        ""
    } else {
        " (headers only: per-kernel GPU reach NOT checked)"
    }
}

/// A cell as the grid prints it: "exact", "compat", "family", "ptx580", "ptx?"; "-" when no
/// kernel gets there, "-N" when N kernels that should do not (per library: holes; per kernel:
/// every kernel without a way there).
fn reach_label(c: &ReachCell, view: ReachView) -> String {
    let (path, driver, missing) = match view {
        ReachView::Library => (c.path, c.min_driver, c.holes_count),
        ReachView::Kernel => (c.kernel_path, c.kernel_min_driver, c.unreached_count),
    };
    match path {
        ReachPath::Exact => "exact".into(),
        ReachPath::Compatible => "compat".into(),
        ReachPath::Family => "family".into(),
        ReachPath::Ptx => match driver {
            Some(d) => format!("ptx{d}"),
            None => "ptx?".into(),
        },
        ReachPath::None if c.reached_count > 0 && missing > 0 => format!("-{missing}"),
        ReachPath::None => "-".into(),
    }
}

/// The grid's legend: every symbol it can print, and what the rows leave out.
fn render_reach_legend(
    out: &mut impl Write,
    reach: &Reach,
    view: ReachView,
) -> std::io::Result<()> {
    let driver = reach
        .driver
        .map(|d| format!("; PTX counts only within driver {d}"))
        .unwrap_or_default();
    let what = match view {
        ReachView::Library => "per library: does it run there — kernels specialised for other GPUs are dispatch, not holes; --reach kernel for the worst kernel",
        ReachView::Kernel => "per kernel: the worst kernel shown; --reach library for where each library runs",
    };
    writeln!(out, "\nGPU reach ({what})")?;
    writeln!(
        out,
        "  exact = SASS for that GPU, compat = SASS of a lower minor, family = `f` SASS of its family, ptxNNN = PTX JIT from driver NNN, ptx? = PTX whose ISA no driver in kiln's table is known to JIT, -N = N kernels{} have no way there, - = no kernel runs there{driver}",
        match view {
            ReachView::Library => " meant for it",
            ReachView::Kernel => "",
        }
    )?;
    if !reach.kernels_listed {
        writeln!(out, "  NOT CHECKED per kernel: --no-kernels read the fatbin headers only, so which kernel has which target is unknown; a cell says only whether some code of the binary runs there")?;
    }
    if !reach.omitted.is_empty() {
        let gens: Vec<&str> = reach
            .omitted
            .iter()
            .map(|o| o.generation.as_str())
            .collect();
        writeln!(
            out,
            "  no row for {}: those GPUs only come with an Arm (aarch64) CPU and the binaries are {}",
            gens.join(", "),
            reach.cpu.join(", ")
        )?;
    }
    Ok(())
}

/// Rows = GPU generations (a fixed table), columns = the first binaries with device code and
/// the input as a whole: bounded whatever the input holds.
fn render_reach(
    out: &mut impl Write,
    reach: &Reach,
    own_loader: &HashMap<&str, Vec<&str>>,
    view: ReachView,
) -> std::io::Result<()> {
    if reach.binaries.is_empty() {
        return Ok(());
    }
    render_reach_legend(out, reach, view)?;
    let shown = &reach.binaries[..reach.binaries.len().min(REACH_COLUMNS)];
    let colw = 8;
    write!(out, "  {:<6}", "GPU")?;
    for i in 0..shown.len() {
        write!(out, "{:>colw$}", format!("[{}]", i + 1))?;
    }
    writeln!(out, "{:>colw$}  products", "all")?;
    for (row, g) in reach.generations.iter().enumerate() {
        write!(out, "  {g:<6}")?;
        for b in shown {
            write!(out, "{:>colw$}", reach_label(&b.cells[row], view))?;
        }
        let c = &reach.whole[row];
        let products = kiln_pins::gpu_generation(c.capability.0, c.capability.1)
            .map(|g| g.products)
            .unwrap_or("");
        writeln!(out, "{:>colw$}  {products}", reach_label(c, view))?;
    }
    for (i, b) in shown.iter().enumerate() {
        let loader = own_loader
            .get(b.file.as_str())
            .map(|sections| {
                let names: Vec<String> = sections.iter().map(|s| esc(s).into_owned()).collect();
                format!(
                    "; device code in {} loaded by the library itself",
                    names.join(", ")
                )
            })
            .unwrap_or_default();
        let kind = if b.strict && b.specialised > 0 {
            // A kiln-built binary's specialised kernels are the ones its manifest gates.
            format!(
                "; kiln-built: every kernel counts everywhere but {} gated to the targets its manifest declares",
                b.specialised
            )
        } else if b.strict {
            "; kiln-built: every kernel counts everywhere".to_string()
        } else if b.specialised > 0 {
            format!("; {} specialised for some GPUs", b.specialised)
        } else {
            String::new()
        };
        writeln!(
            out,
            "  [{}] {} ({} kernels{kind}, targets {}–{}{loader})",
            i + 1,
            esc(&b.file),
            b.kernels,
            esc(&b.lowest),
            esc(&b.highest)
        )?;
    }
    if reach.binaries.len() > shown.len() {
        writeln!(
            out,
            "  … {} more binaries with device code (in `all`; --json lists each)",
            reach.binaries.len() - shown.len()
        )?;
    }
    Ok(())
}

/// Kernel x target matrix; identical rows folded; columns wrap to fit the terminal.
fn render_coverage(out: &mut impl Write, cov: &Coverage, full: bool) -> std::io::Result<()> {
    if let Some(why) = &cov.not_tabulated {
        return writeln!(out, "\nCoverage: {}: {why}", esc(&cov.file));
    }
    if cov.rows.is_empty() {
        return Ok(());
    }
    let short: Vec<String> = cov.targets.iter().map(|t| t.label()).collect();
    let colw = short.iter().map(|s| s.len()).max().unwrap_or(3).max(3) + 1;
    let total_w = width();
    let label_w = 36.min(total_w / 2);
    let per_line = ((total_w - label_w - 2) / colw).max(1);
    let kernels: usize = cov.rows.iter().map(|r| r.kernels.len()).sum();
    writeln!(
        out,
        "\nCoverage: {} ({} kernels, {} distinct target sets; x = present)",
        esc(&cov.file),
        kernels,
        cov.rows.len()
    )?;
    let shown = if full {
        cov.rows.len()
    } else {
        cov.rows.len().min(12)
    };
    for chunk_start in (0..short.len()).step_by(per_line) {
        let cols = chunk_start..(chunk_start + per_line).min(short.len());
        write!(out, "  {:<label_w$}", "kernels")?;
        for s in &short[cols.clone()] {
            write!(out, "{s:>colw$}")?;
        }
        writeln!(out)?;
        for row in &cov.rows[..shown] {
            let raw = &row.kernels[0];
            let readable = kiln_audit::demangle::demangle(raw);
            let first = esc(readable.as_deref().unwrap_or(raw)).into_owned();
            let more = if row.kernels.len() > 1 {
                format!(" +{}", row.kernels.len() - 1)
            } else {
                String::new()
            };
            let room = label_w.saturating_sub(more.len() + 1);
            let name: String = if first.chars().count() > room {
                first
                    .chars()
                    .take(room.saturating_sub(1))
                    .collect::<String>()
                    + "…"
            } else {
                first
            };
            write!(out, "  {:<label_w$}", format!("{name}{more}"))?;
            for p in &row.present[cols.clone()] {
                write!(out, "{:>colw$}", if *p { "x" } else { "-" })?;
            }
            writeln!(out)?;
        }
    }
    if shown < cov.rows.len() {
        writeln!(
            out,
            "  … {} more target sets (--full shows all)",
            cov.rows.len() - shown
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use kiln_audit::BinaryReach;

    fn cell(g: &kiln_pins::GpuGeneration, path: ReachPath) -> ReachCell {
        ReachCell {
            generation: g.capability(),
            capability: (g.major, g.minor),
            path,
            min_driver: (path == ReachPath::Ptx).then_some(580),
            reached_count: if path == ReachPath::None { 0 } else { 1 },
            holes: Vec::new(),
            holes_count: 0,
            dispatched_count: 0,
            kernel_path: path,
            kernel_min_driver: (path == ReachPath::Ptx).then_some(580),
            unreached: Vec::new(),
            unreached_count: 0,
        }
    }

    fn reach_of(binaries: Vec<BinaryReach>, whole: Vec<ReachCell>) -> Reach {
        Reach {
            generations: kiln_pins::GPU_GENERATIONS
                .iter()
                .map(|g| g.capability())
                .collect(),
            cpu: Vec::new(),
            omitted: Vec::new(),
            driver: None,
            kernels_listed: true,
            binaries,
            whole,
        }
    }

    fn binary(file: String, cells: Vec<ReachCell>) -> BinaryReach {
        BinaryReach {
            file,
            kernels: 1,
            specialised: 0,
            strict: false,
            lowest: "8.0".into(),
            highest: "12.0".into(),
            range: ((8, 0), (12, 0)),
            cells,
        }
    }

    fn text(reach: &Reach, view: ReachView) -> String {
        let mut out = Vec::new();
        render_reach(&mut out, reach, &HashMap::new(), view).unwrap();
        String::from_utf8(out).unwrap()
    }

    /// Eight binaries, one with a bidi character in its name: six columns plus `all`, one row per
    /// generation, the rest counted, every name escaped.
    #[test]
    fn reach_grid_is_capped_and_escaped() {
        let gens = kiln_pins::GPU_GENERATIONS;
        let cells = |p| gens.iter().map(|g| cell(g, p)).collect::<Vec<_>>();
        let binaries = (0..8)
            .map(|i| {
                binary(
                    format!("lib{i}\u{202e}.so"),
                    cells(if i == 0 {
                        ReachPath::Ptx
                    } else {
                        ReachPath::Exact
                    }),
                )
            })
            .collect();
        let mut whole = cells(ReachPath::None);
        whole[1].reached_count = 5;
        whole[1].holes_count = 3;
        let text = text(&reach_of(binaries, whole), ReachView::Library);
        let lines: Vec<&str> = text.lines().filter(|l| !l.is_empty()).collect();
        assert_eq!(lines.len(), 2 + 1 + gens.len() + 6 + 1, "{text}");
        assert!(
            lines[2].contains("[6]") && !lines[2].contains("[7]"),
            "{text}"
        );
        assert!(
            lines[3].starts_with("  7.5") && lines[3].contains("ptx580"),
            "{text}"
        );
        // 7.5: nothing runs ("-"); 8.0: 3 holes among kernels that do run ("-3").
        assert!(
            lines[3].contains("exact") && lines[3].contains(" -  T4"),
            "{text}"
        );
        assert!(lines[4].contains(" -3  A100"), "{text}");
        assert!(text.contains("… 2 more binaries"), "{text}");
        assert!(
            !text.contains('\u{202e}') && text.contains("\\u{202E}"),
            "{text}"
        );
    }

    /// Every symbol the grid can print is in its legend, `ptx?` included.
    #[test]
    fn the_legend_names_every_symbol() {
        let gens = kiln_pins::GPU_GENERATIONS;
        let paths = [
            ReachPath::Exact,
            ReachPath::Compatible,
            ReachPath::Family,
            ReachPath::Ptx,
            ReachPath::None,
        ];
        let mut cells: Vec<ReachCell> = gens
            .iter()
            .enumerate()
            .map(|(i, g)| cell(g, paths[i % paths.len()]))
            .collect();
        cells[3].min_driver = None; // ptx?
        cells[3].kernel_min_driver = None;
        cells[4].reached_count = 2;
        cells[4].holes_count = 1;
        cells[4].unreached_count = 1;
        for view in [ReachView::Library, ReachView::Kernel] {
            let reach = reach_of(vec![binary("lib.so".into(), cells.clone())], cells.clone());
            let text = text(&reach, view);
            let legend = text.lines().nth(2).unwrap();
            let grid: Vec<&str> = text.lines().skip(4).take(gens.len()).collect();
            let mut symbols: Vec<String> = grid
                .iter()
                .flat_map(|l| l.split_whitespace().skip(1).take(2))
                .map(|s| {
                    if s.starts_with("ptx") && s != "ptx?" {
                        "ptxNNN".to_string()
                    } else if s.starts_with('-') && s.len() > 1 {
                        "-N".to_string()
                    } else {
                        s.to_string()
                    }
                })
                .collect();
            symbols.sort();
            symbols.dedup();
            assert_eq!(symbols.len(), 7, "{symbols:?}\n{text}");
            for s in symbols {
                assert!(
                    legend.contains(&format!("{s} =")),
                    "{s} not in the legend: {legend}"
                );
            }
        }
    }

    /// --no-kernels: the verdict and the grid say that per-kernel reach was not looked at; rows
    /// left out for the CPU are named.
    #[test]
    fn headers_only_and_omitted_rows_are_said() {
        let gens = kiln_pins::GPU_GENERATIONS;
        let cells: Vec<ReachCell> = gens.iter().map(|g| cell(g, ReachPath::Exact)).collect();
        let mut reach = reach_of(vec![binary("lib.so".into(), cells.clone())], cells);
        assert_eq!(reach_scope(&reach), "");
        reach.kernels_listed = false;
        reach.omitted.push(kiln_audit::OmittedGeneration {
            generation: "11.0".into(),
            why: "x".into(),
        });
        reach.cpu = vec!["x86_64".into()];
        assert!(reach_scope(&reach).contains("NOT checked"));
        let text = text(&reach, ReachView::Library);
        assert!(text.contains("NOT CHECKED per kernel"), "{text}");
        assert!(
            text.contains("no row for 11.0") && text.contains("x86_64"),
            "{text}"
        );
    }
}
