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

echo "== cargo build --locked --offline (kernel cache $KILN_KERNEL_CACHE, target $CARGO_TARGET_DIR)"
cargo build --locked --offline \
  --config "source.crates-io.replace-with='vendored'" \
  --config "source.vendored.directory='/vendor'"

cp "$CARGO_TARGET_DIR"/debug/libkiln_consumer_example.so /out/
n=0
for f in "$CARGO_TARGET_DIR"/debug/build/kiln-consumer-example-*/out/kernels.summary.json; do
  cp "$f" /out/kernels.summary.json
  n=$((n + 1))
done
[ "$n" = 1 ] || { echo "error: expected one kernels.summary.json, found $n" >&2; exit 1; }
echo "== built; the host checks /out"
