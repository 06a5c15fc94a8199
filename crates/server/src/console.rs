//! The web console (`cairn-console`'s embedded files) at `/`: `GET`/`HEAD` of any path that
//! is not the API's, the MCP endpoint's or the OpenAPI document's. Console routes get the
//! app's `index.html` (it routes in the browser); files get their content type, an ETag
//! (`If-None-Match` answers 304), `Cache-Control: no-cache` and the security headers.
//!
//! The files hold no data, so they are served without credentials in every profile; every
//! call the app makes for data goes to the API and authenticates there (the production
//! profile's console asks for an API key).

use bytes::Bytes;
use cairn_api::ResponseBody;
use http::header::{CACHE_CONTROL, CONTENT_TYPE, ETAG, HOST, IF_NONE_MATCH};
use http::{HeaderName, HeaderValue, Method, Request, Response, StatusCode};
use http_body_util::{BodyExt as _, Empty, Full};

/// The console's answer to `request`, or `None` when the request is not the console's.
pub(crate) fn respond<B>(request: &Request<B>) -> Option<Response<ResponseBody>> {
    let method = request.method();
    if method != Method::GET && method != Method::HEAD {
        return None;
    }
    let path = request.uri().path();
    if !cairn_console::is_console_path(path) {
        return None;
    }
    let asset = cairn_console::page_or_asset(path)?;
    let headers = request.headers();
    let fresh =
        headers.get(IF_NONE_MATCH).and_then(|value| value.to_str().ok()).is_some_and(|tags| {
            tags.split(',').any(|tag| tag.trim() == asset.etag || tag.trim() == "*")
        });
    let (status, body) = if fresh {
        (StatusCode::NOT_MODIFIED, Empty::new().map_err(|never| match never {}).boxed())
    } else if method == Method::HEAD {
        (StatusCode::OK, Empty::new().map_err(|never| match never {}).boxed())
    } else {
        (StatusCode::OK, Full::new(Bytes::from_static(asset.bytes)).boxed())
    };
    let mut response = Response::new(body);
    *response.status_mut() = status;
    let out = response.headers_mut();
    out.insert(CONTENT_TYPE, HeaderValue::from_static(asset.content_type));
    out.insert(CACHE_CONTROL, HeaderValue::from_static(asset.cache_control));
    out.insert(ETAG, HeaderValue::from_static(asset.etag));
    if method == Method::HEAD && !fresh {
        out.insert(http::header::CONTENT_LENGTH, HeaderValue::from(asset.bytes.len()));
    }
    let host = headers.get(HOST).and_then(|host| host.to_str().ok());
    if let Ok(policy) = HeaderValue::from_str(&cairn_console::content_security_policy(host)) {
        out.insert(http::header::CONTENT_SECURITY_POLICY, policy);
    }
    for (name, value) in cairn_console::SECURITY_HEADERS {
        out.insert(HeaderName::from_static(name), HeaderValue::from_static(value));
    }
    Some(response)
}

#[cfg(test)]
mod tests {
    use http_body::Body as _;

    use super::*;

    fn get(method: Method, path: &str, etag: Option<&str>) -> Option<Response<ResponseBody>> {
        let mut request =
            Request::builder().method(method).uri(path).header(HOST, "127.0.0.1:8787");
        if let Some(etag) = etag {
            request = request.header(IF_NONE_MATCH, etag);
        }
        respond(&request.body(()).unwrap())
    }

    #[test]
    fn console_paths_get_files_with_their_headers() {
        let index = get(Method::GET, "/memories", None).expect("a console route");
        for page in ["/conversations/conv_1", "/review", "/guards/"] {
            assert!(get(Method::GET, page, None).is_some(), "{page}");
        }
        assert_eq!(index.status(), StatusCode::OK);
        assert_eq!(index.headers()[CONTENT_TYPE], "text/html; charset=utf-8");
        assert_eq!(index.headers()[CACHE_CONTROL], "no-cache");
        let policy = index.headers()[http::header::CONTENT_SECURITY_POLICY].to_str().unwrap();
        assert!(policy.contains("ws://127.0.0.1:8787"), "{policy}");
        assert_eq!(index.headers()["x-frame-options"], "DENY");

        let etag = index.headers()[ETAG].to_str().unwrap().to_owned();
        let again = get(Method::GET, "/", Some(&etag)).unwrap();
        assert_eq!(again.status(), StatusCode::NOT_MODIFIED);

        let head = get(Method::HEAD, "/assets/console.js", None).unwrap();
        assert_eq!(head.status(), StatusCode::OK);
        assert!(head.body().is_end_stream());
        assert_ne!(head.headers()[http::header::CONTENT_LENGTH], "0");
    }

    #[test]
    fn the_api_and_other_methods_are_never_the_console() {
        for path in [
            "/api/memories",
            "/api",
            "/mcp",
            "/openapi.json",
            "/assets/missing.js",
            "/metrics",
            "/healthz",
            "/memoriesx",
        ] {
            assert!(get(Method::GET, path, None).is_none(), "{path}");
        }
        assert!(get(Method::POST, "/", None).is_none());
        assert!(get(Method::DELETE, "/memories", None).is_none());
    }
}
