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
in
{
  lib = prev.lib // import ./lib-extra.nix;
  callPackage = fn: args:
    let
      f = if builtins.isFunction fn then fn else import fn;
      auto = builtins.intersectAttrs (builtins.functionArgs f) final;
    in
    f (auto // args);
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
}
