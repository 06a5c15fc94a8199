//! Access: CORS with explicit origins, and the daemon's authorize hook.

use hyper::Method;
use serde_json::json;

use super::{conversation_path, path};
use crate::util::{Body, Daemon, Reply, create_key};

// ---------------------------------------------------------------------------------------
// 9. CORS with explicit origins.
// ---------------------------------------------------------------------------------------

const APP: &str = "https://app.example.com";
const EVIL: &str = "https://evil.example.com";

fn header<'a>(reply: &'a Reply, name: &str) -> Option<&'a str> {
    reply.headers.get(name).map(|value| value.to_str().unwrap())
}

async fn preflight(daemon: &Daemon, origin: &str) -> Reply {
    daemon
        .request_with(
            Method::OPTIONS,
            &path("/conversations"),
            Body::None,
            &[
                ("origin", origin),
                ("access-control-request-method", "POST"),
                ("access-control-request-headers", "content-type"),
            ],
        )
        .await
}

#[tokio::test]
async fn cors_allows_only_the_configured_origins() {
    let daemon = Daemon::start_with(&["--cors-origin", APP], &[]);

    let allowed = preflight(&daemon, APP).await;
    assert_eq!(allowed.status, 204, "{allowed:?}");
    assert_eq!(header(&allowed, "access-control-allow-origin"), Some(APP));
    let methods = header(&allowed, "access-control-allow-methods").unwrap();
    assert!(methods.contains("POST") && methods.contains("GET"), "{methods}");
    let headers = header(&allowed, "access-control-allow-headers").unwrap().to_lowercase();
    assert!(headers.contains("content-type") && headers.contains("authorization"), "{headers}");

    let refused = preflight(&daemon, EVIL).await;
    assert_eq!(refused.status, 403, "{refused:?}");
    assert_eq!(header(&refused, "access-control-allow-origin"), None);

    let created = daemon
        .request_with(
            Method::POST,
            &path("/conversations"),
            Body::Json(json!({})),
            &[("origin", APP)],
        )
        .await;
    assert_eq!(created.status, 201, "{created:?}");
    assert_eq!(header(&created, "access-control-allow-origin"), Some(APP));
    assert!(
        created.headers.get_all("vary").iter().any(|v| v.to_str().unwrap().contains("Origin")),
        "{created:?}"
    );
    let listed = daemon
        .request_with(Method::GET, &path("/conversations"), Body::None, &[("origin", APP)])
        .await;
    assert_eq!(listed.status, 200);
    assert_eq!(header(&listed, "access-control-allow-origin"), Some(APP));

    let count =
        daemon.get(&path("/conversations")).await.body["conversations"].as_array().unwrap().len();
    let cross_site = daemon
        .request_with(
            Method::POST,
            &path("/conversations"),
            Body::Json(json!({})),
            &[("origin", EVIL)],
        )
        .await;
    cross_site.assert_error(403, "FORBIDDEN");
    assert_eq!(header(&cross_site, "access-control-allow-origin"), None);
    let count_after =
        daemon.get(&path("/conversations")).await.body["conversations"].as_array().unwrap().len();
    assert_eq!(count_after, count, "the refused request created nothing");
}

// ---------------------------------------------------------------------------------------
// 10. The daemon's authorize hook: the memory API's authentication.
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn production_runtime_requests_need_credentials_and_roles() {
    let directory = tempfile::tempdir().unwrap();
    let writer = create_key(directory.path(), "write");
    let reader = create_key(directory.path(), "read");
    let daemon = Daemon::start_in_with(
        directory.path(),
        &["--profile", "production", "--cors-origin", APP],
        &[],
    );

    // No credentials: the memory API's own 401, in its envelope.
    let anonymous = daemon.get(&path("/conversations")).await;
    anonymous.assert_error(401, "UNAUTHORIZED");
    let memory_answer = daemon.get("/api/memories").await;
    assert_eq!(anonymous.body["error"]["message"], memory_answer.body["error"]["message"]);
    assert_eq!(anonymous.body.as_object().unwrap().len(), 1, "only `error`: {:?}", anonymous.body);
    daemon.post(&path("/conversations"), json!({})).await.assert_error(401, "UNAUTHORIZED");
    daemon
        .request_with(
            Method::POST,
            &path("/conversations"),
            Body::Json(json!({})),
            &[("x-api-key", "cairn_wrong")],
        )
        .await
        .assert_error(401, "UNAUTHORIZED");
    // Preflights are not subject to authentication.
    let preflight = preflight(&daemon, APP).await;
    assert_eq!(preflight.status, 204, "{preflight:?}");
    assert_eq!(header(&preflight, "access-control-allow-origin"), Some(APP));

    // A reader reads but may not write.
    let as_reader = [("x-api-key", reader.as_str())];
    let listed =
        daemon.request_with(Method::GET, &path("/conversations"), Body::None, &as_reader).await;
    assert_eq!(listed.status, 200, "{listed:?}");
    let refused = daemon
        .request_with(Method::POST, &path("/conversations"), Body::Json(json!({})), &as_reader)
        .await;
    assert!(refused.assert_error(403, "FORBIDDEN").contains("`write` role"));

    // A writer does both.
    let as_writer = [("x-api-key", writer.as_str())];
    let created = daemon
        .request_with(Method::POST, &path("/conversations"), Body::Json(json!({})), &as_writer)
        .await;
    assert_eq!(created.status, 201, "{created:?}");
    let id = created.body["conversation"]["id"].as_str().unwrap();
    let sent = daemon
        .request_with(
            Method::POST,
            &conversation_path(id, "/messages"),
            Body::Json(json!({"message": "hello"})),
            &as_writer,
        )
        .await;
    assert_eq!(sent.status, 200, "{sent:?}");
    let events = daemon
        .request_with(Method::GET, &conversation_path(id, "/events"), Body::None, &as_reader)
        .await;
    assert_eq!(events.status, 200);
    assert!(events.body["events"].as_array().unwrap().len() > 2);
    daemon
        .request_with(
            Method::POST,
            &conversation_path(id, "/messages"),
            Body::Json(json!({"message": "hi"})),
            &as_reader,
        )
        .await
        .assert_error(403, "FORBIDDEN");
    let mut stream =
        daemon.stream(Method::GET, &conversation_path(id, "/events/stream"), Body::None, &[]).await;
    assert_eq!(stream.status, 401, "streams need credentials too");
    assert_eq!(stream.json().await["error"]["code"], "UNAUTHORIZED");
    stream = daemon
        .stream(Method::GET, &conversation_path(id, "/events/stream"), Body::None, &as_reader)
        .await;
    assert_eq!(stream.status, 200);
    assert_eq!(stream.next().await.unwrap().json()["offset"], 0);
}
