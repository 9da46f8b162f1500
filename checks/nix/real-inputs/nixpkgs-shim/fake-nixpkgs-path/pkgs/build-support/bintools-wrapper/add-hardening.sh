# placeholder for nixpkgs' pkgs/build-support/bintools-wrapper/add-hardening.sh (kiln real-input evaluation; never built)
