# placeholder for nixpkgs' pkgs/build-support/wrapper-common/utils.bash (kiln real-input evaluation; never built)
