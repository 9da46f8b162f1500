{
  description = "kiln: a reproducible Rust + CUDA toolchain, its crates, and a wheel that is audited before it ships";

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
      forAllSystems = f: nixpkgs.lib.genAttrs systems (system: f (import ./nix/pkgs.nix { inherit nixpkgs rust-overlay; } system));

      perSystem = pkgs: rec {
        toolchain = import ./nix/toolchain.nix { inherit pkgs pins; };
        cuda = import ./nix/cuda.nix { inherit pkgs pins; };
        driverHook = import ./nix/driver.nix { };
        crates = import ./nix/crates.nix { inherit pkgs crane pins toolchain cuda root buildInfo driverHook; };
        wheel = import ./nix/wheel.nix { inherit pkgs pins crates root; };
      };
    in
    {
      packages = forAllSystems (pkgs:
        let s = perSystem pkgs; in {
          inherit (s.crates) kiln kernels;
          inherit (s) wheel;
          default = s.crates.kiln;
        });

      devShells = forAllSystems (pkgs:
        let s = perSystem pkgs; in {
          default = import ./nix/shell.nix { inherit pkgs; inherit (s) toolchain cuda driverHook; };
        });

      checks = forAllSystems (pkgs:
        let s = perSystem pkgs; in {
          clippy = import ./nix/checks/clippy.nix { inherit (s) crates; };
          rustfmt = import ./nix/checks/rustfmt.nix { inherit (s) crates; };
          nextest = import ./nix/checks/nextest.nix { inherit (s) crates cuda; };
          audit = import ./nix/checks/audit.nix {
            inherit pkgs root;
            inherit (s) wheel;
            kiln = s.crates.kiln;
          };
        });

      formatter = forAllSystems (pkgs: import ./nix/formatter.nix {
        inherit pkgs;
        inherit (perSystem pkgs) toolchain;
      });
    };
}
