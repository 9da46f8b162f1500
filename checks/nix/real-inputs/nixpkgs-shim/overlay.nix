final: prev:
let
  platform = system: {
    inherit system;
    isLinux = true;
    isDarwin = false;
    isWasm = false;
    isWindows = false;
    rust.rustcTarget = { x86_64-linux = "x86_64-unknown-linux-gnu"; aarch64-linux = "aarch64-unknown-linux-gnu"; }.${system};
  };
  tool = name: final.stdenv.mkDerivation { pname = name; version = "0"; };
  scope = import ./scope.nix final;
in
{
  lib = prev.lib // import ./lib-extra.nix // { inherit (scope) makeScope extends; };
  inherit (scope) newScope makeScopeWithSplicing';
  callPackage = scope.callPackageWith final;
  splicePackages = _: throw "splicePackages: not needed without cross-compilation";
  pkgsBuildBuild = final;
  pkgsBuildHost = final;
  pkgsBuildTarget = final;
  pkgsHostTarget = final;
  pkgs = final;
  stdenv = prev.stdenv // {
    hostPlatform = platform final.system;
    targetPlatform = platform final.system;
    buildPlatform = platform final.system;
    cc = tool "gcc-wrapper" // {
      bintools = tool "binutils-wrapper" // {
        expandResponseParams = tool "expand-response-params";
        shell = "/bin/sh";
        suffixSalt = "x86_64_unknown_linux_gnu";
        wrapperName = "BINTOOLS_WRAPPER";
        coreutils_bin = tool "coreutils";
      };
    };
  };
  stdenvNoCC = final.stdenv;
  fetchurl = { url, sha256 ? null, hash ? null, ... }:
    final.stdenv.mkDerivation {
      name = baseNameOf url;
      inherit url;
      outputHashMode = "flat";
      outputHashAlgo = if hash != null then null else "sha256";
      outputHash = if hash != null then hash else sha256;
    };
  # rust-overlay interpolates a few of nixpkgs' wrapper scripts; placeholders stand in.
  path = ./fake-nixpkgs-path;
  pkgsTargetTarget = final;
  pkgsHostHost = final;
  gnutar = tool "gnutar";
  autoPatchelfHook = tool "auto-patchelf-hook";
  bintools = tool "bintools";
  lndir = tool "lndir";
  zlib = tool "zlib";
  gccForLibs = final.stdenv.mkDerivation { pname = "gcc"; version = "0"; outputs = [ "out" "lib" ]; };
  bash = tool "bash";
  curl = tool "curl";
  rustc = tool "rustc";
  makeWrapper = tool "make-wrapper";
  libsecret = tool "libsecret";

  # What the real crane reads.
  writeText = name: text: final.stdenv.mkDerivation { inherit name text; passAsFile = [ "text" ]; };
  makeSetupHook = { name, ... }@args: script:
    final.stdenv.mkDerivation (builtins.removeAttrs args [ "substitutions" "passthru" "meta" ] // {
      inherit name script;
      substitutions = builtins.toJSON (builtins.mapAttrs (_: toString) (args.substitutions or { }));
    });
  runCommandLocal = final.runCommand;
  jq = tool "jq";
  cargo-llvm-cov = tool "cargo-llvm-cov";
  writableTmpDirAsHomeHook = tool "writable-tmpdir-as-home-hook";
  rustPlatform.buildRustPackage = { pname, version, src, ... }@args:
    final.stdenv.mkDerivation (builtins.removeAttrs args [ "cargoLock" ] // { inherit pname version src; });
}
