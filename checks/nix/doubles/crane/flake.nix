{
  description = "kiln test double of ipetkov/crane (project-written; evaluation only)";
  inputs = { };
  outputs = _: {
    mkLib = pkgs: import ./lib.nix { inherit pkgs; };
  };
}
