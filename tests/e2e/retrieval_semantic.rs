//! Hybrid retrieval against an OpenAI-compatible embeddings endpoint. The endpoint is a
//! stand-in started by the test (the real one is a paid external service); it embeds with
//! Cairn's deterministic hashing embedder and records what it was asked.

use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use cairn_memory::embed::HashingEmbedder;
use http_body_util::{BodyExt, Full};
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use serde_json::{Value, json};

use crate::util::Daemon;

/// The requests the stand-in saw: the Authorization header and the body.
type Seen = Arc<Mutex<Vec<(Option<String>, Value)>>>;

/// Serves `POST /v1/embeddings`; returns its base URL and the requests it saw.
async fn stand_in_endpoint() -> (String, Seen) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let seen: Seen = Arc::default();
    let log = seen.clone();
    tokio::spawn(async move {
        loop {
            let (stream, _) = listener.accept().await.unwrap();
            let log = log.clone();
            tokio::spawn(async move {
                let service = service_fn(move |request: hyper::Request<hyper::body::Incoming>| {
                    let log = log.clone();
                    async move {
                        let authorization = request
                            .headers()
                            .get("authorization")
                            .map(|v| v.to_str().unwrap().to_owned());
                        let body: Value = serde_json::from_slice(
                            &request.into_body().collect().await.unwrap().to_bytes(),
                        )
                        .unwrap();
                        let embedder = HashingEmbedder::new(64);
                        let data: Vec<Value> = body["input"]
                            .as_array()
                            .unwrap()
                            .iter()
                            .enumerate()
                            .map(|(index, text)| json!({"index": index, "embedding": embedder.embed_one(text.as_str().unwrap())}))
                            .collect();
                        log.lock().unwrap().push((authorization, body));
                        let answer = json!({"object": "list", "data": data, "model": "hash-64"});
                        Ok::<_, Infallible>(hyper::Response::new(Full::new(Bytes::from(
                            answer.to_string(),
                        ))))
                    }
                });
                let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    (format!("http://{address}/v1"), seen)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_embeddings_endpoint_turns_on_hybrid_retrieval() {
    let (url, seen) = stand_in_endpoint().await;
    let args = ["--embedder", "openai", "--embedding-url", &url, "--embedding-model", "hash-64"];
    let daemon = Daemon::start_with(&args, &[("SERVICE_EMBEDDING_API_KEY", "sk-test")]);
    assert_eq!(daemon.get("/api/health").await.body["retrieval"], "hybrid");

    let staging = daemon
        .remember(json!({"content": "The staging cluster restarts every night.", "scope": "repo"}))
        .await;
    daemon.remember(json!({"content": "Coffee is on the second floor.", "scope": "global"})).await;
    let mut pending = Value::Null;
    for _ in 0..100 {
        pending = daemon.get("/api/health").await.body["embeddingsPending"].clone();
        let memories_embedded = seen
            .lock()
            .unwrap()
            .iter()
            .map(|(_, body)| body["input"].as_array().unwrap().len())
            .sum::<usize>();
        if pending == 0 && memories_embedded >= 3 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(pending, 0, "the background worker embeds every memory");

    let semantic = daemon.get("/api/search?q=staging%20cluster%20nightly&mode=semantic").await;
    assert_eq!(semantic.status, 200, "{semantic:?}");
    assert_eq!(semantic.body["hits"][0]["memory"]["id"], staging.as_str());
    let hybrid = daemon.get("/api/search?q=staging%20cluster").await;
    assert_eq!(hybrid.body["hits"][0]["memory"]["id"], staging.as_str());
    let pack = daemon.post("/api/context", json!({"task": "restart the staging cluster"})).await;
    assert_eq!(pack.body["memoryIds"][0], staging.as_str());

    let requests = seen.lock().unwrap().clone();
    assert!(
        requests
            .iter()
            .all(|(authorization, body)| authorization.as_deref() == Some("Bearer sk-test")
                && body["model"] == "hash-64")
    );
}

#[tokio::test]
async fn without_an_embedder_retrieval_is_fulltext() {
    let daemon = Daemon::start_with(&["--embedder", "none"], &[]);
    let health = daemon.get("/api/health").await.body;
    assert_eq!(
        (health["retrieval"].as_str(), health["embeddingsPending"].as_u64()),
        (Some("fulltext"), Some(0))
    );
    let refused = daemon.get("/api/search?q=x&mode=semantic").await;
    assert!(refused.assert_error(422, "VALIDATION_ERROR").contains("mode"));
    let unreachable = Daemon::start_with(
        &["--embedder", "openai", "--embedding-url", "http://127.0.0.1:9/v1"],
        &[],
    );
    assert_eq!(
        unreachable.get("/api/health").await.body["retrieval"],
        "fulltext",
        "an unreachable endpoint degrades, not fails"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_local_model_finds_paraphrases() {
    let directory = tempfile::tempdir().unwrap();
    let fetched = crate::util::run_cairn(directory.path(), "model", &["fetch"], &[]);
    assert!(fetched.status.success(), "{}", String::from_utf8_lossy(&fetched.stderr));
    assert!(String::from_utf8_lossy(&fetched.stdout).contains("installed all-MiniLM-L6-v2"));

    let daemon = Daemon::start_in(directory.path());
    assert_eq!(
        daemon.get("/api/health").await.body["retrieval"],
        "hybrid",
        "an installed model is used by default"
    );
    let dark = daemon
        .remember(
            json!({"content": "The user prefers dark mode in every editor.", "scope": "user"}),
        )
        .await;
    daemon
        .remember(
            json!({"content": "The build uses cargo and takes four minutes.", "scope": "repo"}),
        )
        .await;
    daemon
        .remember(json!({"content": "Standups are at nine on Mondays.", "scope": "global"}))
        .await;
    for _ in 0..200 {
        if daemon.get("/api/health").await.body["embeddingsPending"] == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let question = "/api/search?q=which%20colour%20scheme%20is%20favoured";
    let words_only = daemon.get(&format!("{question}&mode=fulltext")).await;
    assert!(
        words_only.body["hits"].as_array().unwrap().is_empty(),
        "no word in common: {words_only:?}"
    );
    let meaning = daemon.get(&format!("{question}&mode=semantic")).await;
    assert_eq!(meaning.body["hits"][0]["memory"]["id"], dark.as_str(), "{meaning:?}");
    let hybrid = daemon.get(question).await;
    assert_eq!(
        hybrid.body["hits"][0]["memory"]["id"],
        dark.as_str(),
        "fusion keeps what meaning alone found"
    );
}
