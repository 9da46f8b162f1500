{
  description = "kiln test double of NixOS/nixpkgs (project-written; evaluation only)";
  outputs = _: {
    lib = import ./lib.nix;
  };
}
