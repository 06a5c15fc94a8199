//! Fixtures: the shared test-support crate's daemon and client, as every e2e module uses them,
//! and readers of replies more than one module needs.

pub use cairn_test_support::daemon::*;

/// The id of the prompt a reply's events opened, if one did.
pub fn opened_prompt(reply: &serde_json::Value) -> Option<String> {
    reply["events"]
        .as_array()?
        .iter()
        .find(|event| event["type"] == "prompt.opened")
        .and_then(|event| event["data"]["promptId"].as_str())
        .map(str::to_string)
}
