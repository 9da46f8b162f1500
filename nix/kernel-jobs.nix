# The kernel build as one derivation per job, planned at evaluation time from source text (no
# import-from-derivation): every job of kiln-build's plan but the final combine — nvcc per
# (source, target), the Rust kernel crate's PTX, ptxas of it per SASS target, nvlink per
# target, the Rust PTX merged into the `+PTX` module. Each derivation runs kiln-build's own
# job (`kiln-kernel-job`, crates/kiln-build/src/bin): the same command and the same input key
# as a local build, filed as `output` + `key`. Every output that builds kiln-kernels (the
# kernels package, the wheel, clippy, nextest) takes the whole farm (`prebuilt`,
# KILN_PREBUILT_KERNELS): kiln-build checks each key against its own plan, refuses a mismatch,
# and only combines.
#
# A job's inputs are what its key reads and nothing else, so unrelated edits reuse it:
# - a compile job: its source and the headers it includes (followed through its own directory
#   and kernels/include, as kiln-build's text scan does: crates/kiln-build/src/deps.rs), the
#   kiln table of Cargo.toml without the tables no kernel reads (runtime, wheel, test-tools,
#   audit), nvcc, and the job tool;
# - the job tool: kiln-build and the crates it depends on (its dependency closure, read from
#   the crates' Cargo.toml files), built in a workspace of just those crates whose Cargo.toml is
#   written here from the real one (nix/toml.nix): an edit to kiln-audit, kiln-doctor or xtask
#   reaches no job; an edit to kiln-build's own code reaches all of them.
# - the Rust jobs and the links: kernels/rust and the crate it depends on (kiln-kernel-params),
#   every source and header (a link's plan keys every compile), the nightly.
{ pkgs, pins, cuda, root, craneLib, toolchain, cargoVendorDir, fatbinCompression }:
let
  inherit (pkgs) lib;
  toTOML = import ./toml.nix;
  kernelsDir = root + "/kernels";
  includeDir = kernelsDir + "/include";
  entries = builtins.readDir kernelsDir;
  sources = builtins.sort builtins.lessThan
    (builtins.filter (n: entries.${n} == "regular" && lib.hasSuffix ".cu" n) (builtins.attrNames entries));
  hasRust = builtins.pathExists (kernelsDir + "/rust/Cargo.toml");

  # The matrix's targets in kiln-build's order: SASS for every entry, then PTX where `+PTX`.
  grammar = (import ./arch-grammar.nix).parse;
  matrix = map grammar pins.archs;
  digits = e: builtins.replaceStrings [ "." ] [ "" ] e.capability;
  sassTargets = map (e: "sm_${digits e}") matrix;
  ptxTargets = map (e: "compute_${digits e}") (builtins.filter (e: e.ptx) matrix);
  targets = sassTargets ++ ptxTargets;

  # --- What a job reads: headers ----------------------------------------------------------
  # `#include "x"` / `#include <x>` of one file; a computed include cannot be followed here.
  includesOf = file:
    let
      lines = builtins.filter builtins.isString (builtins.split "\n" (builtins.readFile file));
      parse = line:
        let
          m = builtins.match "[[:space:]]*#[[:space:]]*include[[:space:]]*([\"<])([^\">]*)[\">].*" line;
          computed = builtins.match "[[:space:]]*#[[:space:]]*include[[:space:]]+[A-Za-z_].*" line;
        in
        if m != null then [{ quoted = builtins.elemAt m 0 == "\""; name = builtins.elemAt m 1; }]
        else if computed != null then
          throw "kiln: ${toString file}: `${line}` is a computed include, which the evaluation-time plan cannot follow (kiln-build asks nvcc -MM; Nix cannot at evaluation): include the header by name"
        else [ ];
    in
    builtins.concatMap parse lines;

  # The preprocessor's order: beside the includer for "…", then -I (kernels/include). Not
  # found there: a toolkit or system header, which the nvcc version keys instead.
  resolve = includer: inc:
    let
      candidates = (if inc.quoted then [ (dirOf includer + "/${inc.name}") ] else [ ]) ++ [ (includeDir + "/${inc.name}") ];
      found = builtins.filter (p: builtins.pathExists p && (builtins.readFileType p) == "regular") candidates;
    in
    if found == [ ] then [ ] else [ (builtins.head found) ];

  headersOf = source:
    let
      closure = builtins.genericClosure {
        startSet = [{ key = toString source; path = source; }];
        operator = item: map (p: { key = toString p; path = p; })
          (builtins.concatMap (resolve item.path) (includesOf item.path));
      };
    in
    map (x: x.path) (builtins.sort (a: b: a.key < b.key) (builtins.filter (x: x.key != toString source) closure));

  # --- What a job reads: the pins -----------------------------------------------------------
  rootToml = builtins.fromTOML (builtins.readFile (root + "/Cargo.toml"));
  # kiln's table less what no kernel job reads. `toolchain` stays whole: kiln-pins validates it
  # as one complete pin set (so a toolchain pin edit, even maturin's, still reaches every job).
  jobPins = builtins.removeAttrs rootToml.workspace.metadata.kiln [ "runtime" "wheel" "test-tools" "audit" ];
  pinsToml = toTOML { workspace.metadata.kiln = jobPins; };

  # --- The job tool: kiln-build's dependency closure only -----------------------------------
  wsDeps = rootToml.workspace.dependencies;
  manifestOf = dir: builtins.fromTOML (builtins.readFile (root + "/${dir}/Cargo.toml"));
  # What a crate needs to build (its dev-dependencies are left out of the tool's workspace).
  buildDepsOf = t: (t.dependencies or { }) // (t.build-dependencies or { });
  pathDepsOf = dir:
    let deps = buildDepsOf (manifestOf dir); in
    builtins.concatMap
      (name:
        let d = deps.${name}; ws = wsDeps.${name} or null; in
        if builtins.isAttrs d && (d.workspace or false) && builtins.isAttrs ws && ws ? path then [ ws.path ]
        else if builtins.isAttrs d && d ? path then
          throw "kiln: ${dir}/Cargo.toml depends on ${name} by a path of its own; name it in [workspace.dependencies] (the kernel job tool's workspace is computed from there)"
        else [ ])
      (builtins.attrNames deps);
  toolCrates = map (x: x.key) (builtins.genericClosure {
    startSet = [{ key = "crates/kiln-build"; }];
    operator = item: map (d: { key = d; }) (pathDepsOf item.key);
  });
  usedDeps = builtins.attrNames (builtins.foldl' (acc: dir: acc // buildDepsOf (manifestOf dir)) { } toolCrates);
  toolManifests = {
    "Cargo.toml" = toTOML ({
      workspace = {
        inherit (rootToml.workspace) resolver package;
        members = toolCrates;
        lints = rootToml.workspace.lints or { };
        dependencies = builtins.listToAttrs (builtins.concatMap
          (n: if wsDeps ? ${n} then [{ name = n; value = wsDeps.${n}; }] else [ ])
          usedDeps);
        metadata.kiln = jobPins;
      };
    } // (if rootToml ? profile then { inherit (rootToml) profile; } else { }));
  } // builtins.listToAttrs (map
    (dir: {
      name = "${dir}/Cargo.toml";
      value = toTOML (builtins.removeAttrs (manifestOf dir) [ "dev-dependencies" ]);
    })
    toolCrates);
  toolSrc = lib.fileset.toSource {
    inherit root;
    fileset = lib.fileset.unions ([ (root + "/Cargo.lock") ] ++ map (dir: root + "/${dir}") toolCrates);
  };
  writeManifests = builtins.concatStringsSep "" (map
    (path: "cp ${builtins.toFile "Cargo.toml" toolManifests.${path}} ${path}\n")
    (builtins.attrNames toolManifests));
  # A plain cargo build over the vendored sources (crane's hooks set CARGO_HOME and the source
  # replacement); not --locked: the lockfile is the whole workspace's, which cargo trims to
  # these crates offline, every version it keeps being the locked one.
  tool = craneLib.mkCargoDerivation (fatbinCompression // {
    pname = "kiln-kernel-job";
    inherit (pins) version;
    src = toolSrc;
    inherit cargoVendorDir;
    cargoArtifacts = null;
    strictDeps = true;
    doInstallCargoArtifacts = false;
    postPatch = writeManifests;
    buildPhaseCargoCommand = "cargo build --release --offline -p kiln-build --bin kiln-kernel-job";
    installPhaseCommand = ''
      mkdir -p $out/bin
      cp target/release/kiln-kernel-job $out/bin/
    '';
    passthru = { inherit toolCrates toolManifests; };
  });

  # --- The jobs ----------------------------------------------------------------------------
  slug = builtins.replaceStrings [ ":" "/" "." ] [ "-" "-" "_" ];
  jobEnv = fatbinCompression // {
    nativeBuildInputs = [ cuda.home cuda.cuda_nvcc ];
    CUDA_HOME = cuda.home;
  };
  # The files a job sees (paths under root); its Cargo.toml is written beside them.
  project = files: lib.fileset.toSource {
    inherit root;
    fileset = lib.fileset.unions files;
  };
  # Every job `deps` read, and theirs: kiln-build plans the whole chain and takes each by key.
  closureOf = deps: builtins.attrValues (builtins.listToAttrs (map (j: { name = j.id; value = j; })
    (deps ++ builtins.concatMap (d: d.closure) deps)));
  # One job as a derivation: `deps` are the jobs whose outputs it reads (a farm of them and of
  # their own inputs is its --prebuilt directory: kiln-build takes them by key and runs only
  # this one).
  mkJob = { id, files, cargoToml ? pinsToml, deps ? [ ], rust ? false }:
    let
      closure = closureOf deps;
      farm = farmOf "kiln-job-inputs-${slug id}" closure;
      rootPrefix = builtins.stringLength (toString root) + 1;
      # The job as data (checked by running it without Nix: nix-check's job step).
      layout = {
        files = map (f: builtins.substring rootPrefix (-1) (toString f)) files;
        inherit cargoToml rust;
        deps = map (d: d.id) closure;
      };
    in
    pkgs.runCommand "kiln-job-${slug id}"
      (jobEnv // {
        passthru = { inherit id closure layout; };
      } // (if rust then {
        # The nightly with its prebuilt nvptx64 core: no -Zbuild-std, no crates.io source.
        KILN_KERNEL_RUSTC = toolchain.kernelRustc;
        CARGO_NET_OFFLINE = "true";
      } else { }))
      (''
        cp -r --no-preserve=mode ${project files} project
        cp ${builtins.toFile "Cargo.toml" cargoToml} project/Cargo.toml
      '' + (if rust then ''
        export CARGO_HOME=$TMPDIR/cargo-home
      '' else "") + ''
        ${tool}/bin/kiln-kernel-job --project project --job ${id} --out $out ${if deps == [ ] then "" else "--prebuilt ${farm}"}
      '');

  # kiln-build's prebuilt layout: <id with ':' as '/'>/{output,key}, one link per job.
  farmOf = name: jobList: pkgs.runCommand name { } (''
    mkdir -p $out
  '' + builtins.concatStringsSep "" (map
    (j:
      let entry = builtins.replaceStrings [ ":" ] [ "/" ] j.id; in ''
        mkdir -p "$out/$(dirname '${entry}')"
        ln -s ${j} "$out/${entry}"
      '')
    jobList));

  sourceFiles = s: [ (kernelsDir + "/${s}") ] ++ headersOf (kernelsDir + "/${s}");
  compile = source: target: mkJob {
    id = "compile:${source}:${target}";
    files = sourceFiles source;
  };
  compiles = lib.genAttrs targets (t: map (s: compile s t) sources);

  # The Rust kernel crate as it lies in the repository: kernels/rust beside the crate it
  # depends on, whose `[lints] workspace = true` wants a workspace root above it.
  rustFiles = [ (kernelsDir + "/rust") (root + "/crates/kiln-kernel-params") ];
  rustToml = toTOML {
    workspace = {
      inherit (rootToml.workspace) resolver package;
      members = [ "crates/kiln-kernel-params" ];
      exclude = [ "kernels/rust" ];
      lints = rootToml.workspace.lints or { };
      metadata.kiln = jobPins;
    };
  };
  allSources = builtins.concatMap sourceFiles sources;
  # The Rust PTX and its assemblies read the crate only; a link (and the merge after it) plans
  # every compile it takes, so it sees every source too.
  rustJob = args: mkJob ({ files = rustFiles; } // args // { cargoToml = rustToml; rust = true; });
  rustPtx = rustJob { id = "rust:ptx"; };
  ptxas = target: rustJob { id = "ptxas:${target}"; deps = [ rustPtx ]; };
  ptxasOf = lib.genAttrs sassTargets ptxas;
  link = target:
    let
      rustDeps = if !hasRust then [ ] else if ptxasOf ? ${target} then [ rustPtx ptxasOf.${target} ] else [ ];
      args = { id = "link:${target}"; deps = compiles.${target} ++ rustDeps; };
    in
    if hasRust then rustJob (args // { files = allSources ++ rustFiles; }) else mkJob (args // { files = allSources; });
  links = lib.genAttrs targets link;
  merge = target: rustJob { id = "merge:${target}"; files = allSources ++ rustFiles; deps = [ links.${target} rustPtx ]; };

  allJobs = builtins.concatLists (builtins.attrValues compiles)
    ++ (if hasRust then [ rustPtx ] ++ builtins.attrValues ptxasOf else [ ])
    ++ builtins.attrValues links
    ++ (if hasRust then map merge ptxTargets else [ ]);
  jobs = builtins.listToAttrs (map (j: { name = j.id; value = j; }) allJobs);
in
{
  inherit jobs tool sources targets toolCrates;
  # Every job's output as kiln-build's prebuilt layout.
  prebuilt = farmOf "kiln-kernel-jobs" allJobs;
  # The headers each source reads, as the plan above sees them (relative to kernels/), for the
  # check against kiln-build's own scan.
  headers =
    let prefix = builtins.stringLength (toString kernelsDir) + 1; in
    lib.genAttrs sources (s: map (h: builtins.substring prefix (-1) (toString h)) (headersOf (kernelsDir + "/${s}")));
}
