//! How a project gets the pinned toolchain, so that advice names a command that exists where
//! the user is: kiln's own checkout has `cargo xtask bootstrap` and `.toolchain/`; a consumer
//! project (a crate that build-depends on kiln-build) has neither — it has the `kiln` binary's
//! `kiln bootstrap`, which installs per user, and `nix develop`.

use std::ffi::OsString;

use kiln_pins::Pins;

use crate::layout::Layout;

/// Where the toolchain advice points.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// kiln's own workspace: `cargo xtask bootstrap`, installed in `<workspace>/.toolchain`.
    Checkout,
    /// Any other project (or none): `kiln bootstrap`, installed in the per-user directory.
    Consumer,
}

impl Route {
    /// A complete kiln table (nothing inherited from kiln's built-in pins) is kiln's own
    /// workspace; a table layered over kiln's is a consumer's.
    pub fn of(pins: &Pins) -> Route {
        if pins.inherited.is_empty() {
            Route::Checkout
        } else {
            Route::Consumer
        }
    }

    /// Where this route installs the toolchain: `.toolchain/` of the checkout, or the per-user
    /// directory (None when neither XDG_DATA_HOME nor HOME is set).
    pub fn layout(self, env: &dyn Fn(&str) -> Option<OsString>, pins: &Pins) -> Option<Layout> {
        match self {
            Route::Checkout => Some(Layout::in_checkout(pins.root())),
            Route::Consumer => Layout::per_user(env, pins),
        }
    }

    /// The shell line that installs the pinned toolchain and sets up a shell for it.
    pub fn bootstrap(self) -> &'static str {
        match self {
            Route::Checkout => "`cargo xtask bootstrap` then `source .toolchain/env`",
            Route::Consumer => "`kiln bootstrap` then `source \"$(kiln bootstrap --env-file)\"`",
        }
    }

    /// How to set up a shell for an installed toolchain (its env file).
    pub fn source_env(self) -> &'static str {
        match self {
            Route::Checkout => "`source .toolchain/env`",
            Route::Consumer => "`source \"$(kiln bootstrap --env-file)\"`",
        }
    }

    /// One fix line: install the pinned toolchain without Nix, or enter the pinned shell.
    pub fn install_fix(self) -> String {
        format!(
            "install the pinned toolchain: {} (no Nix needed), or enter the pinned shell with `nix develop`",
            self.bootstrap()
        )
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    #[test]
    fn kiln_s_own_table_is_the_checkout_and_a_layered_one_a_consumer() {
        let own =
            Pins::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../../Cargo.toml")).unwrap();
        assert_eq!(Route::of(&own), Route::Checkout);
        assert!(Route::Checkout
            .install_fix()
            .contains("cargo xtask bootstrap"));
        let consumer = Pins::parse(
            "[package]\nname = \"c\"\n[package.metadata.kiln]\narchs = [\"8.9\"]\n",
            Path::new("/p/c/Cargo.toml"),
        )
        .unwrap();
        assert_eq!(Route::of(&consumer), Route::Consumer);
        let fix = Route::Consumer.install_fix();
        assert!(
            fix.contains("kiln bootstrap --env-file") && fix.contains("nix develop"),
            "{fix}"
        );
        assert!(
            !fix.contains("xtask") && !fix.contains(".toolchain"),
            "{fix}"
        );
        // A consumer's install is the per-user one, never `<project>/.toolchain`.
        let home = |k: &str| (k == "HOME").then(|| OsString::from("/home/u"));
        let l = Route::of(&consumer).layout(&home, &consumer).unwrap();
        assert!(
            l.root.starts_with("/home/u/.local/share/kiln/toolchain"),
            "{l:?}"
        );
        assert_eq!(Route::of(&consumer).layout(&|_| None, &consumer), None);
    }
}
