# The kernel build as one derivation per job, planned at evaluation time from source text (no
# import-from-derivation): `kernels/*.cu` and the arch matrix give the compile jobs, each
# source's `#include` lines (followed through its own directory and kernels/include, as
# kiln-build's text scan does: crates/kiln-build/src/deps.rs) give the files each job reads.
# A job's derivation sees only those files, so a header edit rebuilds exactly the jobs of the
# sources that include it, and an unchanged job is a binary-cache hit on every machine.
#
# Each derivation runs kiln-build's own job (`kiln-kernel-job`, crates/kiln-build/src/bin): the
# same nvcc command and the same input key as a local build, filed as `output` + `key`. The
# kernels derivation takes them all (KILN_PREBUILT_KERNELS), checks every key against its own
# plan — a mismatch is refused, never used — and links and combines the same fatbin bytes.
# Links, and the Rust kernel crate's jobs (they need the vendored crates and the nightly), run
# there; the compile jobs are the work.
{ pkgs, pins, cuda, root, craneLib, finalArgs }:
let
  inherit (pkgs) lib;
  kernelsDir = root + "/kernels";
  includeDir = kernelsDir + "/include";
  entries = builtins.readDir kernelsDir;
  sources = builtins.sort builtins.lessThan
    (builtins.filter (n: entries.${n} == "regular" && lib.hasSuffix ".cu" n) (builtins.attrNames entries));

  # The matrix's targets in kiln-build's order: SASS for every entry, then PTX where `+PTX`.
  grammar = (import ./arch-grammar.nix).parse;
  matrix = map grammar pins.archs;
  digits = e: builtins.replaceStrings [ "." ] [ "" ] e.capability;
  targets = map (e: "sm_${digits e}") matrix
    ++ map (e: "compute_${digits e}") (builtins.filter (e: e.ptx) matrix);

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

  # kiln-kernel-job from the crates alone: kernel sources are not part of it, so editing them
  # rebuilds jobs, never the tool.
  toolSrc = lib.fileset.toSource {
    inherit root;
    fileset = lib.fileset.unions [
      (root + "/Cargo.toml")
      (root + "/Cargo.lock")
      (root + "/crates")
      (lib.fileset.maybeMissing (root + "/tools"))
    ];
  };
  # Its own dependency build over the same narrow source: the workspace's is made from the
  # whole source (crane launders it to Cargo files only, but a kernel edit must not even reach
  # the tool's derivation through it).
  toolArgs = finalArgs // {
    pname = "kiln-kernel-job";
    src = toolSrc;
    cargoExtraArgs = "--locked -p kiln-build --bin kiln-kernel-job";
    doCheck = false;
  };
  tool = craneLib.buildPackage (toolArgs // {
    cargoArtifacts = craneLib.buildDepsOnly (builtins.removeAttrs toolArgs [ "cargoArtifacts" ]);
  });

  slug = builtins.replaceStrings [ ":" "/" "." ] [ "-" "-" "_" ];
  jobEnv = {
    nativeBuildInputs = [ cuda.home cuda.cuda_nvcc ];
    CUDA_HOME = cuda.home;
    # As in every kiln derivation (nix/crates.nix): kiln-build's flags decide compression.
    dontCompressCudaFatbins = true;
    NIX_CUDA_DONT_COMPRESS_FATBINS = "1";
  };

  compile = source: target:
    let
      id = "compile:${source}:${target}";
      files = lib.fileset.toSource {
        inherit root;
        fileset = lib.fileset.unions ([ (root + "/Cargo.toml") (kernelsDir + "/${source}") ] ++ headersOf (kernelsDir + "/${source}"));
      };
    in
    {
      name = id;
      value = pkgs.runCommand "kiln-job-${slug "${source}-${target}"}" (jobEnv // { passthru = { inherit id source target; }; }) ''
        cp -r --no-preserve=mode ${files} project
        ${tool}/bin/kiln-kernel-job --project project --job ${id} --out $out
      '';
    };

  jobs = builtins.listToAttrs (builtins.concatMap (s: map (compile s) targets) sources);
in
{
  inherit jobs tool sources targets;
  # Every job's output as kiln-build's prebuilt layout: <id with ':' as '/'>/{output,key}.
  prebuilt = pkgs.runCommand "kiln-kernel-jobs" { } (''
    mkdir -p $out
  '' + builtins.concatStringsSep "" (map
    (id:
      let entry = builtins.replaceStrings [ ":" ] [ "/" ] id; in ''
        mkdir -p "$out/$(dirname '${entry}')"
        ln -s ${jobs.${id}} "$out/${entry}"
      '')
    (builtins.attrNames jobs)));
  # The headers each source reads, as the plan above sees them (relative to kernels/), for the
  # check against kiln-build's own scan.
  headers =
    let prefix = builtins.stringLength (toString kernelsDir) + 1; in
    lib.genAttrs sources (s: map (h: builtins.substring prefix (-1) (toString h)) (headersOf (kernelsDir + "/${s}")));
}
