//! The build-script API ([`KernelBuild`]) and the orchestration: the plan, its stages run,
//! the manifest described, the fatbin combined, the summary written.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Instant;

use std::collections::{BTreeMap, BTreeSet};

use kiln_manifest::Manifest;
use kiln_pins::{ArchMatrix, ModuleLayout, Pins, Target, TargetKind};

use crate::cache::Cache;
use crate::derived_manifest;
use crate::error::{io, BuildError};
use crate::execute::{self, Executor, Ran};
use crate::jobs::{CompileMode, NVCC_ENV};
use crate::plan::{source_name, BuildPlan, Plan, PlanInputs, Stage};
use crate::progress::Summary;
use crate::rust::{self, RustCrate};
use crate::toolkit::{self, Toolkit};
use crate::{abi, deps, fatbin, pool};

/// The variable that puts a build script's compile cache in a directory of its own (shared by
/// checkouts and CI runners); default `<target-dir>/kiln-kernel-cache`.
pub const CACHE_VAR: &str = "KILN_KERNEL_CACHE";

/// Flags every nvcc job gets. No `-lineinfo`/`-G`: they embed source paths and break
/// byte-identical rebuilds.
const BASE_FLAGS: &[&str] = &["-std=c++17", "-O3"];

/// Files a kernel build writes into its output directory.
#[derive(Debug, Clone)]
pub struct BuildOutput {
    /// The combined fatbin for the whole arch matrix.
    pub fatbin: PathBuf,
    /// `kernels.manifest.json`, the written [`BuildOutput::manifest`].
    pub manifest_path: PathBuf,
    /// The bindgen ABI module (`kiln_abi.rs`); None when bindgen is off.
    pub abi: Option<PathBuf>,
    /// `lib<name>.a` of the host-launched sources, when there are any.
    pub static_lib: Option<PathBuf>,
    /// What each target holds and how it was built (toolchain, provenance).
    pub manifest: Manifest,
    /// The job counts and timings (also written to `kernels.summary.json`).
    pub summary: Summary,
    /// nvcc's warnings, one line each, "nvcc (<source> for <target>): …" (also printed).
    pub warnings: Vec<String>,
}

/// A configured kernel build: the pins, where sources, outputs and the cache live, and how to run.
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
    prebuilt_dir: Option<PathBuf>,
    /// [`KernelBuild::run_job`] of a job that reads the Rust crate only (its PTX, its ptxas):
    /// the project may hold no `*.cu` (one Nix derivation sees the crate alone).
    rust_only_job: bool,
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
        let kernels = pins.root().join(&pins.kernels.dir);
        let mut b = KernelBuild::new(pins, kernels, out_dir.clone());
        // KILN_KERNEL_CACHE: a cache shared by checkouts and runners (keys name sources and
        // headers relatively, so another directory hits the same entries).
        println!("cargo:rerun-if-env-changed={CACHE_VAR}");
        b.cache_dir = match std::env::var_os(CACHE_VAR) {
            Some(dir) if !dir.is_empty() => PathBuf::from(dir),
            _ => shared_cache_dir(&out_dir, std::env::var_os("TARGET").as_deref()),
        };
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
            prebuilt_dir: None,
            rust_only_job: false,
        }
    }

    /// Puts the content-addressed cache in `dir` (e.g. one shared by builds) instead of `out_dir`.
    pub fn cache_dir(mut self, dir: PathBuf) -> Self {
        self.cache_dir = dir;
        self
    }

    /// Whether to run bindgen over `kernels/include` into `kiln_abi.rs` (on by default).
    pub fn bindgen(mut self, on: bool) -> Self {
        self.bindgen = on;
        self
    }

    /// Whether to print a line per job and the summary on stderr (on by default).
    pub fn progress(mut self, on: bool) -> Self {
        self.progress = on;
        self
    }

    /// Takes job outputs from `dir` where its recorded key matches the plan's, and refuses
    /// one that does not ([`crate::prebuilt`]); `KILN_PREBUILT_KERNELS` does the same for a
    /// build script.
    pub fn prebuilt(mut self, dir: PathBuf) -> Self {
        self.prebuilt_dir = Some(dir);
        self
    }

    /// Replaces the environment nvcc is located from (tests).
    pub fn env(mut self, env: impl Fn(&str) -> Option<OsString> + Send + Sync + 'static) -> Self {
        self.env = Box::new(env);
        self
    }

    /// Uses `client` as the jobserver bounding parallel jobs (default: the inherited one, else a
    /// local one sized to the CPUs).
    pub fn jobserver(mut self, client: jobserver::Client) -> Self {
        self.client = client;
        self
    }

    /// Builds the kernels: the plan ([`Self::build_plan`]), every job of it (cached ones are
    /// not run), the manifest of what each target holds, the fatbin, the ABI and the summary.
    pub fn run(self) -> Result<BuildOutput, BuildError> {
        let started = Instant::now();
        let plan = self.build_plan()?;
        let prebuilt = self.prebuilt_outputs();
        let exec = Executor {
            client: &self.client,
            progress: self.progress,
            prebuilt: prebuilt.as_ref(),
        };
        let mut ran = Ran::default();
        let mut by_bytes = Vec::new();
        for stage in Stage::ALL {
            let tasks = execute::tasks(&plan, stage, &self.client, &|_| true)?;
            exec.stage(&plan.cache, &tasks, &mut ran)?;
            if stage == Stage::Link {
                by_bytes.extend(alias_links(&plan, &tasks)?);
            }
        }
        let warnings = self.show_warnings(&plan);
        let combining = Instant::now();
        let (mut manifest, module_bytes) = match plan.mode {
            CompileMode::Whole => self.describe_and_combine_modules(&plan)?,
            _ => {
                let m = self.describe(&plan)?;
                let modules = plan.modules();
                if modules.is_empty() {
                    // Every source is host-launched: no module to load.
                    std::fs::write(&plan.fatbin, b"")
                        .map_err(io(format!("writing {}", plan.fatbin.display())))?;
                } else {
                    fatbin::combine(&plan.toolkit, &modules, &plan.fatbin)?;
                }
                let len = std::fs::metadata(&plan.fatbin).map_or(0, |m| m.len());
                (m, vec![("kernels".to_string(), 0, len)])
            }
        };
        ran.1
            .insert("describe+combine".into(), combining.elapsed().as_secs_f64());
        self.link_static_lib(&plan)?;
        write_module_table(&self.out_dir, &module_bytes)?;
        let abi = self.finish_manifest(&mut manifest)?;
        let manifest_path = self.out_dir.join("kernels.manifest.json");
        std::fs::write(&manifest_path, manifest.to_json()).map_err(io("writing the manifest"))?;
        let summary = self.summarize(&plan, &ran, started)?;
        self.evict(&plan, by_bytes)?;
        Ok(BuildOutput {
            static_lib: plan.static_lib.clone(),
            fatbin: plan.fatbin,
            manifest_path,
            abi,
            manifest,
            summary,
            warnings,
        })
    }

    /// Runs one job of the plan, by id (`compile:affine.cu:sm_80`, `link:sm_90`, …), and files
    /// its output as a prebuilt entry in `out` (`output` and `key`, [`crate::prebuilt`]): what
    /// one Nix derivation per job runs (nix/kernel-jobs.nix). A compile runs alone; a link runs
    /// after the jobs before it, which a prebuilt directory normally provides.
    pub fn run_job(mut self, id: &str, out: &Path) -> Result<(), BuildError> {
        self.rust_only_job = id == "rust:ptx" || id.starts_with("ptxas:");
        let plan = self.build_plan()?;
        let prebuilt = self.prebuilt_outputs();
        let exec = Executor {
            client: &self.client,
            progress: self.progress,
            prebuilt: prebuilt.as_ref(),
        };
        // The jobs this one reads the outputs of, and theirs: nothing else runs.
        let planned = plan.to_plan()?.jobs;
        let by_output: BTreeMap<&Path, &str> = planned
            .iter()
            .map(|j| (j.output.as_path(), j.id.as_str()))
            .collect();
        let mut needed: BTreeSet<&str> = BTreeSet::new();
        let mut todo = vec![id];
        while let Some(j) = todo.pop() {
            for input in planned.iter().filter(|p| p.id == j).flat_map(|p| &p.inputs) {
                if let Some(dep) = by_output.get(input.as_path()) {
                    if needed.insert(dep) {
                        todo.push(dep);
                    }
                }
            }
        }
        let mut ran = Ran::default();
        for stage in Stage::ALL {
            let wanted = |t: &str| t == id || needed.contains(t);
            let tasks = execute::tasks(&plan, stage, &self.client, &wanted)?;
            if let Some(t) = tasks.iter().find(|t| t.id == id) {
                exec.stage(&plan.cache, std::slice::from_ref(t), &mut ran)?;
                std::fs::create_dir_all(out).map_err(io(format!("creating {}", out.display())))?;
                std::fs::copy(plan.cache.path(&t.key, t.ext), out.join("output"))
                    .map_err(io(format!("writing {}", out.join("output").display())))?;
                std::fs::write(out.join("key"), format!("{}\n", t.plan_key))
                    .map_err(io(format!("writing {}", out.join("key").display())))?;
                return Ok(());
            }
            exec.stage(&plan.cache, &tasks, &mut ran)?;
            if stage == Stage::Link {
                alias_links(&plan, &tasks)?;
            }
        }
        let ids: Vec<String> = plan.to_plan()?.jobs.into_iter().map(|j| j.id).collect();
        Err(BuildError::Env(format!(
            "no job {id:?} in this build's plan (jobs: {})",
            ids.join(", ")
        )))
    }

    /// Every job of the build, C++ and Rust, with its command, run nothing (see [`crate::plan`]).
    pub fn plan(self) -> Result<Plan, BuildError> {
        self.build_plan()?.to_plan()
    }

    /// The one plan: preflight (seconds, before any compile), the sources and the headers each
    /// reads, the Rust crate and its rustc, then every job keyed.
    pub fn build_plan(&self) -> Result<BuildPlan, BuildError> {
        if self.cargo {
            self.emit_rerun_directives();
        }
        let matrix = self.matrix()?.0;
        let nvcc = toolkit::locate(&*self.env, &self.pins)?;
        let tk = toolkit::preflight(&nvcc, &self.pins)?;
        let rust = self.rust_crate()?;
        let flags = self.flags();
        let cache = Cache::new(self.cache_dir.clone())?;
        std::fs::create_dir_all(&self.out_dir)
            .map_err(io(format!("creating {}", self.out_dir.display())))?;
        let scanned = self.scan_sources(&tk, &flags)?;
        let k = &self.pins.kernels;
        let (host_sources, sources): (Vec<_>, Vec<_>) = (scanned.into_iter())
            .partition(|(s, _)| k.is_host_source(&source_name(s, &self.kernels_dir)));
        let mode = match (k.modules, k.rdc) {
            (ModuleLayout::PerSource, false) => CompileMode::Whole,
            (ModuleLayout::PerSource, true) => {
                return Err(BuildError::Env(
                    "rdc = true needs one module (cross-file device calls are resolved by the device link); \
                     remove modules = \"per-source\" or rdc"
                        .into(),
                ))
            }
            (ModuleLayout::One, true) => CompileMode::Relocatable,
            (ModuleLayout::One, false) => CompileMode::Linkable,
        };
        let nvcc_env = (NVCC_ENV.iter())
            .map(|v| {
                let value = (self.env)(v).map(|s| s.to_string_lossy().into_owned());
                (v.to_string(), value)
            })
            .collect();
        let plan = BuildPlan::new(PlanInputs {
            toolkit: tk,
            flags,
            nvcc_env,
            mode,
            cache,
            kernels_dir: &self.kernels_dir,
            root: self.pins.root(),
            sources,
            host_sources,
            static_lib: self.out_dir.join(format!("lib{}.a", k.static_lib)),
            targets: matrix.targets(),
            rust,
            fatbin: self.out_dir.join("kernels.fatbin"),
        })?;
        if let Some(r) = &plan.rust {
            r.ptx.write_layout(&plan.cache)?;
        }
        Ok(plan)
    }

    /// The Rust kernel crate, if any, with its rustc (checked before anything compiles too).
    fn rust_crate(&self) -> Result<Option<(RustCrate, rust::KernelRustc)>, BuildError> {
        let Some(krate) = RustCrate::discover(&self.kernels_dir)? else {
            return Ok(None);
        };
        let rustc = rust::locate(&*self.env, &self.pins)?;
        if self.cargo {
            println!("cargo:rerun-if-env-changed=KILN_KERNEL_RUSTC");
            for f in &krate.files {
                println!("cargo:rerun-if-changed={}", f.display());
            }
        }
        Ok(Some((krate, rustc)))
    }

    /// `kernels/*.cu`, each with the project headers it reads (part of its cache key).
    fn scan_sources(
        &self,
        tk: &Toolkit,
        flags: &[String],
    ) -> Result<Vec<(PathBuf, Vec<PathBuf>)>, BuildError> {
        let sources = match self.sources() {
            Err(BuildError::NoSources(_)) if self.rust_only_job => Vec::new(),
            r => r?,
        };
        let home = tk.cuda_home();
        let header_sets = pool::run(
            &sources,
            &self.client,
            |s| deps::headers(&tk.nvcc, s, flags, &home),
            |_, _| {},
        );
        let mut out = Vec::new();
        for (source, headers) in sources.into_iter().zip(header_sets) {
            let headers = headers?;
            if self.cargo {
                for h in &headers {
                    println!("cargo:rerun-if-changed={}", h.display());
                }
            }
            out.push((source, headers));
        }
        Ok(out)
    }

    /// What each target's module really holds, the kernels' languages; a kernel missing for
    /// any target fails here, before the fatbin is written.
    fn describe(&self, plan: &BuildPlan) -> Result<Manifest, BuildError> {
        let names = (plan.sources.iter())
            .map(|s| source_name(s, &self.kernels_dir))
            .chain(plan.hosts.iter().map(|h| h.name.clone()))
            .collect();
        let mut manifest = self.new_manifest(plan, names)?;
        for (target, module) in plan.modules() {
            derived_manifest::add_output(&mut manifest, target, &module)?;
        }
        // Which kernels each source holds, for gates that name a source: from its SASS objects
        // (the PTX route's LTO IR lists none).
        let mut by_source: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        self.describe_static_lib(plan, &mut manifest, &mut by_source)?;
        if !self.pins.kernels.gates.is_empty() {
            for j in plan
                .compiles
                .iter()
                .filter(|j| j.target.kind == TargetKind::Sass)
            {
                let out = plan.cache.path(&j.key, j.ext());
                let got = derived_manifest::read_output(j.target, &out)?;
                by_source
                    .entry(j.name.clone())
                    .or_default()
                    .extend(got.kernels);
            }
        }
        self.finish_description(plan, manifest, &by_source)
    }

    /// The manifest before any output is read: pins, the matrix built, flags, sources.
    fn new_manifest(&self, plan: &BuildPlan, names: Vec<String>) -> Result<Manifest, BuildError> {
        let recorded = flags_for_manifest(&plan.flags, &self.kernels_dir, self.pins.root());
        let (matrix, override_text) = self.matrix()?;
        let mut manifest =
            derived_manifest::new(&self.pins, &plan.toolkit.version, &recorded, names);
        manifest.matrix = matrix.entries().to_vec();
        manifest.matrix_override = override_text;
        Ok(manifest)
    }

    /// Per-source modules: each source's targets combined into its own fatbin, described per
    /// module and as a whole; the combined `kernels.fatbin` is the modules back to back (each
    /// 8-byte aligned), and the returned table says where each one starts.
    fn describe_and_combine_modules(
        &self,
        plan: &BuildPlan,
    ) -> Result<(Manifest, ModuleTable), BuildError> {
        let names = (plan.sources.iter())
            .map(|s| source_name(s, &self.kernels_dir))
            .chain(plan.hosts.iter().map(|h| h.name.clone()))
            .collect();
        let mut manifest = self.new_manifest(plan, names)?;
        let mut by_source: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        let mut all = Vec::new();
        let mut table = Vec::new();
        for m in plan.source_modules() {
            let mut targets = Vec::new();
            for (target, out) in &m.outputs {
                let entry = derived_manifest::read_output(*target, out)?;
                by_source
                    .entry(m.name.clone())
                    .or_default()
                    .extend(entry.kernels.iter().cloned());
                derived_manifest::merge_target(&mut manifest, &entry);
                targets.push(entry);
            }
            manifest.modules.push(kiln_manifest::Module {
                name: m.stem.clone(),
                sources: vec![m.name.clone()],
                targets,
            });
            let path = plan.module_fatbin(&m.stem);
            if let Some(dir) = path.parent() {
                std::fs::create_dir_all(dir).map_err(io(format!("creating {}", dir.display())))?;
            }
            fatbin::combine(&plan.toolkit, &m.outputs, &path)?;
            let bytes = std::fs::read(&path).map_err(io(format!("reading {}", path.display())))?;
            while all.len() % 8 != 0 {
                all.push(0);
            }
            table.push((m.stem.clone(), all.len() as u64, bytes.len() as u64));
            all.extend_from_slice(&bytes);
        }
        self.describe_static_lib(plan, &mut manifest, &mut by_source)?;
        // The manifest's targets in matrix order, as a one-module build lists them.
        let order: Vec<Target> = plan.targets.clone();
        manifest
            .targets
            .sort_by_key(|t| order.iter().position(|o| *o == t.target));
        let manifest = self.finish_description(plan, manifest, &by_source)?;
        std::fs::write(&plan.fatbin, &all)
            .map_err(io(format!("writing {}", plan.fatbin.display())))?;
        Ok((manifest, table))
    }

    /// The host-launched sources' device code, read from their objects: a manifest entry of its
    /// own (the static library) and part of each target's kernels.
    fn describe_static_lib(
        &self,
        plan: &BuildPlan,
        manifest: &mut Manifest,
        by_source: &mut BTreeMap<String, BTreeSet<String>>,
    ) -> Result<(), BuildError> {
        let Some(lib) = &plan.static_lib else {
            return Ok(());
        };
        let mut module = kiln_manifest::Module {
            name: lib
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
            sources: plan.hosts.iter().map(|h| h.name.clone()).collect(),
            targets: Vec::new(),
        };
        for h in &plan.hosts {
            for entry in crate::host::device_code(&plan.cache.path(&h.key, "o"))? {
                by_source
                    .entry(h.name.clone())
                    .or_default()
                    .extend(entry.kernels.iter().cloned());
                derived_manifest::merge_target(manifest, &entry);
                derived_manifest::merge_into(&mut module.targets, &entry);
            }
        }
        module
            .targets
            .sort_by_key(|t| plan.targets.iter().position(|o| *o == t.target));
        manifest.static_lib = Some(module);
        Ok(())
    }

    /// `lib<name>.a` of the host objects, and (in a build script) the directives that link it
    /// with the CUDA runtime's static library (which loads libcuda.so.1 itself at run time).
    fn link_static_lib(&self, plan: &BuildPlan) -> Result<(), BuildError> {
        let Some(lib) = &plan.static_lib else {
            return Ok(());
        };
        let objects: Vec<PathBuf> = plan
            .hosts
            .iter()
            .map(|h| plan.cache.path(&h.key, "o"))
            .collect();
        crate::host::archive(&objects, lib)?;
        if self.cargo {
            println!("cargo:rustc-link-search=native={}", self.out_dir.display());
            println!(
                "cargo:rustc-link-lib=static={}",
                self.pins.kernels.static_lib
            );
            let home = plan.toolkit.cuda_home();
            for dir in ["lib", "lib64"] {
                if home.join(dir).join("libcudart_static.a").is_file() {
                    println!(
                        "cargo:rustc-link-search=native={}",
                        home.join(dir).display()
                    );
                }
            }
            for l in [
                "static=cudart_static",
                "dylib=stdc++",
                "dylib=dl",
                "dylib=rt",
                "dylib=pthread",
            ] {
                println!("cargo:rustc-link-lib={l}");
            }
        }
        Ok(())
    }

    /// Languages, gates and the every-kernel-everywhere check, shared by both layouts.
    fn finish_description(
        &self,
        plan: &BuildPlan,
        mut manifest: Manifest,
        by_source: &BTreeMap<String, BTreeSet<String>>,
    ) -> Result<Manifest, BuildError> {
        let (rust_kernels, rustc_vv) = match &plan.rust {
            Some(r) => {
                let ptx = plan.cache.path(&r.ptx.key, rust::RUST_PTX_EXT);
                (rust::kernels(&ptx)?, r.rustc.version_verbose.clone())
            }
            None => (Vec::new(), String::new()),
        };
        derived_manifest::record_languages(&mut manifest, &rust_kernels, &rustc_vv);
        let mut problems = crate::gates::apply(&mut manifest, &self.pins.kernels.gates, by_source)
            .err()
            .unwrap_or_default();
        let gaps = manifest.gaps();
        if gaps.is_empty() && problems.is_empty() {
            return Ok(manifest);
        }
        let undeclared = !gaps.is_empty();
        problems.extend(gaps.iter().map(|(t, k)| format!("{k} missing for {t}")));
        let hint = if undeclared {
            "\n  a kernel compiled only for some GPUs on purpose (`#if __CUDA_ARCH__ >= 890`) must be declared: \
             [package.metadata.kiln.kernels] gates = { \"fp8.cu\" = \">=8.9\" } (a source file or a kernel name)"
        } else {
            ""
        };
        Err(BuildError::BadOutput {
            source_file: self.kernels_dir.clone(),
            output: "fatbin".into(),
            message: format!(
                "not every kernel was built for every target its gates declare: {}{hint}",
                problems.join("; ")
            ),
        })
    }

    /// The prebuilt directory: [`KernelBuild::prebuilt`], else `KILN_PREBUILT_KERNELS`.
    fn prebuilt_outputs(&self) -> Option<crate::prebuilt::Prebuilt> {
        let dir = (self.prebuilt_dir.clone())
            .or_else(|| (self.env)(crate::prebuilt::VAR).map(PathBuf::from))?;
        Some(crate::prebuilt::Prebuilt { dir })
    }

    /// The matrix this build targets: the declared one, narrowed by `KILN_ARCHS` when set (the
    /// text is returned for the manifest).
    fn matrix(&self) -> Result<(ArchMatrix, Option<String>), BuildError> {
        match (self.env)(kiln_pins::MATRIX_OVERRIDE_VAR) {
            Some(v) => {
                let text = v.to_string_lossy().into_owned();
                Ok((
                    kiln_pins::narrow_matrix(&self.pins.matrix, &text)?,
                    Some(text),
                ))
            }
            None => Ok((self.pins.matrix.clone(), None)),
        }
    }

    /// The nvcc flags every job gets: kiln's base flags, `kernels/include`, the project's
    /// include directories, definitions and own flags.
    fn flags(&self) -> Vec<String> {
        let k = &self.pins.kernels;
        let mut f: Vec<String> = BASE_FLAGS.iter().map(|s| s.to_string()).collect();
        f.push(format!("-I{}", self.kernels_dir.join("include").display()));
        for d in &k.include_dirs {
            f.push(format!("-I{}", self.pins.root().join(d).display()));
        }
        f.extend(k.defines.iter().map(|d| format!("-D{d}")));
        f.extend(k.nvcc_flags.iter().cloned());
        f
    }

    /// `*.cu` in the kernels directory, less the project's excludes, sorted.
    fn sources(&self) -> Result<Vec<PathBuf>, BuildError> {
        let all = sources(&self.kernels_dir)?;
        let kept: Vec<PathBuf> = (all.into_iter())
            .filter(|s| {
                !self
                    .pins
                    .kernels
                    .excludes(&source_name(s, &self.kernels_dir))
            })
            .collect();
        if kept.is_empty() {
            return Err(BuildError::NoSources(self.kernels_dir.clone()));
        }
        Ok(kept)
    }

    /// nvcc's warnings for every compile of this build (kept with the cache entry, so a cached
    /// job still shows them): on stderr, and as cargo warnings in a build script.
    fn show_warnings(&self, plan: &BuildPlan) -> Vec<String> {
        let mut shown = Vec::new();
        let device = (plan.compiles.iter())
            .map(|j| (j.warnings_path(&plan.cache), &j.name, j.target.name()));
        let host = (plan.hosts.iter()).map(|h| {
            (
                plan.cache.path(&h.key, "warnings"),
                &h.name,
                "host+device".to_string(),
            )
        });
        for (path, name, target) in device.chain(host) {
            let Ok(text) = std::fs::read_to_string(path) else {
                continue;
            };
            for line in text.lines().filter(|l| !l.trim().is_empty()) {
                let line = format!("nvcc ({name} for {target}): {line}");
                if self.cargo {
                    println!("cargo:warning={line}");
                } else if self.progress {
                    eprintln!("warning: {line}");
                }
                shown.push(line);
            }
        }
        shown
    }

    /// Keeps the cache under `cache-max-mb`, least recently used first, never this build's
    /// own entries (`links_by_bytes`: the entries its links ran under).
    fn evict(&self, plan: &BuildPlan, links_by_bytes: Vec<PathBuf>) -> Result<(), BuildError> {
        let mut keep: BTreeSet<PathBuf> = links_by_bytes.into_iter().collect();
        for j in &plan.compiles {
            keep.insert(plan.cache.path(&j.key, j.ext()));
            keep.insert(j.warnings_path(&plan.cache));
        }
        keep.extend(
            plan.assembles
                .iter()
                .map(|j| plan.cache.path(&j.key, "cubin")),
        );
        keep.extend(plan.links.iter().map(|l| plan.cache.path(&l.key, l.ext())));
        if let Some(r) = &plan.rust {
            keep.insert(plan.cache.path(&r.ptx.key, rust::RUST_PTX_EXT));
            keep.extend(r.ptxas.iter().map(|j| plan.cache.path(&j.key, "rs.o")));
            keep.extend(r.merges.iter().map(|j| plan.cache.path(&j.key, "ptx")));
        }
        let cap = self.pins.kernels.cache_max_mb.saturating_mul(1 << 20);
        let (removed, left) = plan.cache.evict(cap, &keep)?;
        if removed > 0 && self.progress {
            eprintln!(
                "kiln-build: cache over {} MiB: evicted {removed} least recently used entries ({} MiB left)",
                self.pins.kernels.cache_max_mb,
                left >> 20
            );
        }
        Ok(())
    }

    /// The ABI (bindgen, when on; it reports clang's version) and the provenance.
    fn finish_manifest(&self, manifest: &mut Manifest) -> Result<Option<PathBuf>, BuildError> {
        let include = self.kernels_dir.join("include");
        let out = self.out_dir.join("kiln_abi.rs");
        let abi = if self.bindgen && !abi::headers(&include)?.is_empty() {
            manifest.provenance.clang = abi::generate(&self.pins, &include, &out)?;
            Some(out)
        } else if self.bindgen {
            // Nothing to bind: no libclang needed, and `kiln_embed::abi!` still finds its file.
            std::fs::write(&out, abi::EMPTY).map_err(io(format!("writing {}", out.display())))?;
            Some(out)
        } else {
            None
        };
        let clang = std::mem::take(&mut manifest.provenance.clang);
        manifest.provenance = crate::provenance::collect(self.pins.root(), &*self.env, self.cargo);
        manifest.provenance.clang = clang;
        Ok(abi)
    }

    /// The counts, written to `kernels.summary.json` and printed once.
    fn summarize(
        &self,
        plan: &BuildPlan,
        ran: &Ran,
        started: Instant,
    ) -> Result<Summary, BuildError> {
        let mut summary = Summary {
            sources: plan.sources.len(),
            targets: plan.targets.iter().map(Target::name).collect(),
            wall_seconds: started.elapsed().as_secs_f64(),
            fatbin_bytes: std::fs::metadata(&plan.fatbin)
                .map(|m| m.len())
                .unwrap_or(0),
            ..Summary::default()
        };
        ran.summarize(&mut summary);
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
        Ok(summary)
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
            kiln_pins::MATRIX_OVERRIDE_VAR,
            crate::prebuilt::VAR,
        ]
        .iter()
        .chain(NVCC_ENV)
        {
            println!("cargo:rerun-if-env-changed={var}");
        }
        if let Ok(sources) = self.sources() {
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

/// Each link ran (or was found) under its inputs' bytes; the plan, and a merge after it, name it
/// by its inputs' keys. Returns the by-bytes entries.
fn alias_links(plan: &BuildPlan, tasks: &[execute::Task<'_>]) -> Result<Vec<PathBuf>, BuildError> {
    let mut by_bytes = Vec::new();
    for t in tasks {
        let link = (plan.links.iter()).find(|l| crate::job::Job::id(*l).to_string() == t.id);
        if let Some(l) = link {
            let entry = plan.cache.path(&t.key, l.ext());
            crate::cache::alias(&entry, &plan.cache.path(&l.key, l.ext()))?;
            by_bytes.push(entry);
        }
    }
    Ok(by_bytes)
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

/// The flags as recorded: include paths are machine-specific, so they are named relatively to
/// the project root where they lie inside it.
fn flags_for_manifest(flags: &[String], kernels_dir: &Path, root: &Path) -> Vec<String> {
    flags
        .iter()
        .map(|f| match f.strip_prefix("-I").map(Path::new) {
            Some(dir) if dir == kernels_dir.join("include") => "-Ikernels/include".to_string(),
            Some(dir) => match dir.strip_prefix(root) {
                Ok(rel) => format!("-I{}", rel.display()),
                Err(_) => f.clone(),
            },
            None => f.clone(),
        })
        .collect()
}

/// Each module's (name, offset, length) inside `kernels.fatbin`.
type ModuleTable = Vec<(String, u64, u64)>;

/// `kernels.modules.rs`: where each module's fatbin lies inside `kernels.fatbin` (name, offset,
/// length), for `kiln_embed::embed!`'s `module(name)`. One module: the whole fatbin.
fn write_module_table(out_dir: &Path, table: &ModuleTable) -> Result<(), BuildError> {
    let mut text = String::from(
        "// Written by kiln-build: each module's fatbin inside kernels.fatbin (name, offset, length).\n[\n",
    );
    for (name, offset, len) in table {
        text.push_str(&format!("    ({name:?}, {offset}, {len}),\n"));
    }
    text.push_str("]\n");
    let path = out_dir.join("kernels.modules.rs");
    std::fs::write(&path, text).map_err(io(format!("writing {}", path.display())))
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
