# The wheel step, exactly as `nix build .#wheel` runs it (nix/wheel.nix reads this file) and as
# `cargo xtask test --only sandbox` runs it without Nix, in a copy of the flake's source set.
# Runs in the source tree; writes dist/*.whl there.
# Environment: manylinux (the platform tag, [workspace.metadata.kiln.wheel]), TMPDIR (writable);
# maturin, zig (or PyPI ziglang), cargo and kiln on PATH (or KILN=path/to/kiln); cargo's
# dependencies already fetched.
# HOME is unwritable here, as in the Nix sandbox (/homeless-shelter): nothing may write there.
set -euo pipefail
: "${manylinux:?}" "${TMPDIR:?}"
# cargo-zigbuild (maturin --zig) keeps its cache under $XDG_CACHE_HOME, else $HOME/.cache;
# zig its own under ZIG_GLOBAL_CACHE_DIR.
export XDG_CACHE_HOME="$TMPDIR/xdg-cache" ZIG_GLOBAL_CACHE_DIR="$TMPDIR/zig-cache"
# zig links the extension against glibc 2.34's symbol versions, not the build host's newer
# glibc, and leaves no build-tree RUNPATH: the wheel holds what its manylinux tag promises.
maturin build --release --offline --locked \
  --manifest-path crates/kiln-py/Cargo.toml \
  --zig --compatibility "$manylinux" --out raw
# crane's dependency-only build (nix/wheel.nix wheelDeps) runs this same maturin command over
# dummied sources, so that the real build finds every dependency compiled with maturin's target
# and linker; the dummy wheel is not finalized.
if [ -n "${CRANE_BUILD_DEPS_ONLY:-}" ]; then exit 0; fi
# The post-processing step `cargo xtask wheel` runs too (crates/kiln-wheel/src/finalize.rs):
# Requires-Dist and the SBOM's runtime wheels from the pins, RECORD rehashed. By the kiln
# already built from this source (Nix: the kiln package; `cargo xtask sandbox`: its kiln
# binary), not a second release build of the workspace here.
: "${KILN:=kiln}"
"$KILN" wheel finalize raw/*.whl --pins Cargo.toml --out dist
