{
  description = "kiln: a reproducible Rust + CUDA toolchain, its crates, and a wheel that is audited before it ships";

  # Prebuilt CUDA closures (NCCL is compiled from source otherwise): Flox's cache, which NVIDIA
  # licenses to redistribute CUDA builds of unmodified nixpkgs. URL and key as Flox published them
  # at https://discourse.nixos.org/t/nix-flox-nvidia-opening-up-cuda-redistribution-on-nix/69189
  # and https://flox.dev/docs/concepts/cuda-catalog-and-cache. Nix asks before using these (or
  # takes them with accept-flake-config); README "Binary cache for CUDA" says what it holds.
  nixConfig = {
    extra-substituters = [ "https://cache.flox.dev" ];
    extra-trusted-public-keys = [ "flox-cache-public-1:7F4OyH7ZCnFhcze3fJdfyXYLQw/aV7GEed86nQ7IsOs=" ];
  };

  inputs = {
    # nixpkgs-unstable of 2026-08-03. The revision and its narHash are the ones ipetkov/crane's
    # own public lock file pins: https://github.com/ipetkov/crane/blob/2c71e194474d13de031d729b729c968ddbe3507f/test/flake.lock
    # (node "nixpkgs", lastModified 1785747939). What it gives kiln (cudaPackages_13_0 with
    # cuDNN 9.22.0.52 and NCCL 2.30.7-1, llvmPackages_21 21.1.8, maturin 1.14.1) is recorded,
    # with sources, in checks/nix/doubles/nixpkgs/facts.toml; a new lock needs new facts.
    nixpkgs.url = "github:NixOS/nixpkgs/104240a772428cc2e20d8fd86c9ddbb886bbaff2";
    crane.url = "github:ipetkov/crane";
    rust-overlay = {
      url = "github:oxalica/rust-overlay";
      inputs.nixpkgs.follows = "nixpkgs";
    };
  };

  outputs = { self, nixpkgs, crane, rust-overlay, ... }:
    let
      root = ./.;
      # The commit the kernels' build manifest records (KILN_BUILD_COMMIT/KILN_BUILD_DIRTY, as
      # `cargo xtask wheel` passes them).
      buildInfo = {
        KILN_BUILD_COMMIT = self.rev or (if self ? dirtyRev then builtins.head (builtins.split "-dirty" self.dirtyRev) else "unknown");
        KILN_BUILD_DIRTY = if self ? rev then "0" else "1";
      };
      pins = import ./nix/pins.nix { cargoToml = ./Cargo.toml; };
      systems = [ "x86_64-linux" "aarch64-linux" ];
      # One nixpkgs instance per system, shared by every output group (an attribute set is
      # evaluated once; a function called per group would import nixpkgs again each time).
      pkgsFor = nixpkgs.lib.genAttrs systems (import ./nix/pkgs.nix { inherit nixpkgs rust-overlay; });
      perSystemFor = nixpkgs.lib.genAttrs systems (system: perSystem pkgsFor.${system});
      forAllSystems = f: nixpkgs.lib.genAttrs systems (system: f pkgsFor.${system} perSystemFor.${system});

      perSystem = pkgs: rec {
        toolchain = import ./nix/toolchain.nix { inherit pkgs pins; };
        cuda = import ./nix/cuda.nix { inherit pkgs pins; };
        driverHook = import ./nix/driver.nix { };
        crates = import ./nix/crates.nix { inherit pkgs crane pins toolchain cuda root buildInfo driverHook; };
        wheel = import ./nix/wheel.nix { inherit pkgs pins crates root; };
        image = import ./nix/image.nix { inherit pkgs pins crates cuda wheel; };
      };

      # What other projects use (nix/lib/, one helper per file; README "Use kiln in your project").
      libFor = pkgs: s: {
        inherit (s) toolchain cuda;
        inherit (s.crates) kiln;
        mkDevShell = import ./nix/lib/mkDevShell.nix { inherit pkgs; inherit (s) toolchain cuda driverHook; };
        buildWheel = import ./nix/lib/buildWheel.nix { inherit pkgs; inherit (s) crates; };
        auditCheck = import ./nix/lib/auditCheck.nix { inherit pkgs; kiln = s.crates.kiln; };
        # kiln's own kernel build as one derivation per job (nix/kernel-jobs.nix):
        # `jobs.<id>`, the `prebuilt` farm the kernels derivation takes, and the plan's inputs.
        inherit (s.crates) kernelJobs;
      };
    in
    {
      # kiln's pins on a project's own nixpkgs (it must allow unfree, for CUDA): rust-overlay's
      # rust-bin, then `kiln` (the CLI) and `kilnPackages` (the pinned nightly, clang/libclang 21,
      # CUDA_HOME, cuDNN, NCCL), checked against Cargo.toml as kiln's own are.
      overlays.default = final: prev:
        let
          withRust = rust-overlay.overlays.default final prev;
          s = perSystem final;
        in
        withRust // {
          inherit (s.crates) kiln;
          kilnPackages = {
            inherit (s.toolchain) rust libclang;
            inherit (s.toolchain.llvm) clang;
            inherit (s.cuda) cudaPackages cudnn nccl;
            cudaHome = s.cuda.home;
          };
        };

      lib = forAllSystems libFor;

      # `nix flake init -t <kiln>`: the consumer fixture CI builds (`cargo xtask consumer`) is the
      # template itself.
      templates.default = {
        path = ./checks/consumer;
        description = "A Rust + CUDA crate built with kiln-build (its own arch matrix), a PyO3 wheel, and `kiln audit` in its checks";
      };

      packages = forAllSystems (_: s: {
        inherit (s.crates) kiln kernels;
        kernel-jobs = s.crates.kernelJobs.prebuilt;
        inherit (s) wheel;
        # OCI image: `nix build .#image && ./result | docker load` (README "Shipping containers").
        inherit (s.image) image;
        default = s.crates.kiln;
      });

      devShells = forAllSystems (pkgs: s: {
        default = import ./nix/shell.nix { inherit pkgs; inherit (s) toolchain cuda driverHook; };
      });

      checks = forAllSystems (pkgs: s: {
        clippy = import ./nix/checks/clippy.nix { inherit (s) crates; };
        rustfmt = import ./nix/checks/rustfmt.nix { inherit (s) crates; };
        nextest = import ./nix/checks/nextest.nix { inherit (s) crates cuda; };
        # The image's whole closure holds no libcuda (the container toolkit mounts the host's).
        image-no-libcuda = s.image.noLibcuda;
        # The template (checks/consumer) built by lib.buildWheel as a project would, and gated
        # against its own table: what `nix flake init -t` users run.
        template = (libFor pkgs s).auditCheck {
          wheel = (libFor pkgs s).buildWheel { src = ./checks/consumer; };
          policy = ./checks/consumer/Cargo.toml;
        };
        audit = (libFor pkgs s).auditCheck {
          inherit (s) wheel;
          policy = ./Cargo.toml;
        };
      });

      formatter = forAllSystems (pkgs: s: import ./nix/formatter.nix {
        inherit pkgs;
        inherit (s) toolchain;
      });
    };
}
