{
  description = "A Rust + CUDA crate on kiln: kernels built by kiln-build for its own matrix, a PyO3 wheel, gated by kiln audit";

  inputs = {
    # kiln itself: kiln's repository, as its Cargo.toml names it ([workspace.package]
    # repository; a test keeps the two equal). THE one line to change when your kiln lives
    # elsewhere (a fork, a mirror, a checkout: "git+https://host/you/kiln", "path:/abs/kiln"),
    # or keep it and pin once with `nix flake lock --override-input kiln <your kiln>`: flake.lock
    # then holds that kiln. kiln's tests override it with their checkout.
    kiln.url = "git+https://github.com/kiln-cuda/kiln";
    # The nixpkgs kiln's pins were checked against (CUDA 13.0, cuDNN, NCCL, clang 21).
    nixpkgs.follows = "kiln/nixpkgs";
  };

  outputs = { self, kiln, nixpkgs, ... }:
    let
      systems = [ "x86_64-linux" "aarch64-linux" ];
      forAllSystems = f: nixpkgs.lib.genAttrs systems (system: f system kiln.lib.${system});
    in
    {
      packages = forAllSystems (system: k: {
        # kernels/ for [package.metadata.kiln] archs, the binding, maturin.
        default = k.buildWheel { src = ./.; };
        # kiln's CLI on this project's nixpkgs, through kiln's overlay.
        kiln = (import nixpkgs {
          inherit system;
          config.allowUnfree = true;
          overlays = [ kiln.overlays.default ];
        }).kiln;
      });

      devShells = forAllSystems (_: k: {
        default = k.mkDevShell { extraPackages = [ ]; };
      });

      # The gate: `kiln audit` of the wheel against this project's own Cargo.toml.
      checks = forAllSystems (system: k: {
        audit = k.auditCheck {
          wheel = self.packages.${system}.default;
          policy = ./Cargo.toml;
        };
      });
    };
}
