# `crane.mkLib pkgs` of the crane double: the functions kiln calls, with crane's argument
# patterns (an argument crane requires is required here; crane passes unknown arguments on to
# mkDerivation, and so does this double).
{ pkgs }:
let
  inherit (pkgs) lib;

  mkScope = toolchain: rec {
    overrideToolchain = t: mkScope (if builtins.isFunction t then t pkgs else t);

    fileset = {
      # crane lib/fileset/commonCargoSources.nix at 2c71e194: the union of cargoTomlAndLock.nix
      # (files named Cargo.toml or Cargo.lock), rust.nix (`hasExt "rs"`) and toml.nix (every
      # `hasExt "toml"` file) under `path`, in the element format of the nixpkgs double's
      # lib.fileset. tools/xtask/tests/nix_source.rs compares the source set it gives with the
      # one real crane gives over the real nixpkgs lib.
      commonCargoSources = path: {
        _type = "fileset";
        elements = [{
          inherit path;
          keep = p:
            let name = baseNameOf p; in
            name == "Cargo.toml" || name == "Cargo.lock" || lib.hasSuffix ".rs" name || lib.hasSuffix ".toml" name;
        }];
      };
    };

    # crane lib/vendorMultipleCargoDeps.nix at 2c71e194 (lines 37-46: the argument pattern;
    # 47-49: every lockfile is read with readFile + fromTOML; 84-93: one runCommandLocal named
    # vendor-cargo-deps whose config.toml configureCargoVendoredDepsHook appends to
    # $CARGO_HOME/config.toml). The double reads and parses every lockfile exactly as crane does
    # (readFile of whatever it is given), so a lock inside another derivation's output (the
    # toolchain's rust-src) is import-from-derivation here too: refused under
    # `allow-import-from-derivation = false`, and unbuildable offline otherwise. It keeps the
    # list, so tests can see which lockfiles were vendored.
    vendorMultipleCargoDeps =
      { cargoConfigs ? [ ]
      , cargoLockContentsList ? [ ]
      , cargoLockList ? [ ]
      , cargoLockParsedList ? [ ]
      , outputHashes ? { }
      , overrideVendorCargoPackage ? _: drv: drv
      , overrideVendorGitCheckout ? _: drv: drv
      , registries ? null
      }:
      let
        parse = l: builtins.fromTOML (builtins.readFile l);
        parsed = map parse cargoLockList ++ map builtins.fromTOML cargoLockContentsList ++ cargoLockParsedList;
      in
      builtins.seq (builtins.deepSeq parsed null) (pkgs.stdenv.mkDerivation {
        name = "vendor-cargo-deps";
        inherit cargoLockList;
        passthru = { inherit cargoConfigs outputHashes overrideVendorCargoPackage overrideVendorGitCheckout registries; };
      });

    mkCargoDerivation =
      args@{ cargoArtifacts
      , buildPhaseCargoCommand
      , checkPhaseCargoCommand ? ""
      , installPhaseCommand ? "mkdir -p $out"
      , ...
      }:
      if toolchain == null then throw "crane double: no toolchain (call overrideToolchain)"
      else if !(args ? src) then throw "crane double: `src` is required"
      else
        pkgs.stdenv.mkDerivation (builtins.removeAttrs args [ "pnameSuffix" "installPhaseCommand" "buildPhaseCargoCommand" "checkPhaseCargoCommand" ] // {
          pname = "${args.pname}${args.pnameSuffix or ""}";
          inherit (args) version;
          inherit cargoArtifacts buildPhaseCargoCommand checkPhaseCargoCommand installPhaseCommand;
          doInstallCargoArtifacts = args.doInstallCargoArtifacts or true;
          nativeBuildInputs = (args.nativeBuildInputs or [ ]) ++ [ toolchain pkgs.rsync pkgs.zstd ];
        });

    buildDepsOnly =
      { cargoBuildCommand ? "cargoWithProfile build"
      , cargoCheckCommand ? "cargoWithProfile check"
      , cargoExtraArgs ? "--locked"
      , cargoBuildExtraArgs ? ""
      , cargoTestCommand ? "cargoWithProfile test"
      , cargoTestExtraArgs ? "--no-run"
      , ...
      }@args:
      mkCargoDerivation (builtins.removeAttrs args [ "cargoBuildCommand" "cargoCheckCommand" "cargoExtraArgs" "cargoBuildExtraArgs" "cargoTestCommand" "cargoTestExtraArgs" ] // {
        pnameSuffix = "-deps";
        cargoArtifacts = null;
        # crane lib/buildDepsOnly.nix at 2c71e194 (lines 73-77): `args.buildPhaseCargoCommand or`
        # the check + build commands; a caller's own command (maturin over the dummy sources)
        # is kept.
        buildPhaseCargoCommand = args.buildPhaseCargoCommand or "${cargoCheckCommand} ${cargoExtraArgs}; ${cargoBuildCommand} ${cargoExtraArgs} ${cargoBuildExtraArgs}; ${cargoTestCommand} ${cargoExtraArgs} ${cargoTestExtraArgs}";
        env = (args.env or { }) // { CRANE_BUILD_DEPS_ONLY = args.env.CRANE_BUILD_DEPS_ONLY or 1; };
      });

    buildPackage =
      { cargoBuildCommand ? "cargoWithProfile build"
      , cargoExtraArgs ? "--locked"
      , cargoBuildExtraArgs ? ""
      , cargoTestCommand ? "cargoWithProfile test"
      , cargoTestExtraArgs ? ""
      , ...
      }@args:
      mkCargoDerivation (builtins.removeAttrs args [ "cargoBuildCommand" "cargoExtraArgs" "cargoBuildExtraArgs" "cargoTestCommand" "cargoTestExtraArgs" ] // {
        cargoArtifacts = args.cargoArtifacts or (buildDepsOnly args);
        doInstallCargoArtifacts = args.doInstallCargoArtifacts or false;
        buildPhaseCargoCommand = args.buildPhaseCargoCommand or "${cargoBuildCommand} ${cargoExtraArgs} ${cargoBuildExtraArgs}";
        checkPhaseCargoCommand = args.checkPhaseCargoCommand or "${cargoTestCommand} ${cargoExtraArgs} ${cargoTestExtraArgs}";
      });

    cargoClippy =
      { cargoArtifacts
      , cargoClippyExtraArgs ? "--all-targets"
      , cargoExtraArgs ? "--locked"
      , ...
      }@origArgs:
      mkCargoDerivation (builtins.removeAttrs origArgs [ "cargoClippyExtraArgs" "cargoExtraArgs" ] // {
        inherit cargoArtifacts;
        pnameSuffix = "-clippy";
        buildPhaseCargoCommand = "cargoWithProfile clippy ${cargoExtraArgs} ${cargoClippyExtraArgs}";
      });

    cargoFmt =
      { cargoExtraArgs ? ""
      , rustFmtExtraArgs ? ""
      , ...
      }@origArgs:
      mkCargoDerivation (builtins.removeAttrs origArgs [ "cargoExtraArgs" "rustFmtExtraArgs" ] // {
        cargoArtifacts = null;
        cargoVendorDir = null;
        pnameSuffix = "-fmt";
        buildPhaseCargoCommand = "cargo fmt ${cargoExtraArgs} -- --check ${rustFmtExtraArgs}";
      });

    cargoNextest =
      { cargoArtifacts
      , cargoExtraArgs ? ""
      , cargoLlvmCovExtraArgs ? "--lcov --output-path $out/coverage"
      , cargoNextestExtraArgs ? ""
      , cargoNextestArchiveExtraArgs ? ""
      , cargoNextestPartitionsExtraArgs ? ""
      , doInstallCargoArtifacts ? true
      , partitions ? 1
      , partitionType ? "count"
      , withLlvmCov ? false
      , ...
      }@origArgs:
      if partitions < 1 then throw "crane double: partitions must be at least 1"
      else if !(builtins.elem partitionType [ "count" "hash" ]) then throw "crane double: unknown partitionType ${partitionType}"
      else
        mkCargoDerivation (builtins.removeAttrs origArgs [ "cargoExtraArgs" "cargoLlvmCovExtraArgs" "cargoNextestExtraArgs" "cargoNextestPartitionsExtraArgs" "partitions" "partitionType" "withLlvmCov" ] // {
          inherit cargoArtifacts doInstallCargoArtifacts;
          pnameSuffix = "-nextest";
          nativeBuildInputs = (origArgs.nativeBuildInputs or [ ]) ++ [ pkgs.cargo-nextest ];
          buildPhaseCargoCommand = "cargo ${if withLlvmCov then "llvm-cov nextest ${cargoLlvmCovExtraArgs}" else "nextest run"} ${cargoExtraArgs} ${cargoNextestExtraArgs} ${cargoNextestArchiveExtraArgs} ${cargoNextestPartitionsExtraArgs}";
          env = (origArgs.env or { }) // { NEXTEST_SHOW_PROGRESS = "counter"; };
        });
  };
in
mkScope null
