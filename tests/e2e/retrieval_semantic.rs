//! Hybrid retrieval against an OpenAI-compatible embeddings endpoint. The endpoint is a
//! stand-in started by the test (the real one is a paid external service); it embeds with
//! Cairn's deterministic hashing embedder and records what it was asked.

use std::time::Duration;

use cairn_memory::embed::HashingEmbedder;
use cairn_test_support::standin::{Answer, StandIn};
use serde_json::{Value, json};

use crate::util::Daemon;

/// Serves `POST /v1/embeddings`, and keeps the requests it saw; returns its base URL too.
fn stand_in_endpoint() -> (String, StandIn) {
    let stand_in = StandIn::start(|request| {
        let body = request.json();
        let embedder = HashingEmbedder::new(64);
        let data: Vec<Value> = body["input"]
            .as_array()
            .unwrap()
            .iter()
            .enumerate()
            .map(|(index, text)| json!({"index": index, "embedding": embedder.embed_one(text.as_str().unwrap())}))
            .collect();
        Answer::json("200 OK", &json!({"object": "list", "data": data, "model": "hash-64"}))
    });
    (format!("{}/v1", stand_in.url()), stand_in)
}

/// The Authorization header and the body of each request the stand-in saw.
fn seen(stand_in: &StandIn) -> Vec<(Option<String>, Value)> {
    let requests = stand_in.requests();
    requests
        .iter()
        .map(|request| (request.header("authorization").map(str::to_owned), request.json()))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_embeddings_endpoint_turns_on_hybrid_retrieval() {
    let (url, endpoint) = stand_in_endpoint();
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
        let memories_embedded = seen(&endpoint)
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

    let requests = seen(&endpoint);
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
