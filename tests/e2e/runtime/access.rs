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

// ---------------------------------------------------------------------------------------
// Browser visitors and the rate limits.
// ---------------------------------------------------------------------------------------

/// What a chat widget's server does for a new visitor with its `runtime` key: a conversation
/// and a conversation token for it. The two answers (no token without a conversation).
async fn start_visitor(daemon: &Daemon, key: &str) -> (Reply, Option<Reply>) {
    let as_server = [("x-api-key", key)];
    let created = daemon
        .request_with(Method::POST, &path("/conversations"), Body::Json(json!({})), &as_server)
        .await;
    let Some(id) = created.body["conversation"]["id"].as_str() else { return (created, None) };
    let mint = json!({"conversationId": id, "ttlSeconds": 600});
    let token = daemon
        .request_with(Method::POST, "/api/conversation-tokens", Body::Json(mint), &as_server)
        .await;
    (created, Some(token))
}

#[tokio::test]
async fn visitors_start_on_a_budget_of_their_own_and_each_token_counts_for_one_visitor() {
    let directory = tempfile::tempdir().unwrap();
    let server_key = create_key(directory.path(), "runtime");
    let daemon = Daemon::start_in_with(
        directory.path(),
        &["--profile", "production"],
        &[
            ("SERVICE_RATE_LIMIT_WRITE", "3"),
            ("SERVICE_RATE_LIMIT_START", "8"),
            ("SERVICE_RATE_LIMIT_READ", "1000"),
        ],
    );

    // Starting visitors spends `start` (8 a minute here: four visitors), not `write` (3).
    let mut visitors = Vec::new();
    for started in 1..=4u32 {
        let (created, token) = start_visitor(&daemon, &server_key).await;
        let token = token.unwrap_or_else(|| panic!("no conversation: {created:?}"));
        assert_eq!(created.status, 201, "{created:?}");
        assert_eq!(token.status, 201, "{token:?}");
        assert_eq!(header(&created, "ratelimit-limit"), Some("8"), "{created:?}");
        assert_eq!(header(&token, "ratelimit-limit"), Some("8"), "{token:?}");
        let left = (8 - 2 * started).to_string();
        assert_eq!(header(&token, "ratelimit-remaining"), Some(left.as_str()), "{token:?}");
        let id = created.body["conversation"]["id"].as_str().unwrap().to_owned();
        visitors.push((id, token.body["token"].as_str().unwrap().to_owned()));
    }
    let (refused, _) = start_visitor(&daemon, &server_key).await;
    refused.assert_error(429, "RATE_LIMITED");
    assert!(header(&refused, "retry-after").is_some(), "{refused:?}");

    // Each visitor's messages spend its own token's budget, with the headers that say so.
    let send = |id: &str, token: &str| {
        let path = conversation_path(id, "/messages");
        let bearer = format!("Bearer {token}");
        let daemon = &daemon;
        async move {
            daemon
                .request_with(
                    Method::POST,
                    &path,
                    Body::Json(json!({"message": "hello"})),
                    &[("authorization", bearer.as_str())],
                )
                .await
        }
    };
    let (first_id, first_token) = &visitors[0];
    for left in ["2", "1", "0"] {
        let sent = send(first_id, first_token).await;
        assert_eq!(sent.status, 200, "{sent:?}");
        assert_eq!(header(&sent, "ratelimit-limit"), Some("3"));
        assert_eq!(header(&sent, "ratelimit-remaining"), Some(left));
    }
    send(first_id, first_token).await.assert_error(429, "RATE_LIMITED");
    let (second_id, second_token) = &visitors[1];
    let other = send(second_id, second_token).await;
    assert_eq!(other.status, 200, "another visitor is not held back: {other:?}");
    // Reads carry their class's headers too.
    let read = daemon
        .request_with(
            Method::GET,
            &conversation_path(second_id, "/events"),
            Body::None,
            &[("authorization", format!("Bearer {second_token}").as_str())],
        )
        .await;
    assert_eq!(read.status, 200, "{read:?}");
    assert_eq!(header(&read, "ratelimit-limit"), Some("1000"), "{read:?}");
}
