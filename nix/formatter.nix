# `nix fmt`: nixpkgs-fmt for the Nix files and rustfmt (the pinned nightly's) for the crates.
{ pkgs, toolchain }:
pkgs.writeShellApplication {
  name = "kiln-fmt";
  runtimeInputs = [ pkgs.nixpkgs-fmt pkgs.findutils pkgs.git toolchain.rust ];
  text = ''
    if [ "$#" -gt 0 ]; then exec nixpkgs-fmt "$@"; fi
    root=$(git rev-parse --show-toplevel 2>/dev/null || pwd)
    cd "$root"
    find . -name '*.nix' -not -path './target/*' -not -path './.toolchain/*' -print0 | xargs -0 nixpkgs-fmt
    cargo fmt --all
  '';
}
