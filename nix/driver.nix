# Driver discovery for the dev shell, as a shell fragment (the logic lives in driver-hook.sh so
# that it can be tested without Nix).
{}:
builtins.readFile ./driver-hook.sh
