//! Several daemons on one PostgreSQL database (issue 15): each test starts a real PostgreSQL
//! cluster (`initdb` into a temporary directory) and three `cairn serve --database-url`
//! processes on it, and checks what a load balancer in front of them must be able to rely
//! on: gapless offsets in commit order, streams that see every daemon's appends, exactly-once
//! deliveries, shared memories, no acknowledged write lost to a `kill -9`, and recovery from
//! lost database connections.

use std::collections::{BTreeSet, HashSet};
use std::process::Command;
use std::time::{Duration, Instant};

use cairn_test_support::postgres::TestCluster;
use futures_util::future::join_all;
use hyper::Method;
use serde_json::{Value, json};

use crate::util::{Body, Daemon, Reply};

/// A daemon on the database at `url` (its data directory holds only its log).
fn daemon(url: &str) -> Daemon {
    Daemon::start_with(&["--database-url", url, "--embedder", "none"], &[])
}

fn three(url: &str) -> [Daemon; 3] {
    [daemon(url), daemon(url), daemon(url)]
}

fn conversation_path(id: &str, rest: &str) -> String {
    format!("/api/runtime/conversations/{id}{rest}")
}

async fn create_conversation(daemon: &Daemon) -> String {
    let created = daemon.post("/api/runtime/conversations", json!({})).await;
    assert_eq!(created.status, 201, "{created:?}");
    created.body["conversation"]["id"].as_str().unwrap().to_owned()
}

/// Every event of a conversation, through `daemon`, following the pages.
async fn events(daemon: &Daemon, id: &str) -> Vec<Value> {
    let mut all = Vec::new();
    let mut path = conversation_path(id, "/events");
    loop {
        let page = daemon.get(&path).await;
        assert_eq!(page.status, 200, "{page:?}");
        all.extend(page.body["events"].as_array().unwrap().iter().cloned());
        match page.body["nextAfterOffset"].as_u64() {
            Some(next) => path = conversation_path(id, &format!("/events?afterOffset={next}")),
            None => return all,
        }
    }
}

fn offsets(events: &[Value]) -> Vec<u64> {
    events.iter().map(|event| event["offset"].as_u64().unwrap()).collect()
}

async fn custom_event(daemon: &Daemon, id: &str, n: usize) -> Reply {
    daemon
        .post(
            &conversation_path(id, "/custom-events"),
            json!({"eventName": "page.viewed", "payload": {"url": format!("/page/{n}")}}),
        )
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn three_daemons_start_at_once_on_an_empty_database() {
    let (cluster, url) = TestCluster::with_database();
    // Started from three threads at the same instant: the migrations run once.
    let daemons: Vec<Daemon> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..3).map(|_| scope.spawn(|| daemon(&url))).collect();
        handles.into_iter().map(|handle| handle.join().unwrap()).collect()
    });
    for daemon in &daemons {
        assert_eq!(daemon.get("/api/health").await.status, 200);
    }
    let database = url.rsplit('/').next().unwrap();
    let versions = cluster.psql(database, "SELECT version FROM cairn_migrations ORDER BY version");
    let versions: Vec<&str> = versions.lines().collect();
    let unique: BTreeSet<&str> = versions.iter().copied().collect();
    assert!(!versions.is_empty());
    assert_eq!(versions.len(), unique.len(), "each migration applied once: {versions:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_senders_through_three_daemons_keep_offsets_gapless() {
    let (_cluster, url) = TestCluster::with_database();
    let daemons = three(&url);
    let id = create_conversation(&daemons[0]).await;
    let before = events(&daemons[0], &id).await.len();

    const PER_SENDER: usize = 25;
    let senders = (0..12).map(|sender| {
        let (daemons, id) = (&daemons, &id);
        async move {
            let mut acknowledged = Vec::new();
            for n in 0..PER_SENDER {
                let daemon = &daemons[(sender + n) % 3];
                let reply = custom_event(daemon, id, sender * PER_SENDER + n).await;
                assert_eq!(reply.status, 201, "{reply:?}");
                acknowledged.push(reply.body["event"]["id"].as_str().unwrap().to_owned());
            }
            acknowledged
        }
    });
    let acknowledged: Vec<String> = join_all(senders).await.into_iter().flatten().collect();

    let seen: Vec<Vec<Value>> = join_all(daemons.iter().map(|daemon| events(daemon, &id))).await;
    let total = before + 12 * PER_SENDER;
    for log in &seen {
        assert_eq!(offsets(log), (0..total as u64).collect::<Vec<_>>(), "gapless, in order");
        assert_eq!(log, &seen[0], "every daemon reads the same log");
    }
    let ids: Vec<&str> = seen[0].iter().filter_map(|event| event["id"].as_str()).collect();
    let unique: HashSet<&str> = ids.iter().copied().collect();
    assert_eq!(unique.len(), ids.len(), "no event twice");
    for id in &acknowledged {
        assert!(unique.contains(id.as_str()), "acknowledged event {id} is in the log");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_event_stream_on_one_daemon_sees_appends_through_the_others_in_order() {
    let (_cluster, url) = TestCluster::with_database();
    let [a, b, c] = three(&url);
    let id = create_conversation(&a).await;
    let start = events(&a, &id).await.len();
    let path = conversation_path(&id, "/events/stream");
    let mut stream = a.stream(Method::GET, &path, Body::None, &[]).await;
    assert_eq!(stream.status, 200);
    // The log so far first.
    for offset in 0..start {
        assert_eq!(stream.next().await.unwrap().id.as_deref(), Some(offset.to_string().as_str()));
    }
    let mut latencies = Vec::new();
    for n in 0..100 {
        let through = if n % 2 == 0 { &b } else { &c };
        let sent = Instant::now();
        let reply = custom_event(through, &id, n).await;
        assert_eq!(reply.status, 201, "{reply:?}");
        let message = stream.next().await.expect("the stream goes on");
        latencies.push(sent.elapsed());
        assert_eq!(message.id.as_deref(), Some((start + n).to_string().as_str()), "in order");
        let data: Value = serde_json::from_str(message.data.as_deref().unwrap()).unwrap();
        assert_eq!(data["id"], reply.body["event"]["id"], "the event appended through the other");
    }
    latencies.sort();
    eprintln!(
        "cross-daemon SSE delivery (append request → receipt): p50 {:?}, max {:?}",
        latencies[latencies.len() / 2],
        latencies.last().unwrap()
    );
    assert!(
        latencies[latencies.len() / 2] < Duration::from_millis(500),
        "delivered through the doorbell, not only by the safety-net poll: {latencies:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_idempotency_key_redelivered_to_another_daemon_is_applied_once() {
    let (_cluster, url) = TestCluster::with_database();
    let daemons = three(&url);
    let delivery = json!({
        "conversationId": "sms-thread-7",
        "channel": {"type": "sms", "provider": "twilio", "id": "+15550007"},
        "text": "hello",
        "idempotencyKey": "delivery-7",
    });
    let first = daemons[0].post("/api/runtime/channel-events", delivery.clone()).await;
    assert_eq!(first.status, 201, "{first:?}");
    let count = events(&daemons[0], "sms-thread-7").await.len();
    for daemon in &daemons[1..] {
        let again = daemon.post("/api/runtime/channel-events", delivery.clone()).await;
        assert_eq!(again.status, 200, "{again:?}");
        assert_eq!(again.body["duplicate"], true);
        assert_eq!(again.body["events"], first.body["events"]);
    }
    let redeliveries =
        (0..6).map(|n| daemons[n % 3].post("/api/runtime/channel-events", delivery.clone()));
    for again in join_all(redeliveries).await {
        assert_eq!(again.body["duplicate"], true, "{again:?}");
        assert_eq!(again.body["events"], first.body["events"]);
    }
    for daemon in &daemons {
        assert_eq!(events(daemon, "sms-thread-7").await.len(), count, "applied once");
    }

    // A key reused for another body is the same conflict everywhere.
    let mut reused = delivery.clone();
    reused["text"] = json!("something else");
    let answers: Vec<Reply> = join_all(
        daemons.iter().map(|daemon| daemon.post("/api/runtime/channel-events", reused.clone())),
    )
    .await;
    for answer in &answers {
        assert_eq!(
            (answer.status, &answer.body["error"]["code"]),
            (answers[0].status, &answers[0].body["error"]["code"])
        );
        assert!(answer.status >= 400, "{answer:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_memory_written_on_one_daemon_is_found_on_the_others() {
    let (_cluster, url) = TestCluster::with_database();
    let [a, b, c] = three(&url);
    let id = a
        .remember(json!({"content": "Deploy the quokkaservice with make ship.", "scope": "repo", "repo": "shop"}))
        .await;
    let found = b.get("/api/search?q=quokkaservice").await;
    assert_eq!(found.status, 200, "{found:?}");
    assert_eq!(found.body["hits"][0]["memory"]["id"], id.as_str(), "{found:?}");
    let pack =
        c.post("/api/context", json!({"task": "ship the quokkaservice", "repo": "shop"})).await;
    assert_eq!(pack.status, 200, "{pack:?}");
    assert!(pack.text.contains("quokkaservice"), "{pack:?}");

    let archived = b.delete(&format!("/api/memories/{id}")).await;
    assert_eq!(archived.status, 200, "{archived:?}");
    let gone = c.get("/api/search?q=quokkaservice").await;
    assert_eq!(gone.body["hits"], json!([]), "{gone:?}");

    // Within a second, every daemon counts the same memories.
    let deadline = Instant::now() + Duration::from_secs(1);
    loop {
        let counts: Vec<Value> = join_all([&a, &b, &c].map(|daemon| daemon.get("/api/health")))
            .await
            .into_iter()
            .map(|health| health.body["memoryCount"].clone())
            .collect();
        if counts.iter().all(|count| *count == counts[0]) {
            break;
        }
        assert!(Instant::now() < deadline, "memory counts differ after a second: {counts:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kill_9_under_load_loses_no_acknowledged_write() {
    let (_cluster, url) = TestCluster::with_database();
    // Clients write round robin; B is killed mid-way and they carry on through A and C,
    // retrying a failed request on the next daemon with the same idempotency key.
    let [a, b, c] = three(&url);
    let mut b = Some(b);
    let mut acknowledged = Vec::new();
    let started = Instant::now();
    for n in 0..300 {
        if n == 100 {
            b.take().unwrap().kill_hard();
        }
        let body = json!({
            "conversationId": format!("thread-{}", n % 5),
            "channel": {"type": "sms", "provider": "twilio", "id": format!("+1555010{}", n % 5)},
            "text": format!("message {n}"),
            "idempotencyKey": format!("load-{n}"),
        });
        let order: Vec<&Daemon> = match &b {
            Some(b) => [&a, b, &c].into_iter().cycle().skip(n % 3).take(3).collect(),
            None => [&a, &c].into_iter().cycle().skip(n % 2).take(2).collect(),
        };
        let mut answered = None;
        for daemon in order {
            let reply = tokio::time::timeout(
                Duration::from_secs(10),
                daemon.request(
                    Method::POST,
                    "/api/runtime/channel-events",
                    Body::Json(body.clone()),
                ),
            )
            .await;
            if let Ok(reply) = reply
                && reply.status < 300
            {
                answered = Some(reply);
                break;
            }
        }
        let reply = answered.unwrap_or_else(|| panic!("no daemon took delivery {n}"));
        acknowledged.push((format!("thread-{}", n % 5), format!("message {n}"), reply));
    }
    eprintln!("300 deliveries through a kill -9 in {:?}", started.elapsed());
    for daemon in [&a, &c] {
        for thread in 0..5 {
            let log = events(daemon, &format!("thread-{thread}")).await;
            assert_eq!(offsets(&log), (0..log.len() as u64).collect::<Vec<_>>(), "gapless");
            let texts: Vec<&str> = log
                .iter()
                .filter(|event| event["type"] == "message" && event["data"]["role"] == "user")
                .filter_map(|event| event["data"]["text"].as_str())
                .collect();
            for (conversation, text, _) in &acknowledged {
                if *conversation == format!("thread-{thread}") {
                    let copies = texts.iter().filter(|seen| **seen == text.as_str()).count();
                    assert_eq!(copies, 1, "{text} is in {conversation} exactly once");
                }
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_daemon_whose_database_connections_drop_recovers_by_itself() {
    let (cluster, url) = TestCluster::with_database();
    let [a, b, _c] = three(&url);
    let id = create_conversation(&a).await;
    let start = events(&a, &id).await.len();
    let path = conversation_path(&id, "/events/stream");
    let mut stream = a.stream(Method::GET, &path, Body::None, &[]).await;
    for _ in 0..start {
        stream.next().await.unwrap();
    }

    // Every session of every daemon (pools and listeners) is cut, as by a failover.
    let cut = cluster.terminate_sessions("cairn%");
    assert!(cut > 0, "the daemons had sessions to cut");
    // Generous deadlines: this is about recovering at all, on a machine that may be busy.
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut n = 0;
    loop {
        let reply = custom_event(&b, &id, n).await;
        n += 1;
        if reply.status == 201 {
            break;
        }
        assert!(Instant::now() < deadline, "B did not recover within 20 s: {reply:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // A's stream, opened before the cut, still sees what B appends after it.
    let message = stream.next().await.expect("the stream goes on");
    assert_eq!(message.id.as_deref(), Some(start.to_string().as_str()), "{message:?}");
    let reply = custom_event(&b, &id, 1000).await;
    assert_eq!(reply.status, 201, "{reply:?}");
    // Then a restart of the server itself.
    cluster.restart();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if a.get("/api/memories").await.status == 200
            && custom_event(&b, &id, 2000).await.status == 201
        {
            break;
        }
        assert!(Instant::now() < deadline, "the daemons did not recover after a restart");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let log = events(&a, &id).await;
    assert_eq!(offsets(&log), (0..log.len() as u64).collect::<Vec<_>>(), "gapless");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kill_9_with_writes_in_flight_loses_no_acknowledged_write() {
    let (_cluster, url) = TestCluster::with_database();
    let (a, b) = (daemon(&url), daemon(&url));
    let b = std::sync::Arc::new(b);
    // Eight writers send memories to B without pause; B is killed while they do.
    let mut writers = Vec::new();
    for writer in 0..8 {
        let b = b.clone();
        writers.push(tokio::spawn(async move {
            let mut acknowledged = Vec::new();
            for n in 0.. {
                let memory = json!({"content": format!("in flight {writer}-{n}"), "scope": "user"});
                match b.try_post("/api/memories", memory).await {
                    Ok(reply) if reply.status == 201 => {
                        acknowledged.push(reply.body["id"].as_str().unwrap().to_owned());
                    }
                    Ok(reply) => panic!("a write was refused: {reply:?}"),
                    Err(_) => return acknowledged,
                }
            }
            unreachable!()
        }));
    }
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    // The writers hold the daemon too; it is killed through its process id.
    let killed = Command::new("kill").args(["-KILL", &b.pid().to_string()]).status().unwrap();
    assert!(killed.success());
    let mut acknowledged = Vec::new();
    for writer in writers {
        acknowledged.extend(writer.await.unwrap());
    }
    assert!(acknowledged.len() > 20, "writes were in flight: {}", acknowledged.len());
    for id in &acknowledged {
        let found = a.get(&format!("/api/memories/{id}")).await;
        assert_eq!(found.status, 200, "acknowledged {id} was lost: {found:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sixty_four_slow_turns_on_one_daemon_all_answer() {
    use cairn_test_support::standin::{StandIn, openai};
    let (_cluster, url) = TestCluster::with_database();
    // A language model that takes three seconds to begin its answer.
    let model = StandIn::start(|_| {
        openai::chat_stream(&["Noted, ", "thank you."], Duration::ZERO)
            .delayed(Duration::from_secs(3))
    });
    let chat_url = format!("{}/v1", model.url());
    let daemon = Daemon::start_with(
        &["--database-url", &url, "--embedder", "none", "--chat-url", &chat_url],
        &[],
    );
    let mut conversations = Vec::new();
    for _ in 0..64 {
        conversations.push(create_conversation(&daemon).await);
    }
    let started = Instant::now();
    let paths: Vec<String> =
        conversations.iter().map(|id| conversation_path(id, "/messages")).collect();
    let turns = paths.iter().map(|path| daemon.post(path, json!({"message": "tell me more"})));
    for reply in join_all(turns).await {
        assert_eq!(reply.status, 200, "{reply:?}");
        assert_eq!(reply.body["text"], "Noted, thank you.", "{reply:?}");
    }
    eprintln!("64 slow turns answered in {:?}", started.elapsed());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idempotency_key_holds_across_daemons() {
    let (_cluster, url) = TestCluster::with_database();
    let (a, b) = (daemon(&url), daemon(&url));
    let memory = json!({"content": "Releases are cut on Tuesdays.", "scope": "global"});
    async fn send(daemon: &Daemon, body: Value) -> Reply {
        let body = Body::Json(body);
        daemon
            .request_with(Method::POST, "/api/memories", body, &[("idempotency-key", "rel-1")])
            .await
    }
    let first = send(&a, memory.clone()).await;
    assert_eq!(first.status, 201, "{first:?}");
    let retried = send(&b, memory).await;
    assert_eq!((retried.status, &retried.body), (201, &first.body), "{retried:?}");
    assert_eq!(retried.headers["idempotent-replayed"], "true");
    send(&b, json!({"content": "Something else.", "scope": "global"}))
        .await
        .assert_error(409, "IDEMPOTENCY_KEY_REUSED");
    assert_eq!(a.get("/api/memories").await.body["total"], 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_start_up_log_tells_the_connections_real_tls_state() {
    // The default `sslmode=prefer` against a server without TLS: plaintext, and says so.
    let (_cluster, url) = TestCluster::with_database();
    let plain = daemon(&url);
    let log = std::fs::read_to_string(plain.data_dir().join("daemon.log")).unwrap();
    let line = log.lines().find(|line| line.contains("opened the PostgreSQL store")).unwrap();
    assert!(line.contains("tls=\"plaintext\""), "{line}");

    let tls = TestCluster::start_tls();
    let url = format!("{}?sslmode=verify-full", tls.create_database());
    let ca = tls.ca_file().to_string_lossy().into_owned();
    let encrypted = Daemon::start_with(
        &["--database-url", &url, "--database-ca-file", &ca, "--embedder", "none"],
        &[],
    );
    assert_eq!(encrypted.get("/api/health/ready").await.status, 200);
    let log = std::fs::read_to_string(encrypted.data_dir().join("daemon.log")).unwrap();
    let line = log.lines().find(|line| line.contains("opened the PostgreSQL store")).unwrap();
    assert!(line.contains("tls=\"encrypted\""), "{line}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn debug_logs_on_postgres_hold_no_statement_parameters() {
    let (_cluster, url) = TestCluster::with_database();
    let daemon = Daemon::start_with(
        &["--database-url", &url, "--embedder", "none"],
        &[("RUST_LOG", "debug")],
    );
    let secret = "The vault combination is 31-4-15-92.";
    daemon.remember(json!({"content": secret, "scope": "global"})).await;
    assert_eq!(daemon.get("/api/search?q=vault").await.status, 200);
    let log = std::fs::read_to_string(daemon.data_dir().join("daemon.log")).unwrap();
    assert!(log.contains("DEBUG"), "debug lines are written");
    assert!(!log.contains("31-4-15-92"), "memory text reached the log");
}
