//! `Idempotency-Key` on every write of both APIs: the first request with a key runs; the
//! same key with the same request (method, path, query, body) within a day gets the first
//! answer again (`Idempotent-Replayed: true`) and runs nothing; another request under the
//! key is `409 IDEMPOTENCY_KEY_REUSED`; a retry while the first still runs is `409
//! IDEMPOTENCY_KEY_IN_USE`. Keys belong to the caller (its principal, as the memory API's
//! authentication finds it) and live in the store, so they hold across daemons sharing a
//! PostgreSQL database.

use std::sync::atomic::{AtomicI64, Ordering};

use bytes::Bytes;
use cairn_api::{ApiError, MAX_BATCH_BODY_BYTES, ResponseBody};
use cairn_store::{Claim, StoredAnswer};
use cairn_types::{ErrorCode, Timestamp};
use http::{HeaderName, HeaderValue, Method, Request, Response, StatusCode};
use http_body_util::{BodyExt as _, Full};
use sha2::Digest as _;

use crate::Services;
use crate::body::GuardedBody;

pub(crate) const IDEMPOTENCY_KEY: HeaderName = HeaderName::from_static("idempotency-key");
const REPLAYED: HeaderName = HeaderName::from_static("idempotent-replayed");

/// The largest answer kept for a key; a larger one is sent, and its key given up (a retry
/// runs again). Write answers are far smaller (a batch's 1,000 ids: some 40 KiB).
const MAX_KEPT_ANSWER: usize = 1024 * 1024;

/// When lapsed keys were last purged (ms since the epoch), so that one request an hour
/// purges them.
static PURGED_AT: AtomicI64 = AtomicI64::new(0);
const PURGE_EVERY_MILLIS: i64 = 60 * 60 * 1000;

/// Whether `request` is a write with an idempotency key: the requests [`handle`] takes.
pub(crate) fn applies<B>(request: &Request<B>) -> bool {
    matches!(*request.method(), Method::POST | Method::PATCH | Method::DELETE | Method::PUT)
        && request.headers().contains_key(IDEMPOTENCY_KEY)
}

/// A key of sane shape: 1 to 255 visible ASCII characters.
fn key_of(value: &HeaderValue) -> Result<&str, ApiError> {
    value
        .to_str()
        .ok()
        .filter(|key| (1..=255).contains(&key.len()) && key.bytes().all(|b| b.is_ascii_graphic()))
        .ok_or_else(|| {
            ApiError::validation(
                "Idempotency-Key: give 1 to 255 visible ASCII characters, such as a UUID",
            )
        })
}

/// Runs `request` (a write with an `Idempotency-Key`) through `run` at most once per key.
pub(crate) async fn handle<F, Fut>(
    services: &Services,
    request: Request<GuardedBody>,
    run: F,
) -> Response<ResponseBody>
where
    F: FnOnce(Request<GuardedBody>) -> Fut,
    Fut: Future<Output = Response<ResponseBody>>,
{
    let (parts, body) = request.into_parts();
    let key = match parts.headers.get(IDEMPOTENCY_KEY).map(key_of) {
        Some(Ok(key)) => key.to_owned(),
        Some(Err(error)) => return error.into_response(),
        None => return run(Request::from_parts(parts, body)).await,
    };
    // Keys are the caller's: a caller the API would refuse gets its refusal, and keeps none.
    let principal = match services.memory.authenticate(&parts).await {
        Ok(principal) => principal,
        Err(response) => return response,
    };
    let bytes = match cairn_http::read_body(&parts.headers, body, MAX_BATCH_BODY_BYTES).await {
        Ok(bytes) => bytes,
        Err(error) => return error.into_response(),
    };
    let fingerprint = fingerprint(&parts.method, &parts.uri, &bytes);
    let store = services.memory.engine().store().clone();
    let now = Timestamp::now();
    purge_now_and_then(&store, now);
    let claim = store.claim_idempotency(&principal.id, &key, &fingerprint, now).await;
    match claim {
        Ok(Claim::Claimed) => {}
        Ok(Claim::Replay(answer)) => return replay(answer),
        Ok(Claim::Running) => {
            return ApiError::new(
                ErrorCode::IdempotencyKeyInUse,
                "a request with this Idempotency-Key is still running; retry shortly for its answer",
            )
            .with_header(http::header::RETRY_AFTER, HeaderValue::from_static("1"))
            .into_response();
        }
        Ok(Claim::Reused) => {
            return ApiError::new(
                ErrorCode::IdempotencyKeyReused,
                "this Idempotency-Key was sent with another request (method, path or body); \
                 use a new key for a new request",
            )
            .into_response();
        }
        Err(error) => {
            tracing::error!(%error, "cannot claim an idempotency key");
            return ApiError::new(
                ErrorCode::Unavailable,
                "the request's Idempotency-Key cannot be checked now; retry shortly",
            )
            .with_header(http::header::RETRY_AFTER, HeaderValue::from_static("1"))
            .into_response();
        }
    }
    let request = Request::from_parts(parts, GuardedBody::full(bytes));
    let response = run(request).await;
    let (response, answer) = keep(response).await;
    let kept = match answer {
        Some(answer) => store.complete_idempotency(&principal.id, &key, &answer).await,
        None => store.release_idempotency(&principal.id, &key).await,
    };
    if let Err(error) = kept {
        // The answer goes out; a retry finds the key running until its lease ends.
        tracing::warn!(%error, "cannot keep an idempotency key's answer");
    }
    response
}

/// What identifies a request under a key: its method, path, query and body.
fn fingerprint(method: &Method, uri: &http::Uri, body: &[u8]) -> String {
    let mut hash = sha2::Sha256::new();
    hash.update(method.as_str().as_bytes());
    hash.update(b" ");
    hash.update(uri.path_and_query().map_or(uri.path(), |path| path.as_str()).as_bytes());
    hash.update(b"\n");
    hash.update(body);
    hex::encode(hash.finalize())
}

/// The response, and the answer to keep for its key: `None` for answers a retry may change
/// (a 5xx, a refusal of the caller, a rate limit, a timeout, a conflict of the moment) or
/// that are too large or streamed, whose key is given up so that a retry runs again.
async fn keep(response: Response<ResponseBody>) -> (Response<ResponseBody>, Option<StoredAnswer>) {
    let status = response.status();
    let passing =
        matches!(status.as_u16(), 401 | 403 | 408 | 409 | 429) || status.is_server_error();
    let size = http_body::Body::size_hint(response.body()).exact();
    if passing
        || status == StatusCode::SWITCHING_PROTOCOLS
        || size.is_none_or(|size| size > MAX_KEPT_ANSWER as u64)
    {
        return (response, None);
    }
    let (parts, body) = response.into_parts();
    let bytes = match body.collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(never) => match never {},
    };
    let answer = StoredAnswer {
        status: parts.status.as_u16(),
        content_type: parts
            .headers
            .get(http::header::CONTENT_TYPE)
            .and_then(|value| value.to_str().ok())
            .map(str::to_owned),
        body: bytes.to_vec(),
    };
    (Response::from_parts(parts, Full::new(bytes).boxed()), Some(answer))
}

/// The kept answer, again.
fn replay(answer: StoredAnswer) -> Response<ResponseBody> {
    let mut response = Response::new(Full::new(Bytes::from(answer.body)).boxed());
    *response.status_mut() = StatusCode::from_u16(answer.status).unwrap_or(StatusCode::OK);
    let headers = response.headers_mut();
    if let Some(content_type) =
        answer.content_type.and_then(|value| HeaderValue::from_str(&value).ok())
    {
        headers.insert(http::header::CONTENT_TYPE, content_type);
    }
    headers.insert(REPLAYED, HeaderValue::from_static("true"));
    response
}

/// Purges lapsed keys in the background, once an hour at most.
fn purge_now_and_then(store: &std::sync::Arc<dyn cairn_store::Store>, now: Timestamp) {
    let last = PURGED_AT.load(Ordering::Relaxed);
    if now.as_millis() - last < PURGE_EVERY_MILLIS
        || PURGED_AT
            .compare_exchange(last, now.as_millis(), Ordering::Relaxed, Ordering::Relaxed)
            .is_err()
    {
        return;
    }
    let store = store.clone();
    tokio::spawn(async move {
        match store.purge_idempotency(now).await {
            Ok(purged) if purged > 0 => tracing::info!(purged, "purged lapsed idempotency keys"),
            Ok(_) => {}
            Err(error) => tracing::warn!(%error, "cannot purge lapsed idempotency keys"),
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_of_sane_shape_only() {
        assert_eq!(key_of(&HeaderValue::from_static("3f2a-01")).unwrap(), "3f2a-01");
        for odd in ["", "has space", &"k".repeat(256)] {
            assert!(key_of(&HeaderValue::from_str(odd).unwrap()).is_err(), "{odd:?}");
        }
    }

    #[test]
    fn the_fingerprint_covers_method_path_query_and_body() {
        let uri = |text: &str| text.parse::<http::Uri>().unwrap();
        let base = fingerprint(&Method::POST, &uri("/api/memories"), b"{}");
        assert_eq!(base, fingerprint(&Method::POST, &uri("/api/memories"), b"{}"));
        assert_ne!(base, fingerprint(&Method::PATCH, &uri("/api/memories"), b"{}"));
        assert_ne!(base, fingerprint(&Method::POST, &uri("/api/memories?x=1"), b"{}"));
        assert_ne!(base, fingerprint(&Method::POST, &uri("/api/memories"), b"{ }"));
    }
}
