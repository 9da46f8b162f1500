//! The orchestration: preflight, plan, compile, link, combine, describe.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Instant;

use kiln_pins::{Pins, Target};

use crate::cache::Cache;
use crate::error::{io, BuildError};
use crate::jobs::{CompileJob, LinkJob, Outcome};
use crate::plan::{Plan, PlannedJob, Stage};
use kiln_manifest::Manifest;

use crate::derived_manifest;
use crate::progress::{self, Summary};
use crate::rust::{self, PtxasJob, RustCrate, RustPtxJob};
use crate::toolkit::{self, Toolkit};
use crate::{abi, deps, fatbin, pool};

/// Flags every nvcc job gets. No `-lineinfo`/`-G`: they embed source paths and break
/// byte-identical rebuilds.
const BASE_FLAGS: &[&str] = &["-std=c++17", "-O3"];

/// Files a kernel build writes into its output directory.
#[derive(Debug, Clone)]
pub struct BuildOutput {
    pub fatbin: PathBuf,
    pub manifest_path: PathBuf,
    pub abi: Option<PathBuf>,
    pub manifest: Manifest,
    pub summary: Summary,
}

pub struct KernelBuild {
    pins: Pins,
    kernels_dir: PathBuf,
    out_dir: PathBuf,
    cache_dir: PathBuf,
    /// Print `cargo:` directives (only inside a build script).
    cargo: bool,
    bindgen: bool,
    progress: bool,
    client: jobserver::Client,
    env: EnvLookup,
}

/// Where the build reads its environment: the process's, or a test's table.
type EnvLookup = Box<dyn Fn(&str) -> Option<OsString> + Send + Sync>;

impl KernelBuild {
    /// For `build.rs`: pins from the nearest Cargo.toml at or above CARGO_MANIFEST_DIR with a
    /// kiln table (the crate's own `[package.metadata.kiln]`, else its workspace's), sources
    /// from `kernels/` beside that Cargo.toml, outputs in OUT_DIR, cargo's jobserver.
    pub fn for_build_script() -> Result<KernelBuild, BuildError> {
        let var = |k: &str| {
            std::env::var_os(k)
                .ok_or_else(|| BuildError::Env(format!("{k} is not set (not in a build script?)")))
        };
        let manifest_dir = PathBuf::from(var("CARGO_MANIFEST_DIR")?);
        let out_dir = PathBuf::from(var("OUT_DIR")?);
        let pins = Pins::discover(&manifest_dir)?;
        println!("cargo:rerun-if-env-changed={}", crate::nix_matrix::VAR);
        let nix_caps = std::env::var(crate::nix_matrix::VAR).ok();
        crate::nix_matrix::check(&pins.matrix, nix_caps.as_deref())?;
        let kernels = pins.root().join("kernels");
        let mut b = KernelBuild::new(pins, kernels, out_dir.clone());
        b.cache_dir = shared_cache_dir(&out_dir, std::env::var_os("TARGET").as_deref());
        b.cargo = true;
        Ok(b)
    }

    /// A build of `kernels_dir` into `out_dir` (cache inside it unless [`Self::cache_dir`]).
    pub fn new(pins: Pins, kernels_dir: PathBuf, out_dir: PathBuf) -> KernelBuild {
        KernelBuild {
            pins,
            cache_dir: out_dir.join("kernel-cache"),
            kernels_dir,
            out_dir,
            cargo: false,
            bindgen: true,
            progress: true,
            client: pool::client_from_env_or_cpus(),
            env: Box::new(|k| std::env::var_os(k)),
        }
    }

    pub fn cache_dir(mut self, dir: PathBuf) -> Self {
        self.cache_dir = dir;
        self
    }

    pub fn bindgen(mut self, on: bool) -> Self {
        self.bindgen = on;
        self
    }

    pub fn progress(mut self, on: bool) -> Self {
        self.progress = on;
        self
    }

    /// Replaces the environment nvcc is located from (tests).
    pub fn env(mut self, env: impl Fn(&str) -> Option<OsString> + Send + Sync + 'static) -> Self {
        self.env = Box::new(env);
        self
    }

    pub fn jobserver(mut self, client: jobserver::Client) -> Self {
        self.client = client;
        self
    }

    pub fn run(self) -> Result<BuildOutput, BuildError> {
        let started = Instant::now();
        let include_dir = self.kernels_dir.join("include");
        if self.cargo {
            self.emit_rerun_directives();
        }

        // Preflight: seconds, before any compile.
        let nvcc = toolkit::locate(&*self.env, self.pins.root())?;
        let tk = toolkit::preflight(&nvcc, &self.pins)?;
        let sources = sources(&self.kernels_dir)?;
        // The Rust kernel crate, if any: its rustc is checked before anything compiles too.
        let rust_crate = RustCrate::discover(&self.kernels_dir)?;
        let rustc = match &rust_crate {
            Some(_) => Some(rust::locate(&*self.env, &self.pins)?),
            None => None,
        };
        if let (true, Some(krate)) = (self.cargo, &rust_crate) {
            println!("cargo:rerun-if-env-changed=KILN_KERNEL_RUSTC");
            for f in &krate.files {
                println!("cargo:rerun-if-changed={}", f.display());
            }
        }
        let flags = flags(&include_dir);
        let cache = Cache::new(self.cache_dir.clone())?;
        std::fs::create_dir_all(&self.out_dir)
            .map_err(io(format!("creating {}", self.out_dir.display())))?;

        // Which project headers each source reads (part of its cache key).
        let header_sets = pool::run(
            &sources,
            &self.client,
            |s| deps::project_headers(&tk.nvcc, s, &flags, &self.kernels_dir),
            |_, _| {},
        );
        let targets = self.pins.matrix.targets();
        let mut compile_jobs = Vec::new();
        for (source, headers) in sources.iter().zip(header_sets) {
            let headers = headers?;
            if self.cargo {
                for h in &headers {
                    println!("cargo:rerun-if-changed={}", h.display());
                }
            }
            let name = source
                .strip_prefix(&self.kernels_dir)
                .unwrap_or(source)
                .display()
                .to_string();
            for t in &targets {
                compile_jobs.push(CompileJob::new(
                    source,
                    &name,
                    headers.clone(),
                    *t,
                    &flags,
                    &tk,
                    &self.kernels_dir,
                )?);
            }
        }

        let rust_job = match (&rust_crate, &rustc) {
            (Some(krate), Some(rc)) => Some(RustPtxJob::new(krate.clone(), rc, &self.kernels_dir)?),
            _ => None,
        };
        // The Rust crate compiles while the nvcc jobs do (it takes a jobserver token too).
        let (compiled, rust_ptx) = std::thread::scope(|s| {
            let rust = s.spawn(|| {
                let (Some(job), Some(rc)) = (&rust_job, &rustc) else {
                    return Ok(None);
                };
                let r = pool::run(
                    std::slice::from_ref(job),
                    &self.client,
                    |j| j.run(rc, &cache, &self.client),
                    |_, r| {
                        if let (true, Ok(o)) = (self.progress, r) {
                            if !o.cached {
                                progress::job_line(
                                    1,
                                    1,
                                    "compiled",
                                    rust::CRATE_DIR,
                                    rust::PTX_CPU,
                                    o.elapsed,
                                );
                            }
                        }
                    },
                );
                r.into_iter().next().expect("one job").map(Some)
            });
            let compiled = self.run_compiles(&tk, &flags, &cache, &compile_jobs);
            (
                compiled,
                rust.join().expect("the Rust kernel job does not panic"),
            )
        });
        let (compiled, rust_ptx) = (compiled?, rust_ptx?);
        let mut rust_outcomes: Vec<Outcome> = rust_ptx.iter().cloned().collect();
        let ptxas_jobs: Vec<PtxasJob> = match &rust_ptx {
            Some(ptx) => targets
                .iter()
                .filter(|t| t.kind == kiln_pins::TargetKind::Sass)
                .map(|t| PtxasJob::new(*t, &ptx.output, &tk))
                .collect::<Result<_, _>>()?,
            None => Vec::new(),
        };
        let ptxas_done = first_error(pool::run(
            &ptxas_jobs,
            &self.client,
            |j| j.run(&tk, &cache),
            |j, r| {
                if let (true, Ok(o)) = (self.progress, r) {
                    if !o.cached {
                        progress::job_line(1, 1, "ptxas", "rust", &j.target.name(), o.elapsed);
                    }
                }
            },
        ))?;
        let link_jobs: Vec<LinkJob> = targets
            .iter()
            .map(|t| {
                let rust_objects = ptxas_jobs
                    .iter()
                    .zip(&ptxas_done)
                    .filter(|(j, _)| j.target == *t)
                    .map(|(j, o)| (j.key.clone(), o.output.clone()));
                let inputs = compile_jobs
                    .iter()
                    .zip(&compiled)
                    .filter(|(j, _)| j.target == *t)
                    .map(|(j, o)| (j.key.clone(), o.output.clone()))
                    .chain(rust_objects)
                    .collect();
                LinkJob::new(*t, inputs, &tk)
            })
            .collect();
        let mut linked = self.run_links(&tk, &cache, &link_jobs)?;
        rust_outcomes.extend(ptxas_done);
        // A +PTX target's module is PTX: the Rust PTX is appended to the linked C++ PTX.
        if let Some(ptx) = &rust_ptx {
            for (job, out) in link_jobs.iter().zip(linked.iter_mut()) {
                if job.target.kind == kiln_pins::TargetKind::Ptx {
                    let merged =
                        rust::merge_ptx(&tk, &cache, job.target, &out.output, &ptx.output)?;
                    out.output = merged.output.clone();
                    rust_outcomes.push(merged);
                }
            }
        }

        // What each linked output really holds.
        let names = sources
            .iter()
            .map(|s| {
                s.strip_prefix(&self.kernels_dir)
                    .unwrap_or(s)
                    .display()
                    .to_string()
            })
            .collect();
        let mut manifest =
            derived_manifest::new(&self.pins, &tk.version, &flags_for_manifest(&flags), names);
        for (job, out) in link_jobs.iter().zip(&linked) {
            derived_manifest::add_output(&mut manifest, job.target, &out.output)?;
        }
        let (rust_kernels, rustc_vv) = match (&rust_ptx, &rustc) {
            (Some(ptx), Some(rc)) => (rust::kernels(&ptx.output)?, rc.version_verbose.clone()),
            _ => (Vec::new(), String::new()),
        };
        derived_manifest::record_languages(&mut manifest, &rust_kernels, &rustc_vv);
        let gaps = manifest.gaps();
        if !gaps.is_empty() {
            let list: Vec<String> = gaps
                .iter()
                .map(|(t, k)| format!("{k} missing for {t}"))
                .collect();
            return Err(BuildError::BadOutput {
                source_file: self.kernels_dir.clone(),
                output: "fatbin".into(),
                message: format!(
                    "not every kernel was built for every target: {}",
                    list.join("; ")
                ),
            });
        }

        let fatbin_path = self.out_dir.join("kernels.fatbin");
        let pairs: Vec<(LinkJob, PathBuf)> = link_jobs
            .iter()
            .cloned()
            .zip(linked.iter().map(|o| o.output.clone()))
            .collect();
        fatbin::combine(&tk, &pairs, &fatbin_path)?;
        let abi = if self.bindgen {
            let out = self.out_dir.join("kiln_abi.rs");
            manifest.provenance.clang = abi::generate(&self.pins, &include_dir, &out)?;
            Some(out)
        } else {
            None
        };
        let clang = std::mem::take(&mut manifest.provenance.clang);
        manifest.provenance = crate::provenance::collect(self.pins.root(), &*self.env, self.cargo);
        manifest.provenance.clang = clang;
        let manifest_path = self.out_dir.join("kernels.manifest.json");
        std::fs::write(&manifest_path, manifest.to_json()).map_err(io("writing the manifest"))?;

        let summary = Summary {
            sources: sources.len(),
            targets: targets.iter().map(Target::name).collect(),
            compile_jobs: compile_jobs.len(),
            compiled: compiled.iter().filter(|o| !o.cached).count(),
            cached: compiled.iter().filter(|o| o.cached).count(),
            link_jobs: link_jobs.len(),
            linked: linked.iter().filter(|o| !o.cached).count(),
            rust_jobs: rust_outcomes.len(),
            rust_compiled: rust_outcomes.iter().filter(|o| !o.cached).count(),
            wall_seconds: started.elapsed().as_secs_f64(),
            fatbin_bytes: std::fs::metadata(&fatbin_path)
                .map(|m| m.len())
                .unwrap_or(0),
        };
        std::fs::write(
            self.out_dir.join("kernels.summary.json"),
            serde_json::to_string_pretty(&summary).unwrap(),
        )
        .map_err(io("writing the summary"))?;
        if self.progress {
            eprintln!("{summary}");
        }
        if self.cargo {
            println!("cargo:warning={summary}");
        }
        Ok(BuildOutput {
            fatbin: fatbin_path,
            manifest_path,
            abi,
            manifest,
            summary,
        })
    }

    /// The compile and link jobs of a build, not run (see [`crate::plan`]). Covers the CUDA C++
    /// sources; a `kernels/rust` crate is refused (its cargo + ptxas jobs are not planned yet).
    pub fn plan(self) -> Result<Plan, BuildError> {
        let include_dir = self.kernels_dir.join("include");
        let nvcc = toolkit::locate(&*self.env, self.pins.root())?;
        let tk = toolkit::preflight(&nvcc, &self.pins)?;
        if RustCrate::discover(&self.kernels_dir)?.is_some() {
            return Err(BuildError::Env(format!(
                "{}: a Rust kernel crate is present; --emit-plan covers CUDA C++ sources only",
                self.kernels_dir.join(rust::CRATE_DIR).display()
            )));
        }
        let sources = sources(&self.kernels_dir)?;
        let flags = flags(&include_dir);
        let cache = Cache::new(self.cache_dir.clone())?;
        let targets = self.pins.matrix.targets();
        let mut jobs = Vec::new();
        let mut compiled: Vec<(Target, String, PathBuf)> = Vec::new();
        for source in &sources {
            let headers = deps::project_headers(&tk.nvcc, source, &flags, &self.kernels_dir)?;
            let name = source_name(source, &self.kernels_dir);
            for t in &targets {
                let j = CompileJob::new(
                    source,
                    &name,
                    headers.clone(),
                    *t,
                    &flags,
                    &tk,
                    &self.kernels_dir,
                )?;
                let output = cache.path(&j.key, j.ext());
                let mut command = vec![tk.nvcc.display().to_string()];
                command.extend(j.args(&flags, &output));
                jobs.push(PlannedJob {
                    id: format!("compile:{name}:{}", t.name()),
                    stage: Stage::Compile,
                    target: t.name(),
                    inputs: std::iter::once(source.clone())
                        .chain(headers.iter().cloned())
                        .collect(),
                    command,
                    output: output.clone(),
                });
                compiled.push((*t, j.key, output));
            }
        }
        for t in &targets {
            let inputs: Vec<(String, PathBuf)> = compiled
                .iter()
                .filter(|(ct, _, _)| ct == t)
                .map(|(_, k, p)| (k.clone(), p.clone()))
                .collect();
            let link = LinkJob::new(*t, inputs, &tk);
            let output = cache.path(&link.key, link.ext());
            jobs.push(PlannedJob {
                id: format!("link:{}", t.name()),
                stage: Stage::Link,
                target: t.name(),
                inputs: link.inputs.clone(),
                command: crate::plan::argv(&link.command(&tk, &cache, &output)?),
                output,
            });
        }
        Ok(Plan {
            format: 1,
            cache_dir: self.cache_dir.clone(),
            jobs,
        })
    }

    fn run_compiles(
        &self,
        tk: &Toolkit,
        flags: &[String],
        cache: &Cache,
        jobs: &[CompileJob],
    ) -> Result<Vec<Outcome>, BuildError> {
        let total = jobs.len();
        let finished = std::sync::atomic::AtomicUsize::new(0);
        // Expected cost: the bytes the front end reads (source + project headers).
        let bytes = |p: &Path| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0);
        let results = pool::run_costliest_first(
            jobs,
            &self.client,
            |j| bytes(&j.source) + j.headers.iter().map(|h| bytes(h)).sum::<u64>(),
            |j| j.run(tk, flags, cache),
            |j, r| {
                let n = finished.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
                if let (true, Ok(o)) = (self.progress, r) {
                    if !o.cached {
                        progress::job_line(
                            n,
                            total,
                            "compiled",
                            &j.name,
                            &j.target.name(),
                            o.elapsed,
                        );
                    }
                }
            },
        );
        first_error(results)
    }

    fn run_links(
        &self,
        tk: &Toolkit,
        cache: &Cache,
        jobs: &[LinkJob],
    ) -> Result<Vec<Outcome>, BuildError> {
        let total = jobs.len();
        let finished = std::sync::atomic::AtomicUsize::new(0);
        let results = pool::run(
            jobs,
            &self.client,
            |j| j.run(tk, cache),
            |j, r| {
                let n = finished.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
                if let (true, Ok(o)) = (self.progress, r) {
                    if !o.cached {
                        progress::job_line(
                            n,
                            total,
                            "linked",
                            "nvlink",
                            &j.target.name(),
                            o.elapsed,
                        );
                    }
                }
            },
        );
        first_error(results)
    }

    fn emit_rerun_directives(&self) {
        println!("cargo:rerun-if-changed={}", self.kernels_dir.display());
        println!("cargo:rerun-if-changed={}", self.pins.manifest.display());
        for var in [
            "KILN_NVCC",
            "CUDA_HOME",
            "CUDA_PATH",
            "LIBCLANG_PATH",
            "BINDGEN_EXTRA_CLANG_ARGS",
        ] {
            println!("cargo:rerun-if-env-changed={var}");
        }
        if let Ok(sources) = sources(&self.kernels_dir) {
            for s in sources {
                println!("cargo:rerun-if-changed={}", s.display());
            }
        }
        if let Ok(hs) = abi::headers(&self.kernels_dir.join("include")) {
            for h in hs {
                println!("cargo:rerun-if-changed={}", h.display());
            }
        }
    }
}

/// Every failing job's error, not only the first: a syntax error in two files shows both.
fn first_error(results: Vec<Result<Outcome, BuildError>>) -> Result<Vec<Outcome>, BuildError> {
    let mut errors: Vec<String> = Vec::new();
    let mut ok = Vec::new();
    let mut first = None;
    for r in results {
        match r {
            Ok(o) => ok.push(o),
            Err(e) => {
                let text = e.to_string();
                if !errors.contains(&text) {
                    errors.push(text);
                }
                first.get_or_insert(e);
            }
        }
    }
    match first {
        None => Ok(ok),
        Some(e) if errors.len() == 1 => Err(e),
        Some(_) => Err(BuildError::Tool {
            tool: "nvcc".into(),
            message: errors.join("\n\n"),
        }),
    }
}

/// `kernels/*.cu`, sorted (the order is part of the output bytes).
pub(crate) fn sources(dir: &Path) -> Result<Vec<PathBuf>, BuildError> {
    let rd = std::fs::read_dir(dir)
        .map_err(io(format!("reading kernel directory {}", dir.display())))?;
    let mut v: Vec<PathBuf> = rd
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "cu"))
        .collect();
    v.sort();
    if v.is_empty() {
        return Err(BuildError::NoSources(dir.to_path_buf()));
    }
    Ok(v)
}

fn flags(include_dir: &Path) -> Vec<String> {
    let mut f: Vec<String> = BASE_FLAGS.iter().map(|s| s.to_string()).collect();
    f.push(format!("-I{}", include_dir.display()));
    f
}

/// The flags as recorded: the include path is machine-specific, so it is named relatively.
fn flags_for_manifest(flags: &[String]) -> Vec<String> {
    flags
        .iter()
        .map(|f| {
            if f.starts_with("-I") {
                "-Ikernels/include".to_string()
            } else {
                f.clone()
            }
        })
        .collect()
}

/// `<target-dir>/kiln-kernel-cache` when OUT_DIR has cargo's usual shape
/// (`<target-dir>/<profile>/build/<pkg>-<hash>/out`, or `<target-dir>/<triple>/<profile>/…` with
/// `--target`, as maturin --zig builds), so check, debug, release and test builds share compiled
/// kernels; OUT_DIR/kernel-cache otherwise. `triple` is cargo's TARGET for the build script.
fn shared_cache_dir(out_dir: &Path, triple: Option<&std::ffi::OsStr>) -> PathBuf {
    let build = out_dir.ancestors().nth(2);
    match (build, out_dir.ancestors().nth(4)) {
        (Some(b), Some(above_profile)) if b.file_name().is_some_and(|n| n == "build") => {
            let cross = triple.is_some_and(|t| above_profile.file_name() == Some(t));
            match (cross, above_profile.parent()) {
                (true, Some(target)) => target.join("kiln-kernel-cache"),
                _ => above_profile.join("kiln-kernel-cache"),
            }
        }
        _ => out_dir.join("kernel-cache"),
    }
}

fn source_name(source: &Path, kernels_dir: &Path) -> String {
    source
        .strip_prefix(kernels_dir)
        .unwrap_or(source)
        .display()
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsStr;

    #[test]
    fn the_kernel_cache_is_shared_by_every_profile_and_by_target_triple_builds() {
        let host = Path::new("/t/debug/build/kiln-kernels-1a2b/out");
        let release = Path::new("/t/release/build/kiln-kernels-3c4d/out");
        let zig = Path::new("/t/x86_64-unknown-linux-gnu/release/build/kiln-kernels-5e6f/out");
        let triple = Some(OsStr::new("x86_64-unknown-linux-gnu"));
        let want = Path::new("/t/kiln-kernel-cache");
        assert_eq!(shared_cache_dir(host, triple), want);
        assert_eq!(shared_cache_dir(release, None), want);
        assert_eq!(shared_cache_dir(zig, triple), want);
        // A directory that merely looks like a triple is not stepped over without TARGET.
        assert_eq!(
            shared_cache_dir(zig, None),
            Path::new("/t/x86_64-unknown-linux-gnu/kiln-kernel-cache")
        );
        // Not cargo's layout: the cache stays inside OUT_DIR.
        let odd = Path::new("/somewhere/out");
        assert_eq!(shared_cache_dir(odd, triple), odd.join("kernel-cache"));
    }
}
