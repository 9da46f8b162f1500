# The build container for a kiln consumer (checks/container/README.md): Debian bookworm from
# Debian's packages (`cargo xtask image` imports it as kiln-base:bookworm), plus the one thing
# nvcc and rustc need from the OS, a C/C++ compiler (nvcc's host compiler; cc links Rust).
# No NVIDIA driver, no libcuda, no CUDA package: the pinned toolchain is mounted at run time.
FROM kiln-base:bookworm
RUN apt-get update \
 && apt-get install -y --no-install-recommends g++ \
 && rm -rf /var/lib/apt/lists/*
