//! Request bodies with a deadline, and a bound on how many bodies one address may be
//! sending at once, so a client that sends slowly (or not at all after its headers) cannot
//! hold connections and handlers for long.

use std::collections::HashMap;
use std::future::Future as _;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use cairn_http::BodyTimeout;
use http_body::{Body, Frame, SizeHint};
use hyper::body::Incoming;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Sleep;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A request body that fails with [`BodyTimeout`] when it is not all there by its
/// deadline, and holds its address's slot until it is read or dropped. The deadline is armed
/// when the body is first read, so a request nobody reads the body of costs no timer.
pub struct GuardedBody {
    inner: Incoming,
    deadline: Option<Pin<Box<Sleep>>>,
    timeout: Duration,
    _slot: Option<OwnedSemaphorePermit>,
}

impl GuardedBody {
    pub(crate) fn new(
        inner: Incoming,
        timeout: Duration,
        slot: Option<OwnedSemaphorePermit>,
    ) -> GuardedBody {
        GuardedBody { inner, deadline: None, timeout, _slot: slot }
    }
}

impl Body for GuardedBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        context: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        if let Poll::Ready(frame) = Pin::new(&mut self.inner).poll_frame(context) {
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
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// How many requests each address may be sending a body for at once.
#[derive(Debug)]
pub(crate) struct BodySlots {
    per_address: usize,
    slots: Mutex<HashMap<IpAddr, Arc<Semaphore>>>,
}

impl BodySlots {
    pub(crate) fn new(per_address: usize) -> BodySlots {
        BodySlots { per_address: per_address.max(1), slots: Mutex::default() }
    }

    /// A slot for one more body from `address`, or `None` when it has them all in use.
    pub(crate) fn take(&self, address: IpAddr) -> Option<OwnedSemaphorePermit> {
        let semaphore = {
            let mut slots = self.slots.lock().expect("the slot table is never poisoned");
            if slots.len() > 4096 {
                // Forget addresses with nothing in flight.
                let full = self.per_address;
                slots.retain(|_, semaphore| semaphore.available_permits() < full);
            }
            slots
                .entry(address)
                .or_insert_with(|| Arc::new(Semaphore::new(self.per_address)))
                .clone()
        };
        semaphore.try_acquire_owned().ok()
    }
}
