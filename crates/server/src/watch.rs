//! The connections being served: the signal that finishes them at shutdown, and the guard
//! that closes the ones that stall.
//!
//! The guard: a server-wide reaper looks at every connection once every quarter of the
//! header timeout. It closes an HTTP/1 connection that has written nothing for the timeout
//! while none of its requests was being handled or streamed. That is a client whose request headers
//! never end (the slow-loris attack: a request head always gets an answer, and an answer is
//! written), a kept-alive connection that sends nothing more, and a client that stops
//! reading its answers. It closes a stalled connection between the timeout and half as long
//! again after its last progress, never before. A request costs the guard one counter bump
//! when its answer is written, and nothing else: hyper's own header timer reads the clock,
//! allocates a sleep and takes its lock for every request. Request bodies have their own
//! deadline (`body::GuardedBody`).
//!
//! A connection whose first bytes may be HTTP/2's preface is watched by its requests, not
//! its writes (HTTP/2 writes pings and settings of its own): it is closed when no request
//! arrived within the header timeout of its start (a client that sent `P` and nothing
//! more), and asked to finish (GOAWAY) once no request has been in flight for the HTTP/2
//! idle timeout.
//!
//! Shutdown sets each connection's signal and wakes it; a connection's task looks at the
//! signal each time it runs, and registers its waker only when that changes, so it polls
//! nothing else between requests.

use std::collections::HashMap;
use std::future::Future;
use std::io;
use std::pin::{Pin, pin};
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

/// What a connection's task and the server share about it.
#[derive(Default)]
pub(crate) struct Watched {
    /// Successful writes to the connection's socket.
    writes: AtomicU64,
    /// Requests being handled, or whose answers are still streaming.
    busy: AtomicUsize,
    /// [`SERVE`], [`FINISH`] or [`CLOSE`].
    signal: AtomicU8,
    /// The connection task's waker, for the signal.
    waker: Mutex<Option<Waker>>,
    /// Requests begun, for HTTP/2-capable connections' idleness.
    requests: AtomicU64,
    /// Watched by its requests (HTTP/2-capable), not its writes.
    by_requests: AtomicBool,
}

/// Go on serving.
const SERVE: u8 = 0;
/// Answer what is in flight, then close.
const FINISH: u8 = 1;
/// Close now: the connection stalled.
const CLOSE: u8 = 2;

impl Watched {
    fn signal(&self, signal: u8) {
        self.signal.fetch_max(signal, Ordering::AcqRel);
        if let Some(waker) = self.waker.lock().expect("never poisoned").as_ref() {
            waker.wake_by_ref();
        }
    }

    /// Watches this connection by its requests (see the module's notes): for connections
    /// that may speak HTTP/2.
    pub(crate) fn watch_requests(&self) {
        self.by_requests.store(true, Ordering::Relaxed);
    }

    /// Marks a request busy until the guard is dropped: the reaper leaves the connection
    /// alone meanwhile, however long it writes nothing.
    pub(crate) fn busy(self: &Arc<Watched>) -> Busy {
        self.busy.fetch_add(1, Ordering::Relaxed);
        Busy(self.clone())
    }

    /// Counts a request that arrived, whichever way it is answered (the health fast path
    /// included): what an HTTP/2-capable connection's idleness is measured by.
    pub(crate) fn begun(&self) {
        self.requests.fetch_add(1, Ordering::Relaxed);
    }
}

/// A request of a connection being handled or streamed (see [`Watched::busy`]).
pub(crate) struct Busy(Arc<Watched>);

impl Drop for Busy {
    fn drop(&mut self) {
        // The reaper reads this after a later tick; counting a write marks the progress
        // the end of the request is.
        self.0.writes.fetch_add(1, Ordering::Relaxed);
        self.0.busy.fetch_sub(1, Ordering::Relaxed);
    }
}

/// The connections being served, each with a [`Watched`] of its own.
#[derive(Default)]
pub(crate) struct OpenConnections {
    connections: Mutex<HashMap<u64, Entry>>,
    next: AtomicU64,
}

/// The reaper's view of one connection.
struct Entry {
    watched: Arc<Watched>,
    /// Its writes (or requests, when watched by them) when last looked at, and since when
    /// they have not changed.
    progress_seen: u64,
    quiet_since: Instant,
}

/// How long connections may stall before the reaper acts.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Timeouts {
    /// An HTTP/1 connection's silence; any connection's wait for its first request.
    pub(crate) header: Duration,
    /// An HTTP/2-capable connection's time with no request in flight, once it had one.
    pub(crate) http2_idle: Duration,
}

/// One connection's place in [`OpenConnections`], left when dropped.
pub(crate) struct Registered {
    open: Arc<OpenConnections>,
    id: u64,
    pub(crate) watched: Arc<Watched>,
}

impl OpenConnections {
    /// Registers a connection: the reaper closes it if it stalls, unless it is unguarded.
    pub(crate) fn register(self: &Arc<OpenConnections>) -> Registered {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let watched = Arc::new(Watched::default());
        let entry =
            Entry { watched: watched.clone(), progress_seen: 0, quiet_since: Instant::now() };
        self.connections.lock().expect("never poisoned").insert(id, entry);
        Registered { open: self.clone(), id, watched }
    }

    /// Tells every open connection to finish: it answers what it is answering and closes.
    pub(crate) fn finish_all(&self) {
        for entry in self.connections.lock().expect("never poisoned").values() {
            entry.watched.signal(FINISH);
        }
    }

    /// One look at every connection at `now`: the ones that stalled are told to close (or,
    /// idle HTTP/2 ones, to finish). Answers how many were told.
    fn reap(&self, now: Instant, timeouts: Timeouts) -> usize {
        let mut told = 0;
        let mut connections = self.connections.lock().expect("never poisoned");
        for entry in connections.values_mut() {
            let watched = &entry.watched;
            let by_requests = watched.by_requests.load(Ordering::Relaxed);
            let progress = match by_requests {
                true => watched.requests.load(Ordering::Relaxed),
                false => watched.writes.load(Ordering::Relaxed),
            };
            if progress != entry.progress_seen || watched.busy.load(Ordering::Relaxed) > 0 {
                entry.progress_seen = progress;
                entry.quiet_since = now;
                continue;
            }
            let quiet = now.saturating_duration_since(entry.quiet_since);
            let (limit, signal) = match (by_requests, progress) {
                // No request yet: whatever it sent, its first request head is late.
                (true, 0) | (false, _) => (timeouts.header, CLOSE),
                (true, _) => (timeouts.http2_idle, FINISH),
            };
            if quiet >= limit && watched.signal.load(Ordering::Relaxed) < signal {
                watched.signal(signal);
                told += 1;
            }
        }
        told
    }

    /// Closes stalled connections (see the module's notes) until its task is aborted.
    pub(crate) async fn reaper(self: Arc<OpenConnections>, timeouts: Timeouts) {
        let tick = (timeouts.header.min(timeouts.http2_idle) / 4).max(Duration::from_millis(1));
        let mut ticks = tokio::time::interval(tick);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticks.tick().await;
            let told = self.reap(Instant::now(), timeouts);
            if told > 0 {
                tracing::debug!(told, ?timeouts, "closed connections that stalled");
            }
        }
    }
}

impl Drop for Registered {
    fn drop(&mut self) {
        if let Ok(mut connections) = self.open.connections.lock() {
            connections.remove(&self.id);
        }
    }
}

/// Drives `connection` to its end: once its signal says finish, it is asked to shut down
/// gracefully (answer the request in flight, then close) and driven on until it has; once
/// it says close, it is dropped, which closes its socket.
pub(crate) async fn serve_watched<C, E>(
    connection: C,
    watched: &Watched,
    graceful_shutdown: impl FnOnce(Pin<&mut C>),
) -> Result<(), E>
where
    C: Future<Output = Result<(), E>>,
{
    let mut connection = pin!(connection);
    let mut graceful_shutdown = Some(graceful_shutdown);
    let mut registered: Option<Waker> = None;
    std::future::poll_fn(move |context: &mut Context<'_>| {
        // Registered before the signal is read: a signal set after the read wakes this one.
        if !registered.as_ref().is_some_and(|waker| waker.will_wake(context.waker())) {
            let waker = context.waker().clone();
            *watched.waker.lock().expect("never poisoned") = Some(waker.clone());
            registered = Some(waker);
        }
        match watched.signal.load(Ordering::Acquire) {
            SERVE => {}
            FINISH => {
                if let Some(graceful_shutdown) = graceful_shutdown.take() {
                    graceful_shutdown(connection.as_mut());
                }
            }
            _ => return Poll::Ready(Ok(())),
        }
        connection.as_mut().poll(context)
    })
    .await
}

/// A connection's socket, counting its writes for the reaper.
pub(crate) struct WatchedIo {
    stream: TcpStream,
    watched: Arc<Watched>,
}

impl WatchedIo {
    pub(crate) fn new(stream: TcpStream, watched: Arc<Watched>) -> WatchedIo {
        WatchedIo { stream, watched }
    }

    fn counted(&self, written: Poll<io::Result<usize>>) -> Poll<io::Result<usize>> {
        if let Poll::Ready(Ok(1..)) = written {
            self.watched.writes.fetch_add(1, Ordering::Relaxed);
        }
        written
    }
}

impl AsyncRead for WatchedIo {
    fn poll_read(
        mut self: Pin<&mut Self>,
        context: &mut Context<'_>,
        buffer: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_read(context, buffer)
    }
}

impl AsyncWrite for WatchedIo {
    fn poll_write(
        mut self: Pin<&mut Self>,
        context: &mut Context<'_>,
        buffer: &[u8],
    ) -> Poll<io::Result<usize>> {
        let written = Pin::new(&mut self.stream).poll_write(context, buffer);
        self.counted(written)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        context: &mut Context<'_>,
        buffers: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let written = Pin::new(&mut self.stream).poll_write_vectored(context, buffers);
        self.counted(written)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(context)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(context)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TIMEOUT: Duration = Duration::from_secs(10);
    const TIMEOUTS: Timeouts = Timeouts { header: TIMEOUT, http2_idle: Duration::from_secs(100) };

    #[test]
    fn a_quiet_connection_closes_after_the_timeout_and_never_before() {
        let open = Arc::new(OpenConnections::default());
        let connection = open.register();
        let start = Instant::now();
        assert_eq!(open.reap(start + TIMEOUT / 2, TIMEOUTS), 0);
        assert_eq!(connection.watched.signal.load(Ordering::Relaxed), SERVE);
        // Registration started its quiet time.
        assert_eq!(open.reap(start + TIMEOUT + Duration::from_millis(1), TIMEOUTS), 1);
        assert_eq!(connection.watched.signal.load(Ordering::Relaxed), CLOSE);
    }

    #[test]
    fn writes_and_busy_requests_keep_a_connection_open() {
        let open = Arc::new(OpenConnections::default());
        let connection = open.register();
        let http2 = open.register();
        http2.watched.watch_requests();
        http2.watched.begun();
        let start = Instant::now();
        // An answer written: the quiet time starts again at the look that saw it.
        connection.watched.writes.fetch_add(1, Ordering::Relaxed);
        assert_eq!(open.reap(start + TIMEOUT * 3 / 4, TIMEOUTS), 0);
        assert_eq!(open.reap(start + TIMEOUT * 3 / 2, TIMEOUTS), 0);
        // A request being handled keeps it open however long it is quiet.
        let busy = connection.watched.busy();
        assert_eq!(open.reap(start + TIMEOUT * 5, TIMEOUTS), 0);
        drop(busy);
        assert_eq!(open.reap(start + TIMEOUT * 6 - Duration::from_millis(1), TIMEOUTS), 0);
        assert_eq!(
            open.reap(start + TIMEOUT * 6, TIMEOUTS),
            0,
            "the end of the request is progress"
        );
        assert_eq!(open.reap(start + TIMEOUT * 7, TIMEOUTS), 1);
        // The HTTP/2 one, which had a request and writes nothing, is idle for less than its
        // own timeout.
        assert_eq!(http2.watched.signal.load(Ordering::Relaxed), SERVE);
        // A connection that left is forgotten; the HTTP/2 one is asked to finish once idle
        // for its own timeout.
        drop(connection);
        assert_eq!(open.reap(start + TIMEOUT * 20, TIMEOUTS), 1);
        assert_eq!(http2.watched.signal.load(Ordering::Relaxed), FINISH);
        assert_eq!(open.reap(start + TIMEOUT * 21, TIMEOUTS), 0, "told once");
    }

    #[test]
    fn an_http2_capable_connection_without_a_request_closes_after_the_header_timeout() {
        let open = Arc::new(OpenConnections::default());
        let connection = open.register();
        connection.watched.watch_requests();
        let start = Instant::now();
        // Its own writes (settings, pings) are not progress.
        connection.watched.writes.fetch_add(3, Ordering::Relaxed);
        assert_eq!(open.reap(start + TIMEOUT / 2, TIMEOUTS), 0);
        assert_eq!(open.reap(start + TIMEOUT + Duration::from_millis(1), TIMEOUTS), 1);
        assert_eq!(connection.watched.signal.load(Ordering::Relaxed), CLOSE);
    }

    #[tokio::test]
    async fn the_signal_finishes_or_closes_a_served_connection() {
        let open = Arc::new(OpenConnections::default());
        // A connection that ends only once asked to shut down gracefully.
        let connection = open.register();
        let (asked, mut told) = tokio::sync::watch::channel(false);
        let served = tokio::spawn({
            let watched = connection.watched.clone();
            async move {
                let ends = async move {
                    let _ = told.wait_for(|asked| *asked).await;
                    Ok::<_, ()>(())
                };
                serve_watched(ends, &watched, |_| {
                    asked.send_replace(true);
                })
                .await
            }
        });
        tokio::task::yield_now().await;
        open.finish_all();
        let ended = tokio::time::timeout(Duration::from_secs(5), served).await;
        assert_eq!(ended.expect("finished").unwrap(), Ok(()));

        // One that never ends by itself is dropped when told to close.
        let stuck = open.register();
        let served = tokio::spawn({
            let watched = stuck.watched.clone();
            async move {
                serve_watched(std::future::pending::<Result<(), ()>>(), &watched, |_| {}).await
            }
        });
        tokio::task::yield_now().await;
        stuck.watched.signal(CLOSE);
        let ended = tokio::time::timeout(Duration::from_secs(5), served).await;
        assert_eq!(ended.expect("closed").unwrap(), Ok(()));
    }
}
