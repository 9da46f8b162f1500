# placeholder for nixpkgs' pkgs/build-support/bintools-wrapper/ld-wrapper.sh (kiln real-input evaluation; never built)
