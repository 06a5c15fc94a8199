//! What an operator sees of the daemon: each request's id, its access-log line and its
//! metrics, and the Prometheus exposition of every metric (`GET /metrics`).
//!
//! Metrics are recorded through the `metrics` facade where things happen (here for
//! requests; the API for rate-limit refusals; the runtime for streams and sockets; the
//! stores for pool waits and errors; the engine for dream cycles); [`Telemetry::install`]
//! puts the Prometheus recorder behind the facade. docs/operations.md lists every metric.

use std::borrow::Cow;
use std::net::SocketAddr;
use std::time::Instant;

use cairn_api::ResponseBody;
use cairn_http::{Caller, REQUEST_ID, with_request_id};
use http::{HeaderValue, Method, Request, Response};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

use crate::Services;

/// The buckets of every `_seconds` histogram: from a cached read (a few hundred
/// microseconds) to a dream cycle (minutes).
const SECONDS_BUCKETS: &[f64] = &[
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
    60.0, 300.0,
];

/// The Prometheus recorder, installed once for the process, and the process's own figures.
#[derive(Clone)]
pub struct Telemetry {
    handle: PrometheusHandle,
    process: std::sync::Arc<metrics_process::Collector>,
}

impl std::fmt::Debug for Telemetry {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("Telemetry")
    }
}

impl Telemetry {
    /// Installs the Prometheus recorder behind the `metrics` facade. Once per process: a
    /// second call fails.
    pub fn install() -> Result<Telemetry, String> {
        let handle = PrometheusBuilder::new()
            .set_buckets_for_metric(Matcher::Suffix("_seconds".to_owned()), SECONDS_BUCKETS)
            .map_err(|error| error.to_string())?
            .install_recorder()
            .map_err(|error| error.to_string())?;
        // Keeps the histograms' memory bounded: samples are folded into buckets as they come.
        let upkeep = handle.clone();
        tokio::spawn(async move {
            let mut every = tokio::time::interval(std::time::Duration::from_secs(5));
            loop {
                every.tick().await;
                upkeep.run_upkeep();
            }
        });
        // The standard `process_*` names, which dashboards and alerts expect.
        let process = metrics_process::Collector::default();
        process.describe();
        describe();
        Ok(Telemetry { handle, process: std::sync::Arc::new(process) })
    }

    /// Every metric in Prometheus's text format, with the figures read when asked (the
    /// process's memory, CPU and descriptors; memories by status; the embedding queue).
    pub async fn render(&self, services: &Services) -> String {
        self.process.collect();
        services.memory.record_gauges().await;
        self.handle.render()
    }
}

fn describe() {
    use metrics::{Unit, describe_counter, describe_gauge, describe_histogram};
    describe_counter!(
        "cairn_http_requests_total",
        "Requests answered, by method, route pattern and status."
    );
    describe_histogram!(
        "cairn_http_request_duration_seconds",
        Unit::Seconds,
        "Time from a request's head to its answer's head, by method and route pattern."
    );
    describe_gauge!("cairn_http_requests_in_flight", "Requests being handled now.");
}

/// What is kept of a request while it is handled, for its log line and metrics.
pub(crate) struct Observed {
    pub(crate) id: HeaderValue,
    method: Method,
    route: Cow<'static, str>,
    started: Instant,
    client: SocketAddr,
}

/// The request's id: the client's `X-Request-Id` when it is 1 to 128 characters of
/// letters, digits and `-_.:/+=@`, else a new one (`req_` and a ULID).
fn request_id<B>(request: &Request<B>) -> HeaderValue {
    let sane = |value: &&HeaderValue| {
        let bytes = value.as_bytes();
        (1..=128).contains(&bytes.len())
            && bytes.iter().all(|b| b.is_ascii_alphanumeric() || b"-_.:/+=@".contains(b))
    };
    match request.headers().get(REQUEST_ID).filter(sane) {
        Some(value) => value.clone(),
        None => HeaderValue::from_str(&cairn_types::new_id(cairn_types::IdPrefix::Request))
            .expect("an id is a valid header value"),
    }
}

/// The route pattern of `path` among `services`' routes: a label of bounded variety
/// (`unmatched` for a path none of them has).
fn route_of(services: &Services, method: &Method, path: &str) -> Cow<'static, str> {
    if path == crate::MCP_PATH {
        return Cow::Borrowed(crate::MCP_PATH);
    }
    if path == crate::METRICS_PATH {
        return Cow::Borrowed(crate::METRICS_PATH);
    }
    if let Some(runtime) = &services.runtime
        && runtime.serves(path)
    {
        let under = path.strip_prefix(crate::RUNTIME_BASE_PATH).unwrap_or(path);
        return match cairn_runtime::handler::route(method, under) {
            Ok((operation, _)) => {
                Cow::Owned(format!("{}{}", crate::RUNTIME_BASE_PATH, operation.path()))
            }
            Err(_) => Cow::Borrowed("unmatched"),
        };
    }
    if let Some(template) = cairn_api::routes::template(path) {
        return Cow::Borrowed(template);
    }
    if cairn_console::is_console_path(path) && cairn_console::page_or_asset(path).is_some() {
        return Cow::Borrowed("console");
    }
    Cow::Borrowed("unmatched")
}

/// Starts observing a request: its id, and the clock.
pub(crate) fn begin<B>(services: &Services, request: &Request<B>, client: SocketAddr) -> Observed {
    metrics::gauge!("cairn_http_requests_in_flight").increment(1.0);
    Observed {
        id: request_id(request),
        method: request.method().clone(),
        route: route_of(services, request.method(), request.uri().path()),
        started: Instant::now(),
        client,
    }
}

/// Ends observing a request: its id on the answer (and in its error envelope), its access-log
/// line, its metrics.
pub(crate) fn end(observed: Observed, response: Response<ResponseBody>) -> Response<ResponseBody> {
    let elapsed = observed.started.elapsed();
    metrics::gauge!("cairn_http_requests_in_flight").decrement(1.0);
    let mut response = with_request_id(response, &observed.id);
    let status = response.status().as_u16();
    let method = method_label(&observed.method);
    let route = observed.route;
    metrics::counter!(
        "cairn_http_requests_total",
        "method" => method,
        "route" => route.clone(),
        "status" => status_label(status),
    )
    .increment(1);
    metrics::histogram!(
        "cairn_http_request_duration_seconds",
        "method" => method,
        "route" => route.clone(),
    )
    .record(elapsed.as_secs_f64());
    let caller = response.extensions_mut().remove::<Caller>();
    let principal = caller.as_ref().map_or("-", |caller| caller.0.as_str());
    let request_id = observed.id.to_str().unwrap_or_default();
    let latency_ms = (elapsed.as_secs_f64() * 1000.0 * 1000.0).round() / 1000.0;
    macro_rules! access {
        ($level:expr) => {
            tracing::event!(
                target: "cairn::access",
                $level,
                request_id,
                method,
                route = &*route,
                status,
                latency_ms,
                principal,
                client = %observed.client,
                "request"
            )
        };
    }
    // A probe that passes is a line at DEBUG: balancers and supervisors poll them many times
    // a second, and a line each cost health a third of its throughput. Every other request,
    // and a probe that fails, is a line at INFO.
    if is_probe(&route) && response.status().is_success() {
        access!(tracing::Level::DEBUG);
    } else {
        access!(tracing::Level::INFO);
    }
    response
}

/// Whether `route` is one of the health probes.
fn is_probe(route: &str) -> bool {
    matches!(route, "/api/health" | "/api/health/live" | "/api/health/ready")
}

/// The method as a label: one of the standard ones, else `other` (bounded variety).
fn method_label(method: &Method) -> &'static str {
    match *method {
        Method::GET => "GET",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::PATCH => "PATCH",
        Method::DELETE => "DELETE",
        Method::HEAD => "HEAD",
        Method::OPTIONS => "OPTIONS",
        _ => "other",
    }
}

/// The status as a label, without an allocation for the usual ones.
fn status_label(status: u16) -> Cow<'static, str> {
    const USUAL: &[(u16, &str)] = &[
        (101, "101"),
        (200, "200"),
        (201, "201"),
        (202, "202"),
        (204, "204"),
        (304, "304"),
        (400, "400"),
        (401, "401"),
        (403, "403"),
        (404, "404"),
        (405, "405"),
        (408, "408"),
        (409, "409"),
        (413, "413"),
        (422, "422"),
        (429, "429"),
        (500, "500"),
        (503, "503"),
    ];
    match USUAL.iter().find(|(code, _)| *code == status) {
        Some((_, label)) => Cow::Borrowed(label),
        None => Cow::Owned(status.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sane_client_id_is_kept_and_anything_else_replaced() {
        let with = |value: &str| {
            request_id(&Request::builder().header("x-request-id", value).body(()).unwrap())
        };
        assert_eq!(with("abc-123_x.y:z"), "abc-123_x.y:z");
        for odd in ["", "has space", "quote\"", &"x".repeat(129)] {
            let id = with(odd);
            assert!(id.to_str().unwrap().starts_with("req_"), "{odd:?} gave {id:?}");
        }
        let fresh = request_id(&Request::new(()));
        assert_eq!(fresh.len(), "req_".len() + 26);
    }
}
