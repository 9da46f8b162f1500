# nixpkgs' package-scope machinery (callPackageWith, makeScope, makeScopeWithSplicing'), as the
# real crane uses it — without splicing, since nothing here cross-compiles.
final:
let
  callPackageWith = autoArgs: fn: args:
    let
      f = if builtins.isFunction fn then fn else import fn;
      result = f (builtins.intersectAttrs (builtins.functionArgs f) autoArgs // args);
    in
    if builtins.isAttrs result then result // { override = newArgs: callPackageWith autoArgs fn (args // newArgs); } else result;
  extends = overlay: f: self: let prev = f self; in prev // overlay self prev;
  makeScope = newScope: f:
    let
      self = f self // {
        newScope = scope: newScope (self // scope);
        callPackage = self.newScope { };
        overrideScope = g: makeScope newScope (extends g f);
        packages = f;
      };
    in
    self;
in
{
  inherit callPackageWith makeScope extends;
  newScope = extra: callPackageWith (final // extra);
  makeScopeWithSplicing' = { f, ... }: makeScope final.newScope f;
}
