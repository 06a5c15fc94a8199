//! Fixtures: the shared test-support crate's daemon and client, as every e2e module uses them.

pub use cairn_test_support::daemon::*;
