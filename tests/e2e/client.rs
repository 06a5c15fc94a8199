//! `cairn-client` against the real daemon: every memory route, the runtime's operations, a
//! streamed reply, errors as the service said them, and an event stream that survives a
//! daemon restart without repeating or skipping an offset.

use std::time::Duration;

use cairn_client::types::runtime::*;
use cairn_client::types::{
    AuditQuery, ConflictQuery, ContextRequest, DreamRequest, EvidencePackRequest, GuardRequest,
    MemoryListQuery, MemoryPatch, NewMemory, OutcomeRequest, PatchEvidenceRequest, Scope,
    SearchQuery, Status,
};
use cairn_client::{Client, ClientOptions, Error};

use crate::util::{Daemon, create_key, unused_url};

fn client(daemon: &Daemon) -> Client {
    Client::new(ClientOptions::new(daemon.base_url())).unwrap()
}

fn memory(content: &str, repo: &str) -> NewMemory {
    NewMemory {
        content: content.into(),
        scope: Scope::Repo,
        repo: Some(repo.into()),
        tags: vec!["tooling".into()],
        source: None,
        metadata: Default::default(),
    }
}

#[tokio::test]
async fn every_memory_route_round_trips_through_the_client() {
    let daemon = Daemon::start();
    let client = client(&daemon);

    let created =
        client.create_memory(&memory("Use pnpm, not npm, in this repo.", "shop")).await.unwrap();
    assert!(created.id.starts_with("mem_"));
    assert_eq!(client.get_memory(&created.id).await.unwrap().content, created.content);
    let list = client
        .list_memories(&MemoryListQuery { repo: Some("shop".into()), ..Default::default() })
        .await
        .unwrap();
    assert_eq!((list.total, list.memories[0].id.as_str()), (1, created.id.as_str()));

    let patch = MemoryPatch { tags: Some(vec!["pnpm".into()]), ..Default::default() };
    assert_eq!(client.update_memory(&created.id, &patch).await.unwrap().tags, ["pnpm"]);
    assert!(client.archive_memory(&created.id).await.unwrap().archived_at.is_some());
    assert!(client.restore_memory(&created.id).await.unwrap().archived_at.is_none());

    let search = SearchQuery { q: Some("pnpm".into()), ..Default::default() };
    assert_eq!(client.search(&search).await.unwrap().hits[0].memory.id, created.id);
    let task = ContextRequest {
        task: "install dependencies with pnpm".into(),
        repo: Some("shop".into()),
        token_budget: Some(500),
    };
    let pack = client.context(&task).await.unwrap();
    assert_eq!(pack.memory_ids, std::slice::from_ref(&created.id));
    assert!(pack.context.contains("pnpm"));

    let blocked =
        client.guard(&GuardRequest { action: "rm -rf /".into(), repo: None }).await.unwrap();
    assert!(!blocked.allowed);
    let outcome = OutcomeRequest {
        command: "make deploy".into(),
        exit_code: 2,
        task: None,
        repo: Some("shop".into()),
    };
    assert!(client.record_outcome(&outcome).await.unwrap().outcome_id.starts_with("out_"));
    let again = client
        .guard(&GuardRequest { action: "make deploy".into(), repo: Some("shop".into()) })
        .await
        .unwrap();
    assert!(!again.warnings.is_empty(), "{again:?}");

    let evidence = PatchEvidenceRequest {
        task: "switch to pnpm".into(),
        files: vec!["package.json".into()],
        commands: vec!["pnpm test".into()],
    };
    let recorded = client.record_patch_evidence(&evidence).await.unwrap();
    assert_eq!(client.get_evidence(&recorded.evidence_id).await.unwrap(), recorded);
    let pack_request = EvidencePackRequest { task: "switch to pnpm".into(), format: None };
    assert_eq!(client.evidence_pack(&pack_request).await.unwrap().evidence, [recorded]);
    assert!(client.evidence_pack_markdown(&pack_request).await.unwrap().starts_with('#'));

    assert_eq!(client.review_queue(Some(10), None).await.unwrap().total, 0);
    let audit = client
        .audit_log(&AuditQuery { memory_id: Some(created.id.clone()), ..Default::default() })
        .await
        .unwrap();
    assert!(audit.entries.len() >= 4, "{audit:?}");
    assert!(client.list_connectors().await.unwrap().connectors.is_empty());
    let dream =
        client.dream_cycle(&DreamRequest { dry_run: true, ..Default::default() }).await.unwrap();
    assert!(dream.dry_run);
    assert!(client.list_conflicts(&ConflictQuery::default()).await.unwrap().conflicts.is_empty());
    assert_eq!(client.health().await.unwrap().memory_count, 1);

    let review = client
        .update_memory(
            &created.id,
            &MemoryPatch { status: Some(Status::Review), ..Default::default() },
        )
        .await
        .unwrap();
    assert_eq!(review.status, Status::Review);
    assert_eq!(client.approve(&created.id).await.unwrap().status, Status::Active);
}

#[tokio::test]
async fn errors_carry_what_the_service_said_and_transport_failures_are_apart() {
    let daemon = Daemon::start();
    let client = client(&daemon);

    let missing = client.get_memory("mem_nope").await.unwrap_err();
    let api = missing.api().expect("an API error");
    assert_eq!((api.status, api.code.as_str()), (404, "MEMORY_NOT_FOUND"));
    assert_eq!(api.body["error"]["status"], 404);
    assert!(api.message.contains("mem_nope"), "{api:?}");

    let empty = client.create_memory(&memory("", "shop")).await.unwrap_err();
    assert_eq!((empty.status(), empty.code()), (Some(422), Some("VALIDATION_ERROR")));
    assert_eq!(client.health().await.unwrap().memory_count, 0);

    let closed = unused_url();
    let nowhere = Client::new(ClientOptions::new(&closed)).unwrap();
    let error = nowhere.health().await.unwrap_err();
    assert!(matches!(error, Error::Transport { .. }), "{error:?}");
    assert!(error.to_string().contains(&closed), "{error}");
    assert!(Client::new(ClientOptions::new("localhost:8787")).is_err());
}

#[tokio::test]
async fn credentials_go_with_every_request() {
    let directory = tempfile::tempdir().unwrap();
    let key = create_key(directory.path(), "write");
    let daemon = Daemon::start_in_with(directory.path(), &["--profile", "production"], &[]);

    let anonymous = client(&daemon).health().await.unwrap_err();
    assert_eq!(anonymous.code(), Some("UNAUTHORIZED"));
    let keyed = Client::new(ClientOptions::new(daemon.base_url()).api_key(&key)).unwrap();
    keyed.create_memory(&memory("Deploys go through CI.", "shop")).await.unwrap();
    let conversation = keyed.create_conversation(&Default::default()).await.unwrap();
    let mut events = keyed.stream_events(&conversation.id, None);
    let first = tokio::time::timeout(Duration::from_secs(5), events.next()).await.unwrap();
    assert_eq!(first.unwrap().unwrap().offset, 0);
}

#[tokio::test]
async fn runtime_operations_round_trip_through_the_client() {
    let daemon = Daemon::start();
    let client = client(&daemon);

    let conversation = client
        .create_conversation(&CreateConversationInput {
            channel: Some("web".into()),
            ..Default::default()
        })
        .await
        .unwrap();
    assert!(conversation.id.starts_with("conv_"));
    let listed = client.list_conversations(&ListConversationsInput::default()).await.unwrap();
    assert_eq!(listed.conversations[0].id, conversation.id);

    let hello = SendMessageBody { message: "hello".into(), ..Default::default() };
    let reply = client.send_message(&conversation.id, &hello).await.unwrap();
    assert!(!reply.text.is_empty());
    let mut streamed = String::new();
    let demo =
        SendMessageBody { message: "I would like to book a demo".into(), ..Default::default() };
    let result = client
        .send_message_streaming(&conversation.id, &demo, |delta| streamed.push_str(delta))
        .await
        .unwrap();
    assert_eq!(streamed, result.text);
    assert_eq!(result.active_journey_id.as_deref(), Some("book_demo"));

    let events = client.list_events(&conversation.id, None).await.unwrap();
    let offsets: Vec<u64> = events.iter().map(|event| event.offset).collect();
    assert_eq!(offsets, (0..events.len() as u64).collect::<Vec<_>>());
    assert_eq!(client.list_events(&conversation.id, Some(2)).await.unwrap()[0].offset, 3);

    let replay = client.replay_conversation(&conversation.id, &Default::default()).await.unwrap();
    assert_eq!(replay.messages.first().map(|m| m.text.as_str()), Some("hello"));
    assert_eq!(replay.open_prompts.len(), 1, "{replay:?}");
    let prompt = &replay.open_prompts[0];
    let snapshot = client.get_snapshot(&conversation.id).await.unwrap();
    assert_eq!(snapshot.active_journey_id.as_deref(), Some("book_demo"));

    let intermediate =
        IntermediateMessageBody { text: "one moment".into(), visible_to_model: None };
    assert_eq!(
        client
            .emit_intermediate_message(&conversation.id, &intermediate)
            .await
            .unwrap()
            .events
            .len(),
        1
    );
    let preamble =
        client.emit_generated_preamble(&conversation.id, &PreambleBody::default()).await.unwrap();
    assert!(!preamble.text.is_empty());
    let widget = SubmitWidgetBody {
        prompt_id: prompt.prompt_id.clone(),
        widget_kind: prompt.widget_kind.clone(),
        output: serde_json::json!({"name": "Ada", "email": "ada@example.com", "company": "Analytical"}),
    };
    assert_eq!(
        client.submit_widget(&conversation.id, &widget).await.unwrap().event.kind,
        "prompt.submitted"
    );
    let viewed = |payload| CustomEventBody { event_name: "page.viewed".into(), payload };
    let recorded = client
        .emit_custom_event(&conversation.id, &viewed(serde_json::json!({"url": "/pricing"})))
        .await
        .unwrap();
    assert_eq!(recorded.event.data["payload"]["url"], "/pricing", "{:?}", recorded.event);
    let refused = client
        .emit_custom_event(&conversation.id, &viewed(serde_json::json!({"path": "/pricing"})))
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Some("VALIDATION_ERROR"));
    let compacted =
        client.compact_conversation(&conversation.id, &CompactBody::default()).await.unwrap();
    assert!(compacted.snapshot.compaction_summary.is_some());

    let handoff = HandoffBody { reason: "billing question".into(), summary: None, payload: None };
    assert_eq!(
        client.request_handoff(&conversation.id, &handoff).await.unwrap().conversation.lifecycle,
        Lifecycle::Handoff
    );
    let resumed =
        client.resume_conversation(&conversation.id, &ResumeBody::default()).await.unwrap();
    assert_eq!(resumed.conversation.lifecycle, Lifecycle::Active);
    let closed = client.close_conversation(&conversation.id, Some("done".into())).await.unwrap();
    assert_eq!(closed.lifecycle, Lifecycle::Closed);
    let refused = client.send_message(&conversation.id, &hello).await.unwrap_err();
    assert_eq!((refused.status(), refused.code()), (Some(409), Some("CONVERSATION_CLOSED")));

    // The channel-event builders, applied once per idempotency key.
    let sms = ChannelEventInput::message("sms", "hi there").with_idempotency_key("sms-1");
    let first = client.receive_message(sms.clone()).await.unwrap();
    assert!(first.created && !first.duplicate);
    let again = client.receive_message(sms).await.unwrap();
    assert!(again.duplicate);
    assert_eq!(again.conversation.id, first.conversation.id);
    let receipt =
        ChannelEventInput::provider_object("sms", "twilio", serde_json::json!({"sid": "SM1"}))
            .in_conversation(first.conversation.id.clone());
    client.record_provider_update(receipt).await.unwrap();
    // Voice starts typed: the socket URL carries its single-use token.
    let input = cairn_types::runtime::StartVoiceConversationInput::default();
    let voice = client.start_voice_conversation(&input).await.unwrap();
    assert!(voice.socket.url.ends_with(&format!("token={}", voice.socket.token)));
    assert_eq!(voice.channel_segment.conversation_id, voice.conversation.id);
    let segment = cairn_types::runtime::StartVoiceSegmentInput::default();
    let again = client.start_voice_segment(&voice.conversation.id, &segment).await.unwrap();
    assert_ne!(again.socket.token, voice.socket.token);
    let missing = client.start_voice_segment("conv_nope", &segment).await.unwrap_err();
    assert_eq!(missing.status(), Some(404));
}

/// A free port to start daemons on, so a restarted daemon is at the same URL.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

#[tokio::test]
async fn event_streams_resume_across_a_restart_without_repeats_or_gaps() {
    let directory = tempfile::tempdir().unwrap();
    let port = free_port().to_string();
    let daemon = Daemon::start_in_with(directory.path(), &["--port", &port], &[]);
    let first = client(&daemon);
    let conversation = first.create_conversation(&Default::default()).await.unwrap();
    let hello = SendMessageBody { message: "hello".into(), ..Default::default() };
    first.send_message(&conversation.id, &hello).await.unwrap();

    let mut stream = first.stream_events(&conversation.id, None);
    let mut seen = Vec::new();
    let next = async |stream: &mut cairn_client::EventStream| {
        tokio::time::timeout(Duration::from_secs(10), stream.next())
            .await
            .unwrap()
            .unwrap()
            .unwrap()
    };
    let before = first.list_events(&conversation.id, None).await.unwrap().len();
    while seen.len() < before {
        seen.push(next(&mut stream).await.offset);
    }

    // The daemon goes away and comes back; meanwhile the log grows.
    assert!(daemon.terminate().success());
    let daemon = Daemon::start_in_with(directory.path(), &["--port", &port], &[]);
    let again = client(&daemon);
    again.send_message(&conversation.id, &hello).await.unwrap();
    let after = again.list_events(&conversation.id, None).await.unwrap().len();
    while seen.len() < after {
        seen.push(next(&mut stream).await.offset);
    }
    assert_eq!(seen, (0..after as u64).collect::<Vec<_>>());

    // An unknown conversation ends the stream with the service's error.
    let mut unknown = again.stream_events("conv_nope", None);
    let error =
        tokio::time::timeout(Duration::from_secs(5), unknown.next()).await.unwrap().unwrap();
    assert_eq!(error.unwrap_err().code(), Some("CONVERSATION_NOT_FOUND"));
    assert!(unknown.next().await.is_none());
}

#[tokio::test]
async fn a_write_sent_while_the_daemon_starts_is_retried_and_stored_once() {
    let url = unused_url();
    let port = url.rsplit(':').next().unwrap().to_owned();
    let options = ClientOptions::new(&url).retries(8);
    let client = Client::new(options).unwrap();
    let write = tokio::spawn(async move {
        client.create_memory(&memory("Retries carry one Idempotency-Key.", "shop")).await
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let daemon = Daemon::start_with(&["--port", &port], &[]);
    let created = write.await.unwrap().expect("retried until the daemon answered");
    let listed = daemon.get("/api/memories").await;
    assert_eq!(listed.body["total"], 1);
    assert_eq!(listed.body["memories"][0]["id"], created.id.as_str());

    // Refused at once when told not to retry.
    let once = Client::new(ClientOptions::new(unused_url()).retries(0)).unwrap();
    let started = std::time::Instant::now();
    assert!(matches!(once.health().await, Err(Error::Transport { .. })));
    assert!(started.elapsed() < Duration::from_millis(150));
}
