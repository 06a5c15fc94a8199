//! Rate limits per principal and operation class, with governor's GCRA limiter.

use std::num::NonZeroU32;

use cairn_types::ErrorCode;
use governor::clock::{Clock, DefaultClock};
use governor::middleware::StateInformationMiddleware;
use governor::state::keyed::DefaultKeyedStateStore;
use governor::{Quota, RateLimiter};
use http::{HeaderName, HeaderValue};

use cairn_http::ApiError;

/// Requests per minute for each class; 0 turns that class's limit off.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateLimits {
    pub read: u32,
    pub write: u32,
    pub context: u32,
    /// The memories of batches and imports, in hundreds a minute: apart from `write`, so a
    /// large import does not spend the writes an agent's hooks need.
    pub bulk: u32,
    /// Visitors started: conversations created and conversation tokens minted (what a chat
    /// widget's server does for each new visitor), apart from `write`, so one widget server
    /// can start several hundred visitors a minute.
    pub start: u32,
}

impl Default for RateLimits {
    fn default() -> RateLimits {
        RateLimits { read: 1000, write: 100, context: 200, bulk: 1000, start: 1000 }
    }
}

/// Which budget an operation spends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RateClass {
    Read,
    Write,
    /// Context packs and search.
    Context,
    /// The memories of a batch or an import, one unit per 100 (the request itself spends
    /// `Write`).
    Bulk,
    /// Starting a visitor: creating a conversation, minting or revoking a conversation token.
    Start,
}

impl RateClass {
    /// The class's name, as `--rate-limit-<name>` and the metrics' `class` label spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            RateClass::Read => "read",
            RateClass::Write => "write",
            RateClass::Context => "context",
            RateClass::Bulk => "bulk",
            RateClass::Start => "start",
        }
    }
}

/// Counts a refusal of `class` (`cairn_rate_limited_total`).
fn refused(class: RateClass) {
    metrics::counter!("cairn_rate_limited_total", "class" => class.as_str()).increment(1);
}

type Keyed =
    RateLimiter<String, DefaultKeyedStateStore<String>, DefaultClock, StateInformationMiddleware>;

struct ClassLimiter {
    per_minute: u32,
    limiter: Keyed,
}

const RATELIMIT_LIMIT: HeaderName = HeaderName::from_static("ratelimit-limit");
const RATELIMIT_REMAINING: HeaderName = HeaderName::from_static("ratelimit-remaining");
const RATELIMIT_RESET: HeaderName = HeaderName::from_static("ratelimit-reset");

/// The rate-limit headers for one response.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RateState {
    limit: u32,
    remaining: u32,
    reset_seconds: u64,
}

pub(crate) struct Limiter {
    read: Option<ClassLimiter>,
    write: Option<ClassLimiter>,
    context: Option<ClassLimiter>,
    bulk: Option<ClassLimiter>,
    start: Option<ClassLimiter>,
}

/// Forgotten principals' state is dropped every this many checks (of one thread).
const CLEANUP_EVERY: u64 = 10_000;

thread_local! {
    static CHECKS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

impl Limiter {
    pub(crate) fn new(limits: RateLimits) -> Limiter {
        let class = |per_minute: u32| {
            NonZeroU32::new(per_minute).map(|rate| ClassLimiter {
                per_minute,
                limiter: RateLimiter::keyed(Quota::per_minute(rate))
                    .with_middleware::<StateInformationMiddleware>(),
            })
        };
        Limiter {
            read: class(limits.read),
            write: class(limits.write),
            context: class(limits.context),
            bulk: class(limits.bulk),
            start: class(limits.start),
        }
    }

    /// Spends one request of `principal` in `class`: the headers to send, or a 429.
    /// (`&String`: the limiter's map is keyed by `String`, and a `&str` would cost a copy
    /// of the key on every request.)
    #[allow(clippy::ptr_arg)]
    pub(crate) fn check(
        &self,
        class: RateClass,
        principal: &String,
    ) -> Result<Option<RateState>, ApiError> {
        self.check_n(class, principal, NonZeroU32::MIN)
    }

    /// Spends `requests` requests of `principal` in `class` at once (a batch), or none.
    #[allow(clippy::ptr_arg)]
    pub(crate) fn check_n(
        &self,
        class: RateClass,
        principal: &String,
        requests: NonZeroU32,
    ) -> Result<Option<RateState>, ApiError> {
        let Some(class_limiter) = (match class {
            RateClass::Read => &self.read,
            RateClass::Write => &self.write,
            RateClass::Context => &self.context,
            RateClass::Bulk => &self.bulk,
            RateClass::Start => &self.start,
        }) else {
            return Ok(None);
        };
        // Counted per thread: one counter every request of every connection bumped was a
        // cache line the cores took from each other on each request.
        let checks = CHECKS.with(|checks| {
            checks.set(checks.get().wrapping_add(1));
            checks.get()
        });
        if checks.is_multiple_of(CLEANUP_EVERY) {
            for limiter in [&self.read, &self.write, &self.context, &self.bulk, &self.start]
                .into_iter()
                .flatten()
            {
                limiter.limiter.retain_recent();
            }
        }
        let limit = class_limiter.per_minute;
        let interval = 60.0 / f64::from(limit);
        let refused_state = RateState {
            limit,
            remaining: 0,
            reset_seconds: (f64::from(limit) * interval).ceil() as u64,
        };
        let checked = match class_limiter.limiter.check_key_n(principal, requests) {
            Ok(checked) => checked,
            Err(_) => {
                refused(class);
                let message = format!(
                    "this request counts as {requests} requests of its class, over the rate \
                     limit of {limit} a minute; send smaller batches"
                );
                // Never enough on its own; smaller requests may go once the budget is whole.
                let error = ApiError::new(ErrorCode::RateLimited, message).with_header(
                    http::header::RETRY_AFTER,
                    HeaderValue::from(refused_state.reset_seconds.max(1)),
                );
                return Err(refused_state.apply_to_error(error));
            }
        };
        match checked {
            Ok(snapshot) => {
                let remaining = snapshot.remaining_burst_capacity();
                let reset_seconds = (f64::from(limit - remaining) * interval).ceil() as u64;
                Ok(Some(RateState { limit, remaining, reset_seconds }))
            }
            Err(not_until) => {
                refused(class);
                let wait = not_until.wait_time_from(DefaultClock::default().now());
                let retry_after = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
                let message = format!(
                    "rate limit of {limit} requests a minute reached for this class of operation; retry in {retry_after} s"
                );
                let error = ApiError::new(ErrorCode::RateLimited, message)
                    .with_header(http::header::RETRY_AFTER, HeaderValue::from(retry_after.max(1)));
                Err(refused_state.apply_to_error(error))
            }
        }
    }
}

impl RateState {
    /// The three headers' values are written into one buffer (one allocation, where a
    /// `HeaderValue` made from each number makes one each), which they share.
    pub(crate) fn headers(self) -> [(HeaderName, HeaderValue); 3] {
        let mut numbers = itoa::Buffer::new();
        let mut text = bytes::BytesMut::with_capacity(3 * 20);
        let mut ends = [0; 3];
        for (end, number) in ends.iter_mut().zip([
            u64::from(self.limit),
            u64::from(self.remaining),
            self.reset_seconds,
        ]) {
            text.extend_from_slice(numbers.format(number).as_bytes());
            *end = text.len();
        }
        let text = text.freeze();
        let value = |start: usize, end: usize| {
            HeaderValue::from_maybe_shared(text.slice(start..end))
                .expect("decimal digits are a valid header value")
        };
        [
            (RATELIMIT_LIMIT, value(0, ends[0])),
            (RATELIMIT_REMAINING, value(ends[0], ends[1])),
            (RATELIMIT_RESET, value(ends[1], ends[2])),
        ]
    }

    fn apply_to_error(self, mut error: ApiError) -> ApiError {
        for (name, value) in self.headers() {
            error = error.with_header(name, value);
        }
        error
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_count_down_per_principal_and_class() {
        let limiter = Limiter::new(RateLimits { read: 3, write: 0, context: 5, bulk: 0, start: 0 });
        let first = limiter.check(RateClass::Read, &"key:a".to_owned()).unwrap().unwrap();
        assert_eq!((first.limit, first.remaining), (3, 2));
        let headers = first.headers().map(|(name, value)| format!("{name}: {value:?}"));
        assert_eq!(
            headers,
            [
                "ratelimit-limit: \"3\"",
                "ratelimit-remaining: \"2\"",
                format!("ratelimit-reset: \"{}\"", first.reset_seconds).as_str()
            ]
        );
        limiter.check(RateClass::Read, &"key:a".to_owned()).unwrap();
        limiter.check(RateClass::Read, &"key:a".to_owned()).unwrap();
        let refused = limiter.check(RateClass::Read, &"key:a".to_owned()).unwrap_err();
        assert_eq!(refused.code(), ErrorCode::RateLimited);
        assert_eq!(
            limiter.check(RateClass::Read, &"key:b".to_owned()).unwrap().unwrap().remaining,
            2,
            "principals are apart"
        );
        assert_eq!(
            limiter.check(RateClass::Context, &"key:a".to_owned()).unwrap().unwrap().remaining,
            4,
            "classes are apart"
        );
        assert!(
            limiter.check(RateClass::Write, &"key:a".to_owned()).unwrap().is_none(),
            "0 turns a class off"
        );
    }
}
