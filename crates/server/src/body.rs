//! Request bodies with a deadline, a bound on how many bodies one address may be sending at
//! once, so a client that sends slowly (or not at all after its headers) cannot hold
//! connections and handlers for long, and a daemon-wide budget of body bytes being read and
//! handled at once, so many large bodies together cannot take the daemon's memory.

use std::future::Future as _;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use cairn_http::{BodyBusy, BodyTimeout};
use http_body::{Body, Frame, SizeHint};
use hyper::body::Incoming;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Sleep;

use crate::connections::SlotTable;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A request body that fails with [`BodyTimeout`] when it is not all there by its
/// deadline, and holds its address's slot until it is read or dropped. The deadline is armed
/// when the body is first read, so a request nobody reads the body of costs no timer. The
/// bytes it yields are charged to its [`Reservation`]; one that outgrows it and cannot grow
/// it fails with [`BodyBusy`].
pub struct GuardedBody {
    inner: Source,
    deadline: Option<Pin<Box<Sleep>>>,
    timeout: Duration,
    _slot: Option<OwnedSemaphorePermit>,
    reservation: Option<Arc<Reservation>>,
    read: u64,
}

/// Where a body's bytes come from.
enum Source {
    /// The connection.
    Incoming(Incoming),
    /// Read already (an idempotent write's body, read to fingerprint it): yielded once.
    Read(Option<Bytes>),
}

impl GuardedBody {
    pub(crate) fn new(
        inner: Incoming,
        timeout: Duration,
        slot: Option<OwnedSemaphorePermit>,
        reservation: Option<Arc<Reservation>>,
    ) -> GuardedBody {
        let inner = Source::Incoming(inner);
        GuardedBody { inner, deadline: None, timeout, _slot: slot, reservation, read: 0 }
    }

    /// A body read already: its bytes, at once.
    pub(crate) fn full(bytes: Bytes) -> GuardedBody {
        let inner = Source::Read(Some(bytes).filter(|bytes| !bytes.is_empty()));
        GuardedBody {
            inner,
            deadline: None,
            timeout: Duration::MAX,
            _slot: None,
            reservation: None,
            read: 0,
        }
    }

    /// Charges a frame of `length` bytes; false when the budget cannot cover it.
    fn charge(&mut self, length: usize) -> bool {
        self.read += length as u64;
        match &self.reservation {
            Some(reservation) => reservation.cover(self.read),
            None => true,
        }
    }
}

impl Body for GuardedBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        context: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let incoming = match &mut self.inner {
            Source::Incoming(incoming) => incoming,
            Source::Read(bytes) => {
                return Poll::Ready(bytes.take().map(|bytes| Ok(Frame::data(bytes))));
            }
        };
        if let Poll::Ready(frame) = Pin::new(incoming).poll_frame(context) {
            if let Some(Ok(frame)) = &frame
                && let Some(data) = frame.data_ref()
                && !self.charge(data.len())
            {
                return Poll::Ready(Some(Err(Box::new(BodyBusy))));
            }
            return Poll::Ready(frame.map(|frame| frame.map_err(BoxError::from)));
        }
        let timeout = self.timeout;
        let deadline = self.deadline.get_or_insert_with(|| Box::pin(tokio::time::sleep(timeout)));
        match deadline.as_mut().poll(context) {
            Poll::Ready(()) => Poll::Ready(Some(Err(Box::new(BodyTimeout(self.timeout))))),
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        match &self.inner {
            Source::Incoming(incoming) => incoming.is_end_stream(),
            Source::Read(bytes) => bytes.is_none(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.inner {
            Source::Incoming(incoming) => incoming.size_hint(),
            Source::Read(bytes) => {
                SizeHint::with_exact(bytes.as_ref().map_or(0, |bytes| bytes.len() as u64))
            }
        }
    }
}

/// How many requests each address may be sending a body for at once.
#[derive(Debug)]
pub(crate) struct BodySlots(SlotTable);

impl BodySlots {
    pub(crate) fn new(per_address: usize) -> BodySlots {
        BodySlots(SlotTable::new(per_address.max(1)))
    }

    /// A slot for one more body from `address`, waiting up to `wait` for one of its bodies
    /// to be read; `None` when they stay in use (slow senders hold them).
    pub(crate) async fn take(
        &self,
        address: IpAddr,
        wait: Duration,
    ) -> Option<OwnedSemaphorePermit> {
        let semaphore = self.0.semaphore(address);
        if let Ok(slot) = semaphore.clone().try_acquire_owned() {
            return Some(slot);
        }
        tokio::time::timeout(wait, semaphore.acquire_owned()).await.ok()?.ok()
    }
}

/// The daemon's budget of request-body bytes being read and handled at once: a request
/// with a body reserves its declared length (or [`UNDECLARED_RESERVE`] when it declares
/// none, growing as its bytes arrive) before it is read, and gives it back when its
/// handler has answered, after the body was parsed and used.
#[derive(Debug)]
pub(crate) struct BodyBudget {
    bytes: Arc<Semaphore>,
    total: u64,
}

/// What a body that declares no length (chunked) reserves at first.
pub(crate) const UNDECLARED_RESERVE: u64 = 64 * 1024;

/// Why a body got no reservation.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// The budget stayed spent for the whole wait.
    Busy,
    /// The body declares more than the whole budget.
    TooLarge(u64),
}

impl BodyBudget {
    /// A budget of `total` bytes (at most 4 GiB: a semaphore takes a `u32` at once).
    pub(crate) fn new(total: u64) -> BodyBudget {
        let total = total.clamp(1, u64::from(u32::MAX));
        BodyBudget { bytes: Arc::new(Semaphore::new(total as usize)), total }
    }

    /// Reserves room for a body that declares `declared` bytes (`None`: chunked), waiting
    /// at most `wait` for it to be free.
    pub(crate) async fn reserve(
        &self,
        declared: Option<u64>,
        wait: Duration,
    ) -> Result<Arc<Reservation>, Refusal> {
        let wanted = declared.unwrap_or(UNDECLARED_RESERVE).min(self.total);
        if declared.is_some_and(|declared| declared > self.total) {
            return Err(Refusal::TooLarge(self.total));
        }
        let permits = wanted.max(1) as u32;
        let permit = match self.bytes.clone().try_acquire_many_owned(permits) {
            Ok(permit) => permit,
            Err(_) => tokio::time::timeout(wait, self.bytes.clone().acquire_many_owned(permits))
                .await
                .map_err(|_| Refusal::Busy)?
                .expect("the budget's semaphore is never closed"),
        };
        Ok(Arc::new(Reservation { bytes: self.bytes.clone(), held: Mutex::new(permit) }))
    }
}

/// Bytes of the [`BodyBudget`] held for one request until it is dropped.
#[derive(Debug)]
pub(crate) struct Reservation {
    bytes: Arc<Semaphore>,
    held: Mutex<OwnedSemaphorePermit>,
}

impl Reservation {
    /// Makes the reservation cover `read` bytes, growing it without waiting; false when the
    /// budget has no room left.
    fn cover(&self, read: u64) -> bool {
        let mut held = self.held.lock().expect("never poisoned");
        let have = held.num_permits() as u64;
        if read <= have {
            return true;
        }
        // Grown in steps, so a chunked body does not take the lock for every frame.
        let more = (read - have).max(UNDECLARED_RESERVE);
        let Ok(more) = u32::try_from(more) else { return false };
        match self.bytes.clone().try_acquire_many_owned(more) {
            Ok(permit) => {
                held.merge(permit);
                true
            }
            Err(_) => false,
        }
    }
}

/// The most of a refused body read and dropped before the refusal is answered.
const DRAIN_LIMIT: u64 = 32 * 1024 * 1024;

/// Reads `body` to its end and drops it, frame by frame (nothing is kept), within `timeout`
/// and [`DRAIN_LIMIT`] bytes; true when it ended.
pub(crate) async fn drain(body: Incoming, timeout: Duration) -> bool {
    use http_body_util::BodyExt as _;
    let reading = async {
        let mut body = std::pin::pin!(body);
        let mut read = 0u64;
        while let Some(frame) = body.frame().await {
            let Ok(frame) = frame else { return false };
            read += frame.data_ref().map_or(0, |data| data.len() as u64);
            if read > DRAIN_LIMIT {
                return false;
            }
        }
        true
    };
    tokio::time::timeout(timeout, reading).await.unwrap_or(false)
}
