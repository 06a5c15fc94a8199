//! hyper's timer for one HTTP/1 connection: the slow-loris guard (the request headers'
//! deadline) re-arms one tokio timer for every request instead of building a new one.
//!
//! hyper asks for a new sleep each time it starts reading a request's headers and drops it
//! once they are in. With `TokioTimer` that is an allocation, an insertion into the
//! runtime's timer wheel under its lock when first polled, and a removal under the same lock
//! when dropped: for every request, on a lock every connection shares. Here the connection
//! keeps its tokio sleep between requests, and moves its deadline only when the one asked
//! for is later than it by more than [`SLACK`] (the deadline is set `SLACK` late, so it is
//! never early): a busy connection moves it once every `SLACK`, and moving a registered
//! deadline later is one atomic update (tokio moves the entry in its wheel only when the old
//! deadline comes), so a keep-alive connection's requests touch no shared lock for their
//! deadline. The guard is the same, give or take `SLACK`: hyper polls this sleep while it
//! waits for headers and closes the connection when it fires.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use hyper::rt::{Sleep, Timer};

type Spare = Arc<Mutex<Option<Pin<Box<tokio::time::Sleep>>>>>;

/// One connection's timer; give each connection its own (its sleeps are reused in turn).
#[derive(Debug, Default, Clone)]
pub(crate) struct ConnectionTimer {
    /// The tokio sleep of the connection's last deadline, once hyper has dropped it.
    spare: Spare,
}

/// A sleep hyper holds; it gives its tokio sleep back to the connection when dropped.
struct Rearmed {
    sleep: Option<Pin<Box<tokio::time::Sleep>>>,
    spare: Spare,
}

/// How much later than hyper asks a deadline may come: the slow-loris guard closes a
/// connection between its timeout and its timeout plus this (never before the timeout).
pub(crate) const SLACK: Duration = Duration::from_millis(500);

fn within_slack(set: Instant, asked: Instant) -> bool {
    set >= asked && set <= asked + SLACK
}

impl Timer for ConnectionTimer {
    fn sleep(&self, duration: Duration) -> Pin<Box<dyn Sleep>> {
        self.sleep_until(self.now() + duration)
    }

    fn sleep_until(&self, deadline: Instant) -> Pin<Box<dyn Sleep>> {
        let spare = self.spare.lock().expect("the spare sleep is never poisoned").take();
        let sleep = match spare {
            // A deadline set up to `SLACK` later than asked stays as it is: a busy
            // connection's deadline moves once a `SLACK`, not once a request.
            Some(sleep) if within_slack(sleep.deadline().into_std(), deadline) => sleep,
            Some(mut sleep) => {
                sleep.as_mut().reset((deadline + SLACK).into());
                sleep
            }
            None => Box::pin(tokio::time::sleep_until((deadline + SLACK).into())),
        };
        Box::pin(Rearmed { sleep: Some(sleep), spare: self.spare.clone() })
    }

    fn reset(&self, sleep: &mut Pin<Box<dyn Sleep>>, new_deadline: Instant) {
        if let Some(mut rearmed) = sleep.as_mut().downcast_mut_pin::<Rearmed>()
            && let Some(sleep) = rearmed.sleep.as_mut()
            && !within_slack(sleep.deadline().into_std(), new_deadline)
        {
            sleep.as_mut().reset((new_deadline + SLACK).into());
        }
    }

    fn now(&self) -> Instant {
        tokio::time::Instant::now().into()
    }
}

impl Future for Rearmed {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<()> {
        match self.sleep.as_mut() {
            Some(sleep) => sleep.as_mut().poll(context),
            None => Poll::Ready(()),
        }
    }
}

impl Sleep for Rearmed {}

impl Drop for Rearmed {
    fn drop(&mut self) {
        if let (Some(sleep), Ok(mut spare)) = (self.sleep.take(), self.spare.lock()) {
            *spare = Some(sleep);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_reused_sleep_fires_at_its_new_deadline() {
        let timer = ConnectionTimer::default();
        let first = timer.sleep(Duration::from_secs(3600));
        drop(first);
        let started = Instant::now();
        timer.sleep(Duration::from_millis(30)).await;
        let waited = started.elapsed();
        assert!(waited >= Duration::from_millis(30), "{waited:?}");
        assert!(waited < Duration::from_secs(5), "the old deadline was kept: {waited:?}");
        // Fired sleeps are reused too.
        let started = Instant::now();
        timer.sleep(Duration::from_millis(20)).await;
        assert!(started.elapsed() >= Duration::from_millis(20));
        let mut sleep = timer.sleep(Duration::from_secs(3600));
        timer.reset(&mut sleep, timer.now() + Duration::from_millis(10));
        tokio::time::timeout(Duration::from_secs(5), sleep).await.expect("reset to 10 ms");
        // A later deadline within the slack keeps the one set; never an earlier one.
        let started = Instant::now();
        drop(timer.sleep(Duration::from_millis(200)));
        timer.sleep(Duration::from_millis(150)).await;
        let waited = started.elapsed();
        assert!(waited >= Duration::from_millis(150), "{waited:?}");
        assert!(waited < Duration::from_millis(200) + SLACK * 4, "{waited:?}");
    }
}
