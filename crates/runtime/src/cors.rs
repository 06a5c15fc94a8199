//! CORS: preflights answered before `authorize`, and the headers that let a browser page of
//! an allowed origin read the response.

use http::header::{self, HeaderMap, HeaderValue};
use http::{Response, StatusCode};
use http_body_util::{BodyExt, Empty};
use serde::{Deserialize, Serialize};

use crate::handler::header_value;
use cairn_http::ResponseBody;

/// The `cors` option: `true` (legacy: any origin, `*`) or explicit options.
#[derive(Debug, Clone, PartialEq)]
pub enum Cors {
    /// Any origin may call, without credentials. Kept for old setups; prefer explicit origins.
    Wildcard,
    Explicit(CorsOptions),
}

/// Explicit CORS options, as the seed names them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CorsOptions {
    /// Exact browser origins allowed, e.g. `https://app.example.com`.
    pub origins: Vec<String>,
    #[serde(default = "default_allowed_headers")]
    pub allowed_headers: Vec<String>,
    #[serde(default = "default_methods")]
    pub methods: Vec<String>,
    #[serde(default = "default_exposed_headers")]
    pub exposed_headers: Vec<String>,
    #[serde(default)]
    pub credentials: bool,
    #[serde(default)]
    pub max_age_seconds: Option<u64>,
}

/// What a browser client sends: its body's type, its token, and the keys that make its
/// retries safe and its requests traceable.
fn default_allowed_headers() -> Vec<String> {
    ["content-type", "authorization", "idempotency-key", "x-request-id"].map(Into::into).into()
}

/// What a browser client may read of an answer besides the basics: the request's id and
/// whether the answer is a replay of an earlier one.
fn default_exposed_headers() -> Vec<String> {
    ["x-request-id", "idempotent-replayed"].map(Into::into).into()
}

fn default_methods() -> Vec<String> {
    vec!["GET".into(), "POST".into(), "OPTIONS".into()]
}

impl CorsOptions {
    pub fn new(origins: impl IntoIterator<Item = impl Into<String>>) -> CorsOptions {
        CorsOptions {
            origins: origins.into_iter().map(Into::into).collect(),
            allowed_headers: default_allowed_headers(),
            methods: default_methods(),
            exposed_headers: default_exposed_headers(),
            credentials: false,
            max_age_seconds: None,
        }
    }
}

impl Cors {
    fn allows(&self, origin: &str) -> bool {
        match self {
            Cors::Wildcard => true,
            Cors::Explicit(options) => options.origins.iter().any(|allowed| allowed == origin),
        }
    }

    /// Answers an `OPTIONS` preflight: 204 with the allowances for an allowed origin, 403
    /// without them otherwise (the browser then refuses the real request).
    pub(crate) fn preflight(&self, request: &HeaderMap) -> Response<ResponseBody> {
        let mut response = Response::new(Empty::new().boxed());
        let origin = request.get(header::ORIGIN).and_then(|origin| origin.to_str().ok());
        let Some(origin) = origin.filter(|origin| self.allows(origin)) else {
            *response.status_mut() = StatusCode::FORBIDDEN;
            return response;
        };
        *response.status_mut() = StatusCode::NO_CONTENT;
        let headers = response.headers_mut();
        self.decorate(&header_value(origin), headers);
        match self {
            Cors::Wildcard => {
                let requested = request.get(header::ACCESS_CONTROL_REQUEST_HEADERS).cloned();
                let allowed = requested.unwrap_or(HeaderValue::from_static("*"));
                headers.insert(header::ACCESS_CONTROL_ALLOW_HEADERS, allowed);
                headers.insert(
                    header::ACCESS_CONTROL_ALLOW_METHODS,
                    HeaderValue::from_static("GET, POST, OPTIONS"),
                );
            }
            Cors::Explicit(options) => {
                let allowed = options.allowed_headers.join(", ");
                headers.insert(header::ACCESS_CONTROL_ALLOW_HEADERS, header_value(&allowed));
                let methods = options.methods.join(", ");
                headers.insert(header::ACCESS_CONTROL_ALLOW_METHODS, header_value(&methods));
                if let Some(max_age) = options.max_age_seconds {
                    headers.insert(header::ACCESS_CONTROL_MAX_AGE, max_age.into());
                }
            }
        }
        response
    }

    /// Adds the headers of an actual (or preflight) response for `origin`, if allowed.
    pub(crate) fn decorate(&self, origin: &HeaderValue, headers: &mut HeaderMap) {
        let Some(text) = origin.to_str().ok().filter(|origin| self.allows(origin)) else {
            return;
        };
        match self {
            Cors::Wildcard => {
                headers.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, HeaderValue::from_static("*"));
            }
            Cors::Explicit(options) => {
                headers.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, header_value(text));
                headers.append(header::VARY, HeaderValue::from_static("Origin"));
                if options.credentials {
                    headers.insert(
                        header::ACCESS_CONTROL_ALLOW_CREDENTIALS,
                        HeaderValue::from_static("true"),
                    );
                }
                if !options.exposed_headers.is_empty() {
                    let exposed = options.exposed_headers.join(", ");
                    headers.insert(header::ACCESS_CONTROL_EXPOSE_HEADERS, header_value(&exposed));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn preflight(cors: &Cors, origin: &str) -> Response<ResponseBody> {
        let mut headers = HeaderMap::new();
        headers.insert(header::ORIGIN, header_value(origin));
        headers.insert(header::ACCESS_CONTROL_REQUEST_METHOD, HeaderValue::from_static("POST"));
        cors.preflight(&headers)
    }

    #[test]
    fn explicit_origins_only() {
        let mut options = CorsOptions::new(["https://app.example.com"]);
        options.credentials = true;
        options.max_age_seconds = Some(600);
        let cors = Cors::Explicit(options);
        let allowed = preflight(&cors, "https://app.example.com");
        assert_eq!(allowed.status(), StatusCode::NO_CONTENT);
        let headers = allowed.headers();
        assert_eq!(headers[header::ACCESS_CONTROL_ALLOW_ORIGIN], "https://app.example.com");
        assert_eq!(headers[header::ACCESS_CONTROL_ALLOW_CREDENTIALS], "true");
        assert_eq!(headers[header::ACCESS_CONTROL_MAX_AGE], "600");
        assert_eq!(
            headers[header::ACCESS_CONTROL_ALLOW_HEADERS],
            "content-type, authorization, idempotency-key, x-request-id"
        );
        let refused = preflight(&cors, "https://evil.example.com");
        assert_eq!(refused.status(), StatusCode::FORBIDDEN);
        assert!(refused.headers().get(header::ACCESS_CONTROL_ALLOW_ORIGIN).is_none());
    }

    #[test]
    fn wildcard_allows_any_origin_without_credentials() {
        let response = preflight(&Cors::Wildcard, "https://anywhere.example");
        assert_eq!(response.status(), StatusCode::NO_CONTENT);
        assert_eq!(response.headers()[header::ACCESS_CONTROL_ALLOW_ORIGIN], "*");
        assert!(response.headers().get(header::ACCESS_CONTROL_ALLOW_CREDENTIALS).is_none());
    }
}
