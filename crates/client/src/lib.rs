//! An async Rust client for Cairn: every route of the memory API and every operation of the
//! conversation runtime, with typed inputs and results from `cairn-types`.
//!
//! ```no_run
//! # async fn example() -> Result<(), cairn_client::Error> {
//! use cairn_client::{Client, ClientOptions};
//! use cairn_client::types::{ContextRequest, NewMemory, Scope};
//!
//! let client = Client::new(ClientOptions::new("http://127.0.0.1:8787"))?;
//! let memory = client
//!     .create_memory(&NewMemory {
//!         content: "Use pnpm, not npm, in this repo.".into(),
//!         scope: Scope::Repo,
//!         repo: Some("shop".into()),
//!         tags: Vec::new(),
//!         source: None,
//!         metadata: Default::default(),
//!     })
//!     .await?;
//! let task = ContextRequest {
//!     task: "install dependencies".into(),
//!     repo: Some("shop".into()),
//!     token_budget: Some(500),
//! };
//! let pack = client.context(&task).await?;
//! assert!(pack.memory_ids.contains(&memory.id));
//! # Ok(()) }
//! ```
//!
//! Conversations, with the reply streamed and the event log followed:
//!
//! ```no_run
//! # async fn example(client: cairn_client::Client) -> Result<(), cairn_client::Error> {
//! use cairn_client::types::runtime::{CreateConversationInput, SendMessageBody};
//!
//! let conversation = client.create_conversation(&CreateConversationInput::default()).await?;
//! let mut events = client.stream_events(&conversation.id, None);
//! let message = SendMessageBody { message: "I would like to book a demo".into(), ..Default::default() };
//! let reply = client
//!     .send_message_streaming(&conversation.id, &message, |delta| print!("{delta}"))
//!     .await?;
//! while let Some(event) = events.next().await {
//!     let event = event?;
//!     println!("{} {}", event.offset, event.kind);
//!     if event.offset + 1 >= reply.events.last().map_or(0, |e| e.offset + 1) { break; }
//! }
//! # Ok(()) }
//! ```
//!
//! Errors: [`Error::Api`] carries what the service answered ([`ServiceApiError`]: status,
//! code, message and the parsed body); the other variants are about the exchange itself
//! (unreachable, timed out, an answer that is not the documented one).
//!
//! HTTP is hyper 1 with rustls (the ring provider and the platform's certificate
//! verifier), so `https://` URLs work without OpenSSL.

mod error;
mod memory;
mod runtime;
mod sse;

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use http::{Method, Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client as HyperClient;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde::Serialize;
use serde::de::DeserializeOwned;

pub use crate::error::{Error, ServiceApiError};
pub use crate::sse::EventStream;
/// The wire types of both APIs.
pub use cairn_types as types;

/// The header that makes a write safe to send again.
const IDEMPOTENCY_KEY: HeaderName = HeaderName::from_static("idempotency-key");

/// Where the runtime is mounted on a Cairn daemon.
pub const DEFAULT_RUNTIME_PATH: &str = "/api/runtime";

/// How to reach the service: its base URL, credentials, extra headers and timeouts.
#[derive(Debug, Clone)]
pub struct ClientOptions {
    /// The daemon's URL, e.g. `http://127.0.0.1:8787`.
    pub base_url: String,
    /// Sent as `X-API-Key` (a key from `cairn keys create`).
    pub api_key: Option<String>,
    /// Sent as `Authorization: Bearer …` (a JWT).
    pub bearer_token: Option<String>,
    /// Sent with every request.
    pub headers: HeaderMap,
    /// The longest a call may take, from connecting to the last byte of the answer
    /// (default 30 s). Event streams are not bounded by it.
    pub timeout: Duration,
    /// The longest connecting may take (default 5 s).
    pub connect_timeout: Duration,
    /// How many times a call is sent again after a connection error or a 502, 503 or 504
    /// (default 3), with growing pauses from 200 ms (the service's `Retry-After` when it
    /// gives one); a timeout is not tried again.
    /// Writes carry an `Idempotency-Key`, so a retried write runs once.
    pub retries: u32,
    /// Where the conversation runtime is mounted (default `/api/runtime`).
    pub runtime_path: String,
}

impl ClientOptions {
    pub fn new(base_url: impl Into<String>) -> ClientOptions {
        ClientOptions {
            base_url: base_url.into(),
            api_key: None,
            bearer_token: None,
            headers: HeaderMap::new(),
            timeout: Duration::from_secs(30),
            connect_timeout: Duration::from_secs(5),
            runtime_path: DEFAULT_RUNTIME_PATH.to_owned(),
            retries: 3,
        }
    }

    /// How many times a failed call is sent again (0: never).
    pub fn retries(mut self, retries: u32) -> ClientOptions {
        self.retries = retries;
        self
    }

    pub fn api_key(mut self, key: impl Into<String>) -> ClientOptions {
        self.api_key = Some(key.into());
        self
    }

    pub fn bearer_token(mut self, token: impl Into<String>) -> ClientOptions {
        self.bearer_token = Some(token.into());
        self
    }

    /// Adds a header sent with every request.
    pub fn header(mut self, name: HeaderName, value: HeaderValue) -> ClientOptions {
        self.headers.append(name, value);
        self
    }

    pub fn timeout(mut self, timeout: Duration) -> ClientOptions {
        self.timeout = timeout;
        self
    }

    pub fn connect_timeout(mut self, timeout: Duration) -> ClientOptions {
        self.connect_timeout = timeout;
        self
    }
}

/// A client of one Cairn service. Cheap to clone; clones share connections.
#[derive(Clone)]
pub struct Client {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client").field("base_url", &self.inner.base_url).finish_non_exhaustive()
    }
}

#[derive(Clone)]
struct Inner {
    base_url: String,
    runtime_path: String,
    headers: HeaderMap,
    timeout: Duration,
    retries: u32,
    http: HyperClient<HttpsConnector<HttpConnector>, Full<Bytes>>,
}

/// A request body: JSON, or nothing.
pub(crate) enum Body<'a, T: Serialize + ?Sized> {
    None,
    Json(&'a T),
}

/// One request of a route: its method, path (below the base URL), query string and body.
pub(crate) struct Call<'a, B: Serialize + ?Sized> {
    pub(crate) method: Method,
    pub(crate) path: &'a str,
    pub(crate) query: Option<String>,
    pub(crate) body: Body<'a, B>,
}

impl Client {
    pub fn new(options: ClientOptions) -> Result<Client, Error> {
        let base_url = options.base_url.trim_end_matches('/').to_owned();
        if !(base_url.starts_with("http://") || base_url.starts_with("https://")) {
            return Err(Error::Options(format!("the base URL `{base_url}` is not http(s)://…")));
        }
        base_url
            .parse::<http::Uri>()
            .map_err(|error| Error::Options(format!("the base URL `{base_url}`: {error}")))?;
        let mut headers = options.headers;
        if let Some(key) = &options.api_key {
            let value = HeaderValue::from_str(key)
                .map_err(|_| Error::Options("the API key is not a valid header value".into()))?;
            headers.insert(HeaderName::from_static("x-api-key"), value);
        }
        if let Some(token) = &options.bearer_token {
            let value = HeaderValue::from_str(&format!("Bearer {token}")).map_err(|_| {
                Error::Options("the bearer token is not a valid header value".into())
            })?;
            headers.insert(AUTHORIZATION, value);
        }
        let mut connector = HttpConnector::new();
        connector.set_connect_timeout(Some(options.connect_timeout));
        connector.set_nodelay(true);
        connector.enforce_http(false);
        let https = hyper_rustls::HttpsConnectorBuilder::new()
            .with_platform_verifier()
            .https_or_http()
            .enable_http1()
            .wrap_connector(connector);
        let http = HyperClient::builder(TokioExecutor::new()).build(https);
        let runtime_path = options.runtime_path.trim_end_matches('/').to_owned();
        let inner = Inner {
            base_url,
            runtime_path,
            headers,
            timeout: options.timeout,
            retries: options.retries,
            http,
        };
        Ok(Client { inner: Arc::new(inner) })
    }

    /// The same client (sharing its connections) sending `headers` too, replacing any of
    /// the same name: e.g. another caller's credentials.
    pub fn with_headers(&self, headers: HeaderMap) -> Client {
        let mut inner = Inner::clone(&self.inner);
        for (name, value) in &headers {
            inner.headers.insert(name, value.clone());
        }
        Client { inner: Arc::new(inner) }
    }

    /// The service's base URL.
    pub fn base_url(&self) -> &str {
        &self.inner.base_url
    }

    /// A runtime path: the runtime's base path followed by `path`.
    pub(crate) fn runtime_path(&self, path: &str) -> String {
        format!("{}{path}", self.inner.runtime_path)
    }

    /// Sends a request and reads a JSON answer into `T`.
    pub(crate) async fn call<T, B>(
        &self,
        method: Method,
        path: &str,
        query: Option<String>,
        body: Body<'_, B>,
    ) -> Result<T, Error>
    where
        T: DeserializeOwned,
        B: Serialize + ?Sized,
    {
        let call = Call { method, path, query, body };
        let (url, bytes) = self.exchange(call, "application/json").await?;
        serde_json::from_slice(&bytes).map_err(|error| Error::Decode {
            url,
            message: format!("not the documented JSON: {error}"),
        })
    }

    /// Sends a request and reads the whole answer, each attempt within the timeout; an
    /// error status becomes [`Error::Api`]. A write carries an `Idempotency-Key` (unless the
    /// caller's headers give one), the same for each attempt; connection errors, 502, 503,
    /// 504 and `IDEMPOTENCY_KEY_IN_USE` are tried again (see [`ClientOptions::retries`]).
    pub(crate) async fn exchange<B: Serialize + ?Sized>(
        &self,
        call: Call<'_, B>,
        accept: &'static str,
    ) -> Result<(String, Bytes), Error> {
        let (url, request) = self.request(call, accept)?;
        let (mut parts, body) = request.into_parts();
        let write = !matches!(parts.method, Method::GET | Method::HEAD | Method::OPTIONS);
        if write && !parts.headers.contains_key(IDEMPOTENCY_KEY) {
            let key = cairn_types::new_id(cairn_types::IdPrefix::Request);
            let key = HeaderValue::from_str(&key).expect("an id is a valid header value");
            parts.headers.insert(IDEMPOTENCY_KEY, key);
        }
        let mut attempt = 0;
        loop {
            let request = Request::from_parts(parts.clone(), body.clone());
            let result = self.exchange_once(&url, request).await;
            let again = match &result {
                // A timeout is not tried again: the caller's deadline is spent.
                Err(Error::Transport { .. }) => None,
                Err(Error::Api(error))
                    if matches!(error.status, 502..=504)
                        || error.code == "IDEMPOTENCY_KEY_IN_USE" =>
                {
                    error.retry_after
                }
                _ => return result.map(|bytes| (url, bytes)),
            };
            if attempt >= self.inner.retries {
                return result.map(|bytes| (url, bytes));
            }
            attempt += 1;
            let backoff = Duration::from_millis(100 << attempt.min(5)).min(Duration::from_secs(2));
            tokio::time::sleep(again.unwrap_or(backoff).min(Duration::from_secs(10))).await;
        }
    }

    /// One attempt of [`Client::exchange`].
    async fn exchange_once(
        &self,
        url: &str,
        request: Request<Full<Bytes>>,
    ) -> Result<Bytes, Error> {
        let timeout = self.inner.timeout;
        let url = url.to_owned();
        let exchange = async {
            let response = self.send(&url, request).await?;
            let status = response.status();
            let retry_after = response
                .headers()
                .get(http::header::RETRY_AFTER)
                .and_then(|value| value.to_str().ok()?.trim().parse::<u64>().ok())
                .map(std::time::Duration::from_secs);
            let bytes = response
                .into_body()
                .collect()
                .await
                .map_err(|error| transport(&url, error))?
                .to_bytes();
            if !status.is_success() {
                let error = ServiceApiError::from_body(status.as_u16(), &bytes);
                return Err(Error::Api(ServiceApiError { retry_after, ..error }));
            }
            Ok(bytes)
        };
        match tokio::time::timeout(timeout, exchange).await {
            Ok(result) => result,
            Err(_) => Err(Error::Timeout { url, timeout }),
        }
    }

    /// Sends a request and returns the response's head and body as they come (for
    /// streams); an error status becomes [`Error::Api`].
    pub(crate) async fn open<B: Serialize + ?Sized>(
        &self,
        call: Call<'_, B>,
        extra: &[(HeaderName, String)],
    ) -> Result<(String, Incoming), Error> {
        let (url, mut request) = self.request(call, "text/event-stream")?;
        for (name, value) in extra {
            let value = HeaderValue::from_str(value)
                .map_err(|_| Error::Options(format!("header {name}: not a valid value")))?;
            request.headers_mut().insert(name.clone(), value);
        }
        let timeout = self.inner.timeout;
        let response = match tokio::time::timeout(timeout, self.send(&url, request)).await {
            Ok(response) => response?,
            Err(_) => return Err(Error::Timeout { url, timeout }),
        };
        let status = response.status();
        if status != StatusCode::OK {
            let bytes =
                response.into_body().collect().await.map(|b| b.to_bytes()).unwrap_or_default();
            return Err(Error::Api(ServiceApiError::from_body(status.as_u16(), &bytes)));
        }
        Ok((url, response.into_body()))
    }

    fn request<B: Serialize + ?Sized>(
        &self,
        Call { method, path, query, body }: Call<'_, B>,
        accept: &'static str,
    ) -> Result<(String, Request<Full<Bytes>>), Error> {
        let mut url = format!("{}{path}", self.inner.base_url);
        if let Some(query) = query.filter(|query| !query.is_empty()) {
            url.push('?');
            url.push_str(&query);
        }
        let mut request = Request::builder().method(method).uri(&url);
        let headers = request.headers_mut().expect("the builder has no error yet");
        headers.extend(self.inner.headers.clone());
        headers.insert(ACCEPT, HeaderValue::from_static(accept));
        let bytes = match body {
            Body::None => Bytes::new(),
            Body::Json(value) => {
                headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
                Bytes::from(serde_json::to_vec(value).map_err(|error| Error::Decode {
                    url: url.clone(),
                    message: format!("the request body does not serialize: {error}"),
                })?)
            }
        };
        let request = request
            .body(Full::new(bytes))
            .map_err(|error| Error::Options(format!("the request to {url}: {error}")))?;
        Ok((url, request))
    }

    async fn send(
        &self,
        url: &str,
        request: Request<Full<Bytes>>,
    ) -> Result<hyper::Response<Incoming>, Error> {
        self.inner.http.request(request).await.map_err(|error| transport(url, error))
    }
}

fn transport(url: &str, error: impl std::error::Error + Send + Sync + 'static) -> Error {
    // hyper-util's error says "client error (Connect)"; the cause says why.
    let mut message = error.to_string();
    let mut source = std::error::Error::source(&error);
    while let Some(cause) = source {
        message = format!("{message}: {cause}");
        source = cause.source();
    }
    Error::Transport { url: url.to_owned(), source: message.into() }
}

/// A query string from a query type (absent fields are left out).
pub(crate) fn query<T: Serialize>(query: &T) -> Result<String, Error> {
    serde_urlencoded::to_string(query)
        .map_err(|error| Error::Options(format!("the query does not serialize: {error}")))
}

/// An id as one path segment, percent-encoded.
pub(crate) fn segment(id: &str) -> String {
    const SEGMENT: &percent_encoding::AsciiSet =
        &percent_encoding::NON_ALPHANUMERIC.remove(b'-').remove(b'_').remove(b'.').remove(b'~');
    percent_encoding::utf8_percent_encode(id, SEGMENT).to_string()
}
