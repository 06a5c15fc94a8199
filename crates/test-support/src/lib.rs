//! What Cairn's tests share, written once: a real daemon on port 0 with a temporary data
//! directory ([`daemon`]), a loopback HTTP/WebSocket server for a handler ([`loopback`]),
//! the next JSON event on a WebSocket ([`ws`]),
//! stand-ins for the paid OpenAI-compatible endpoints, with delays and failures on demand
//! ([`standin`]), a seeded random generator ([`rng`]) and a throwaway PostgreSQL cluster
//! ([`postgres`]).
//!
//! A dev-dependency only (the bench excepted): no release build carries it. It depends on no
//! Cairn crate, so the tests of any crate can use it without linking a second copy of the
//! crate they test. Failures say what happened in words a reader can act on (the daemon's
//! log, the request that was sent), after ripgrep's `tests/util.rs`.

pub mod daemon;
pub mod loopback;
pub mod postgres;
pub mod rng;
pub mod standin;
pub mod ws;

/// A free port on 127.0.0.1 at the time of the call (nothing listens on it afterwards).
pub fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a free port");
    listener.local_addr().expect("a bound address").port()
}

/// `http://127.0.0.1:<port>` where nothing listens: a server that is down.
pub fn unused_url() -> String {
    format!("http://127.0.0.1:{}", free_port())
}

/// One field of every object in a JSON array, read with `get` (`Value::as_str`,
/// `Value::as_u64`, ...): `column(&body["memories"], "id", Value::as_str)`. Panics, naming
/// the field, when `array` is not an array or an item lacks the field or has another type.
pub fn column<'a, T>(
    array: &'a serde_json::Value,
    field: &str,
    get: impl Fn(&'a serde_json::Value) -> Option<T>,
) -> Vec<T> {
    let items = array.as_array().unwrap_or_else(|| panic!("an array, not {array}"));
    items
        .iter()
        .map(|item| get(&item[field]).unwrap_or_else(|| panic!("`{field}` of {item}")))
        .collect()
}
