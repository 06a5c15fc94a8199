//! `MemoryApi::answer_now` gives the answer `handle_from` gives to the same request, or
//! leaves the request to it: a server that asks it first changes nothing a client sees.

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use cairn_api::{ApiConfig, AuthConfig, MemoryApi, PeerAccount, Profile, ResponseBody};
use cairn_memory::Engine;
use cairn_types::NewMemory;
use http::{Method, Request, Response};
use http_body_util::{BodyExt, Empty};

const CLIENT: &str = "127.0.0.1:50000";

fn memory_api(profile: Profile) -> (MemoryApi, tempfile::TempDir) {
    let directory = tempfile::tempdir().unwrap();
    let store =
        Arc::new(cairn_store_sqlite::SqliteStore::open(&directory.path().join("c.db")).unwrap());
    let auth = AuthConfig { profile, jwt: None };
    (MemoryApi::new(Engine::new(store), ApiConfig { auth, ..ApiConfig::default() }), directory)
}

fn request(method: Method, uri: &str, headers: &[(&str, &str)]) -> Request<Empty<Bytes>> {
    let mut request = Request::builder().method(method).uri(uri).body(Empty::new()).unwrap();
    request.headers_mut().insert("host", "127.0.0.1:8787".parse().unwrap());
    for (name, value) in headers {
        let name = http::HeaderName::from_bytes(name.as_bytes()).unwrap();
        request.headers_mut().insert(name, value.parse().unwrap());
    }
    request
}

/// A response as a client reads it: status, header names and values but the date's, and
/// the body as JSON without the uptime (which moves between the two answers).
async fn seen(response: Response<ResponseBody>) -> (u16, Vec<(String, String)>, serde_json::Value) {
    let status = response.status().as_u16();
    let mut headers: Vec<_> = response
        .headers()
        .iter()
        .map(|(name, value)| (name.to_string(), value.to_str().unwrap().to_owned()))
        .collect();
    headers.sort();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    let mut body: serde_json::Value = serde_json::from_slice(&body).unwrap();
    if let Some(object) = body.as_object_mut() {
        object.remove("uptime");
    }
    (status, headers, body)
}

/// What `answer_now` answers (`None` when it leaves it), checked against `handle_from`.
async fn answered_now(
    api: &MemoryApi,
    method: Method,
    uri: &str,
    headers: &[(&str, &str)],
    account: Option<PeerAccount>,
) -> Option<u16> {
    let client: SocketAddr = CLIENT.parse().unwrap();
    let now = api.answer_now(&request(method.clone(), uri, headers), Some(client), account)?;
    let now = seen(now).await;
    let handled = api.handle_from(request(method, uri, headers), Some(client), account).await;
    assert_eq!(now, seen(handled).await, "{uri} {headers:?}");
    Some(now.0)
}

#[tokio::test]
async fn health_is_answered_at_once_as_the_handler_answers_it() {
    let (api, _directory) = memory_api(Profile::Solo);
    let memory: NewMemory =
        serde_json::from_value(serde_json::json!({"content": "one", "scope": "global"})).unwrap();
    api.engine().create_memory(memory, "test").await.unwrap();

    // The first health is the handler's: it reads the schema's version from the store.
    let client: SocketAddr = CLIENT.parse().unwrap();
    let first = request(Method::GET, "/api/health", &[]);
    assert!(api.answer_now(&first, Some(client), None).is_none());
    let first = api.handle_from(first, Some(client), None).await;
    assert_eq!(seen(first).await.0, 200);
    // The liveness probe needs nothing; readiness asks the store.
    assert_eq!(answered_now(&api, Method::GET, "/api/health/live", &[], None).await, Some(200));
    let ready = request(Method::GET, "/api/health/ready", &[]);
    assert!(api.answer_now(&ready, Some(client), None).is_none());
    assert_eq!(seen(api.handle_from(ready, Some(client), None).await).await.0, 200);

    let health = answered_now(&api, Method::GET, "/api/health", &[], None).await;
    assert_eq!(health, Some(200));
    let owner = Some(PeerAccount::Owner);
    assert_eq!(answered_now(&api, Method::GET, "/api/health", &[], owner).await, Some(200));
    // Refusals are the handler's too.
    for (uri, headers, account, status) in [
        ("/api/health?verbose=1", &[][..], None, 422),
        ("/api/health", &[("host", "evil.example")][..], None, 403),
        ("/api/health", &[("origin", "https://evil.example")][..], None, 403),
        ("/api/health", &[("authorization", "Basic abc")][..], None, 401),
        ("/api/health", &[("authorization", "Bearer not.a.jwt")][..], None, 401),
        ("/api/health", &[][..], Some(PeerAccount::Other(4242)), 403),
    ] {
        assert_eq!(answered_now(&api, Method::GET, uri, headers, account).await, Some(status));
    }
    // Credentials that need a lookup, other routes and other methods are left to it.
    for (method, uri, headers) in [
        (Method::GET, "/api/health", &[("x-api-key", "cairn_unknown")][..]),
        (Method::GET, "/api/health", &[("authorization", "Bearer cvt_unknown")][..]),
        (Method::POST, "/api/health", &[][..]),
        (Method::GET, "/api/memories", &[][..]),
    ] {
        assert_eq!(answered_now(&api, method, uri, headers, None).await, None, "{uri}");
    }

    let (production, _directory) = memory_api(Profile::Production);
    let warm = request(Method::GET, "/api/health/ready", &[]);
    assert_eq!(seen(production.handle_from(warm, Some(client), None).await).await.0, 200);
    let warm = request(Method::GET, "/api/health", &[("x-api-key", "cairn_unknown")]);
    assert_eq!(seen(production.handle_from(warm, Some(client), None).await).await.0, 401);
    assert_eq!(
        answered_now(&production, Method::GET, "/api/health/live", &[], None).await,
        Some(200),
        "probes need no credentials"
    );
}
