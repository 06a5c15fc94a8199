//! A bound on the connections one client address may hold, so one caller cannot take every
//! connection the daemon serves, and the answer a connection over that bound gets.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cairn_api::{ApiError, ResponseBody};
use cairn_types::ErrorCode;
use http::{HeaderValue, Request, Response};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpStream;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Connections over the bound being answered at once; past it they are closed unanswered.
pub(crate) const MAX_REFUSALS_AT_ONCE: usize = 64;
/// How long a refused connection may take to send its request before it is closed.
const REFUSAL_READ_TIMEOUT: Duration = Duration::from_secs(2);

/// How many connections each client address holds.
#[derive(Debug)]
pub(crate) struct AddressSlots(SlotTable);

/// A semaphore of `per_address` permits for each address (key) seen, forgetting the idle
/// ones when the table grows past 4,096 addresses.
#[derive(Debug)]
pub(crate) struct SlotTable {
    per_address: usize,
    slots: Mutex<HashMap<IpAddr, Arc<Semaphore>>>,
}

impl SlotTable {
    pub(crate) fn new(per_address: usize) -> SlotTable {
        SlotTable { per_address, slots: Mutex::default() }
    }

    /// The semaphore of `key`, made on first use.
    pub(crate) fn semaphore(&self, key: IpAddr) -> Arc<Semaphore> {
        let mut slots = self.slots.lock().expect("the slot table is never poisoned");
        if slots.len() > 4096 {
            // Forget addresses with nothing in flight.
            let full = self.per_address;
            slots.retain(|_, semaphore| semaphore.available_permits() < full);
        }
        slots.entry(key).or_insert_with(|| Arc::new(Semaphore::new(self.per_address))).clone()
    }
}

impl AddressSlots {
    /// `per_address` connections per address; 0 for no bound.
    pub(crate) fn new(per_address: usize) -> AddressSlots {
        AddressSlots(SlotTable::new(per_address))
    }

    pub(crate) fn limit(&self) -> usize {
        self.0.per_address
    }

    /// A slot for one more connection from `address` (held until dropped), `Some(None)` when
    /// there is no bound, or `None` when the address has all of its slots.
    pub(crate) fn take(&self, address: IpAddr) -> Option<Option<OwnedSemaphorePermit>> {
        if self.0.per_address == 0 {
            return Some(None);
        }
        self.0.semaphore(client_key(address)).try_acquire_owned().ok().map(Some)
    }
}

/// The key a client's connections are counted under: its IPv4 address, or its IPv6
/// address's /64 (one host's usual allocation, so it cannot count as many clients).
fn client_key(address: IpAddr) -> IpAddr {
    match address.to_canonical() {
        IpAddr::V6(v6) => {
            let mut octets = v6.octets();
            octets[8..].fill(0);
            IpAddr::from(octets)
        }
        v4 => v4,
    }
}

/// Answers a connection over its address's bound with one 429 (HTTP/1.1) and closes it,
/// unless `MAX_REFUSALS_AT_ONCE` are being answered, in which case it is closed at once.
pub(crate) fn refuse(stream: TcpStream, peer: SocketAddr, limit: usize, refusals: &Arc<Semaphore>) {
    let Ok(refusal) = refusals.clone().try_acquire_owned() else {
        tracing::debug!(%peer, "closed a connection over its address's bound unanswered");
        return;
    };
    tracing::info!(%peer, limit, "refused a connection: its address holds too many");
    tokio::spawn(async move {
        let service = service_fn(move |_: Request<Incoming>| async move {
            Ok::<_, std::convert::Infallible>(too_many_connections(peer, limit))
        });
        let mut http1 = hyper::server::conn::http1::Builder::new();
        http1.timer(TokioTimer::new()).header_read_timeout(REFUSAL_READ_TIMEOUT).keep_alive(false);
        let connection = http1.serve_connection(TokioIo::new(stream), service);
        let _ = tokio::time::timeout(REFUSAL_READ_TIMEOUT * 2, connection).await;
        drop(refusal);
    });
}

fn too_many_connections(peer: SocketAddr, limit: usize) -> Response<ResponseBody> {
    let message = format!(
        "too many connections from {} at once (at most {limit} per client address); close some \
         and retry",
        peer.ip()
    );
    let mut response = ApiError::new(ErrorCode::RateLimited, message)
        .with_header(http::header::RETRY_AFTER, HeaderValue::from_static("1"))
        .into_response();
    response.headers_mut().insert(http::header::CONNECTION, HeaderValue::from_static("close"));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_address_holds_at_most_its_share() {
        let slots = AddressSlots::new(2);
        let one: IpAddr = "10.0.0.1".parse().unwrap();
        let held: Vec<_> = (0..2).map(|_| slots.take(one).expect("a slot")).collect();
        assert!(slots.take(one).is_none(), "the third connection is over the bound");
        assert!(slots.take("10.0.0.2".parse().unwrap()).is_some(), "another address has its own");
        drop(held);
        assert!(slots.take(one).is_some(), "closed connections give their slots back");
    }

    #[test]
    fn an_ipv6_host_counts_once_whatever_address_of_its_64_it_uses() {
        let slots = AddressSlots::new(1);
        let _held = slots.take("2001:db8:1:2::1".parse().unwrap()).unwrap();
        assert!(slots.take("2001:db8:1:2:ffff::9".parse().unwrap()).is_none());
        assert!(slots.take("2001:db8:1:3::1".parse().unwrap()).is_some());
        let _mapped = slots.take("::ffff:10.0.0.1".parse().unwrap()).unwrap();
        assert!(slots.take("10.0.0.1".parse().unwrap()).is_none(), "IPv4-mapped is IPv4");
    }

    #[test]
    fn no_bound_when_the_limit_is_zero() {
        let slots = AddressSlots::new(0);
        let one: IpAddr = "127.0.0.1".parse().unwrap();
        assert!((0..10_000).all(|_| matches!(slots.take(one), Some(None))));
    }
}
