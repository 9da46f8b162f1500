# The build phases of `kiln.lib.buildWheel`'s derivation, run up to maturin in the order stdenv
# runs them, with crane's REAL setup hooks: does the build reach cargo with CARGO_HOME set and
# the vendored sources configured? Driven by tools/xtask/tests/phase_order.rs, which evaluates
# the derivation (the template's packages.x86_64-linux.default) and writes its attributes to
# $DRV_JSON.
#
# Inputs (environment): CRANE (an unpacked crane source, lib/setupHooks/*.sh), DRV_JSON, SRC
# (the project: what `src` unpacks to), KILN_SOURCE (kiln's source: what `kilnSrc`, crates.src,
# holds), VENDOR (a vendored directory of the project's Cargo.lock with crane's config.toml),
# RUST_BIN (a directory with cargo and rustc, not a rustup proxy), WORK (an empty directory).
#
# The order is stdenv's, nixpkgs pkgs/stdenv/generic/setup.sh (read at NixOS/nixpkgs
# 183939da54831b11f389d9863a0e5b41aaf1ddc5; unchanged in substance for years):
# - setup time: every nativeBuildInput's nix-support/setup-hook is sourced (activatePackage:
#   `source "$pkg/nix-support/setup-hook"`), so crane's hooks register themselves
#   (`postPatchHooks+=(configureCargoCommonVars)`, `preConfigureHooks+=(configureCargoVendoredDepsHook)`,
#   `postPatchHooks+=(inheritCargoArtifacts)`) before any phase runs;
# - runHook NAME: `for hook in "_callImplicitHook 0 $hookName" ${!hooksSlice+"${!hooksSlice}"}`,
#   i.e. the derivation's own NAME (a function, else the string attribute, eval'd) FIRST, then
#   the NAMEHooks array in order. So a `postPatch` string runs before crane's postPatchHooks;
# - genericBuild: phases `unpackPhase patchPhase configurePhase buildPhase …`; after
#   unpackPhase, `cd "${sourceRoot:-.}"` (so postUnpack may still change sourceRoot);
# - unpackPhase: a directory src is copied (`cp -pr --reflink=auto -- "$fn" "$destination"`,
#   destination its name without the store hash), sourceRoot is the new directory, made
#   writable (`chmod -R u+w`), then `runHook postUnpack`;
# - patchPhase: `runHook prePatch`, the patches, `runHook postPatch`;
# - configurePhase/buildPhase: crane's own (lib/mkCargoDerivation.nix at 2c71e194):
#   `runHook preConfigure; echo …; runHook postConfigure` and
#   `runHook preBuild; cargo --version; ${buildPhaseCargoCommand}; runHook postBuild`.
# The functions below are written from that description, not copied.
#
# Not modelled here (explicit): the sandbox itself (only HOME is made unusable, and cargo is
# kept off the network by CARGO_NET_OFFLINE instead of by having none); the other
# nativeBuildInputs' setup hooks (cuda_nvcc's NVCC_CCBIN, the compiler wrappers); `preBuild`
# (kiln's libc cflags read a store path that does not exist here: replaced by
# a no-op); maturin itself (a stand-in on PATH runs the cargo resolution maturin starts with,
# `cargo metadata`, with the same --locked, and stops: no compilation, no nvcc, no zig);
# installPhase and later.
set -eu
set -o pipefail
: "${CRANE:?}" "${DRV_JSON:?}" "${SRC:?}" "${KILN_SOURCE:?}" "${VENDOR:?}" "${RUST_BIN:?}" "${WORK:?}"

export NIX_BUILD_TOP="$WORK/build" TMPDIR="$WORK/build" NIX_BUILD_CORES=2
# /homeless-shelter, unusable even for root: a regular file, so nothing can be created below it.
export HOME="$WORK/homeless-shelter"
: >"$HOME"
export CARGO_NET_OFFLINE=true
unset CARGO_HOME CARGO_TARGET_DIR RUSTUP_TOOLCHAIN CARGO_BUILD_TARGET
mkdir -p "$NIX_BUILD_TOP" "$WORK/bin"

# The derivation's attributes become environment variables, as in a Nix build.
eval "$(python3 - "$DRV_JSON" <<'PY'
import json, shlex, sys
for k, v in json.load(open(sys.argv[1])).items():
    if v is None:
        continue
    if isinstance(v, bool):
        v = "1" if v else ""
    print(f"export {k}={shlex.quote(str(v))}")
PY
)"
# What the store paths would hold in the sandbox.
export src="$SRC" kilnSrc="$KILN_SOURCE" cargoVendorDir="$VENDOR"
# crane's dependency build is installed as target.tar.zst (installCargoArtifacts, use-zstd);
# this one holds a marker, so the stand-in can see it was restored where maturin builds.
if [ -n "${cargoArtifacts:-}" ]; then
  mkdir -p "$WORK/deps-target/release" "$WORK/deps"
  echo deps >"$WORK/deps-target/release/.kiln-deps-marker"
  tar -C "$WORK/deps-target" -c . | zstd -q -o "$WORK/deps/target.tar.zst"
  export cargoArtifacts="$WORK/deps"
fi
export preBuild=""

# maturin's stand-in: where it runs, what cargo sees, then cargo's resolution of the project.
cat >"$WORK/bin/maturin" <<'SH'
#!/usr/bin/env bash
set -euo pipefail
echo "phase-order: maturin $* (cwd $PWD)"
[ -n "${CARGO_HOME:-}" ] || { echo "phase-order: CARGO_HOME is not set when maturin runs" >&2; exit 1; }
grep -q 'replace-with' "$CARGO_HOME/config.toml" 2>/dev/null \
  || { echo "phase-order: no source replacement in \$CARGO_HOME/config.toml when maturin runs" >&2; exit 1; }
[ -f "${CARGO_TARGET_DIR:-target}/release/.kiln-deps-marker" ] || [ -z "${cargoArtifacts:-}" ] \
  || { echo "phase-order: crane's dependency artifacts are not in $PWD/target" >&2; exit 1; }
cargo metadata --locked --format-version 1 >"$WORK/metadata.json"
echo "CARGO_HOME=$CARGO_HOME" >"$WORK/reached"
echo "PWD=$PWD" >>"$WORK/reached"
SH
chmod +x "$WORK/bin/maturin"
export PATH="$WORK/bin:$RUST_BIN:/usr/bin:/bin"

# --- stdenv's hook semantics (see the header) ------------------------------------------------
runHook() {
  local name="$1" entry
  local list="${name}Hooks[@]"
  echo "phase-order: runHook $name"
  if declare -F "$name" >/dev/null; then
    "$name"
  elif [ -n "${!name:-}" ]; then
    eval "${!name}"
  fi
  for entry in ${!list+"${!list}"}; do
    echo "phase-order:   $name hook: $entry"
    if declare -F "$entry" >/dev/null; then "$entry"; else eval "$entry"; fi
  done
}

# --- setup time: crane's hooks, in mkCargoDerivation's nativeBuildInputs order ---------------
declare -a prePatchHooks=() postPatchHooks=() preConfigureHooks=() postInstallHooks=()
for hook in cargoHelperFunctionsHook configureCargoCommonVarsHook configureCargoVendoredDepsHook \
  inheritCargoArtifactsHook installCargoArtifactsHook replaceCargoLockHook; do
  # shellcheck disable=SC1090
  source "$CRANE/lib/setupHooks/$hook.sh"
done

# --- the phases ------------------------------------------------------------------------------
cd "$NIX_BUILD_TOP"
echo "phase-order: unpackPhase"
runHook preUnpack
name_of_src="$(basename "$src")"
cp -pr -- "$src" "$name_of_src"
sourceRoot="$name_of_src"
chmod -R u+w -- "$sourceRoot"
runHook postUnpack
cd "$sourceRoot"

echo "phase-order: patchPhase"
runHook prePatch
runHook postPatch

echo "phase-order: configurePhase"
runHook preConfigure
runHook postConfigure

echo "phase-order: buildPhase"
runHook preBuild
cargo --version
eval "$buildPhaseCargoCommand"
runHook postBuild
echo "phase-order: reached the end of buildPhase"
