# kiln.lib.<system>.auditCheck { wheel, policy }: a `checks` entry that runs `kiln audit` over the
# one wheel in `wheel` against `policy`, a Cargo.toml with [package.metadata.kiln] or
# [workspace.metadata.kiln] (a project's table is layered over kiln's pins, as kiln-build does).
# The check is nix/checks/audit.nix, the same one that gates kiln's own wheel.
{ pkgs, kiln }:
{ wheel, policy }:
import ../checks/audit.nix { inherit pkgs kiln wheel policy; }
