#!/bin/sh
# Runs inside the build container (see README.md here): kiln's preflight, then the consumer's
# build with the kernel cache on the mounted volume ($KILN_KERNEL_CACHE), then what the host
# checks copied to /out. The crates come vendored (/vendor), the network is off.
set -eu
cd "${KILN_PROJECT:-/kiln/checks/consumer}"

echo "== preflight: kiln doctor --build-only --pins Cargo.toml"
kiln doctor --build-only --pins Cargo.toml --color never

echo "== the driver in this container"
if ldconfig -p | grep 'libcuda\.so'; then
  echo "error: the loader knows a libcuda in the build container" >&2
  exit 1
fi
echo "no libcuda.so* known to the loader (ldconfig -p)"

# A Python extension (pyo3): maturin sets this; a plain cargo build must, or pyo3 links libpython.
export PYO3_BUILD_EXTENSION_MODULE=1

# cargo with the vendored crates in place of crates.io.
vendored() {
  cargo "$@" \
    --config "source.crates-io.replace-with='vendored'" \
    --config "source.vendored.directory='/vendor'"
}

# The target directory is a volume that outlives this container (the dependencies, pyo3 and
# bindgen, stay built); the consumer crate itself is cleaned, so its build script runs again as
# it would in a Dockerfile layer a source edit invalidated, and every kernel goes through the
# kernel cache.
echo "== cargo clean -p kiln-consumer-example (target $CARGO_TARGET_DIR)"
vendored clean --offline -p kiln-consumer-example
rm -f /out/kernels.summary.json
: > /out/.started

echo "== cargo build --locked --offline (kernel cache $KILN_KERNEL_CACHE, target $CARGO_TARGET_DIR)"
vendored build --locked --offline

cp "$CARGO_TARGET_DIR"/debug/libkiln_consumer_example.so /out/
n=0
for f in "$CARGO_TARGET_DIR"/debug/build/kiln-consumer-example-*/out/kernels.summary.json; do
  # The build script ran in this build: its summary is newer than the clean.
  [ "$f" -nt /out/.started ] || {
    echo "error: $f predates this build: the build script did not run" >&2; exit 1; }
  cp "$f" /out/kernels.summary.json
  n=$((n + 1))
done
[ "$n" = 1 ] || { echo "error: expected one kernels.summary.json, found $n" >&2; exit 1; }
echo "build script ran" > /out/build-script-ran
echo "== built; the host checks /out"
