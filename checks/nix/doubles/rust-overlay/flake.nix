{
  description = "kiln test double of oxalica/rust-overlay (project-written; evaluation only)";
  # The real flake has this input; kiln makes it follow its own nixpkgs.
  inputs.nixpkgs.url = "github:NixOS/nixpkgs/nixpkgs-unstable";
  outputs = _: {
    overlays.default = import ./overlay.nix;
  };
}
