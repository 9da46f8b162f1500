# placeholder for nixpkgs' pkgs/build-support/bintools-wrapper/add-flags.sh (kiln real-input evaluation; never built)
