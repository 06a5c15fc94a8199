//! Voice segment checks: segments belong to a conversation, their socket token opens one
//! socket only and only before it expires, and a segment ends once.

use std::sync::Arc;

use cairn_types::runtime::{ChannelSegment, VOICE_CHANNEL, VoiceConnection, VoiceConnectionStatus};
use cairn_types::{Conversation, IdPrefix, Timestamp, new_id};

use super::conversations::{create, sample_conversation};
use crate::{ConversationStore, VoiceSegmentRecord};

/// Runs every voice check, each against a fresh store from `open_store`.
pub(super) async fn run_voice<F, Fut>(open_store: &mut F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Arc<dyn crate::Store>>,
{
    voice_segments_read_back_field_for_field(open_store().await).await;
    voice_segments_need_their_conversation(open_store().await).await;
    voice_tokens_open_one_socket(open_store().await).await;
    expired_voice_tokens_change_nothing(open_store().await).await;
    ended_segments_refuse_their_token(open_store().await).await;
    voice_segments_end_once(open_store().await).await;
    racing_claims_of_one_token_have_one_winner(open_store().await).await;
    deleted_conversations_take_their_segments(open_store().await).await;
}

/// The token's expiry in the samples.
pub(super) const EXPIRES_AT: i64 = 60_000;

/// A pending segment of `conversation_id`, started at 1,000, its token (hash `token_hash`)
/// good until [`EXPIRES_AT`], with every optional field given.
pub(super) fn sample_segment(conversation_id: &str, token_hash: &str) -> VoiceSegmentRecord {
    let segment_id = new_id(IdPrefix::ChannelSegment);
    VoiceSegmentRecord {
        segment: ChannelSegment {
            id: segment_id.clone(),
            conversation_id: conversation_id.to_owned(),
            channel: VOICE_CHANNEL.to_owned(),
            started_at: Timestamp::from_millis(1_000),
            ended_at: None,
        },
        connection: VoiceConnection {
            id: new_id(IdPrefix::VoiceConnection),
            channel_segment_id: segment_id,
            adapter: "websocket".to_owned(),
            status: VoiceConnectionStatus::Pending,
            provider: Some("openai".to_owned()),
            provider_session_id: Some("sess_123".to_owned()),
            expires_at: Some(Timestamp::from_millis(EXPIRES_AT)),
        },
        token_hash: token_hash.to_owned(),
        token_used_at: None,
        app: Some(serde_json::json!({"name": "kiosk", "build": 42, "flags": ["a", "b"]})),
        client: Some(serde_json::json!({
            "platform": "web",
            "audio": {"input": "mic-1", "sampleRate": 24000, "echoCancellation": true}
        })),
    }
}

/// A 64-character hex string standing for a token's sha256.
pub(super) fn hash(n: u8) -> String {
    format!("{n:02x}").repeat(32)
}

async fn stored_conversation(store: &Arc<dyn ConversationStore>) -> Conversation {
    let conversation = sample_conversation("agent-voice", 500);
    create(store, &conversation, &[]).await;
    conversation
}

async fn get(store: &Arc<dyn ConversationStore>, id: &str) -> Option<VoiceSegmentRecord> {
    store.get_voice_segment(id).await.unwrap()
}

/// `record` as a successful claim at `now` leaves it.
fn claimed(record: &VoiceSegmentRecord, now: i64) -> VoiceSegmentRecord {
    let mut claimed = record.clone();
    claimed.connection.status = VoiceConnectionStatus::Connected;
    claimed.token_used_at = Some(Timestamp::from_millis(now));
    claimed
}

/// `record` as an end at `at` leaves it.
fn ended(record: &VoiceSegmentRecord, at: i64) -> VoiceSegmentRecord {
    let mut ended = record.clone();
    ended.connection.status = VoiceConnectionStatus::Ended;
    ended.segment.ended_at = Some(Timestamp::from_millis(at));
    ended
}

async fn voice_segments_read_back_field_for_field(store: Arc<dyn ConversationStore>) {
    let conversation = stored_conversation(&store).await;
    let full = sample_segment(&conversation.id, &hash(1));
    assert!(store.create_voice_segment(&full).await.unwrap());
    assert_eq!(
        get(&store, &full.segment.id).await.as_ref(),
        Some(&full),
        "a stored segment must read back field for field, app and client JSON included"
    );

    let mut bare = sample_segment(&conversation.id, &hash(2));
    bare.connection.provider = None;
    bare.connection.provider_session_id = None;
    bare.app = None;
    bare.client = None;
    assert!(store.create_voice_segment(&bare).await.unwrap());
    assert_eq!(get(&store, &bare.segment.id).await, Some(bare), "absent fields stay absent");
    assert_eq!(get(&store, &full.segment.id).await, Some(full), "one segment leaves another be");
    assert_eq!(get(&store, "seg_missing").await, None);
}

async fn voice_segments_need_their_conversation(store: Arc<dyn ConversationStore>) {
    let mut conversation = sample_conversation("agent-voice", 500);
    let record = sample_segment(&conversation.id, &hash(3));
    assert!(
        !store.create_voice_segment(&record).await.unwrap(),
        "a segment of an unknown conversation is refused"
    );
    assert_eq!(get(&store, &record.segment.id).await, None, "and nothing is stored");
    let now = Timestamp::from_millis(2_000);
    assert_eq!(store.claim_voice_token(&record.token_hash, now).await.unwrap(), None);

    // Nothing holds the refused segment's id or token hash: once its conversation exists,
    // the same record is stored.
    conversation.id = record.segment.conversation_id.clone();
    create(&store, &conversation, &[]).await;
    assert!(store.create_voice_segment(&record).await.unwrap());
    assert_eq!(get(&store, &record.segment.id).await, Some(record));
}

async fn voice_tokens_open_one_socket(store: Arc<dyn ConversationStore>) {
    let conversation = stored_conversation(&store).await;
    let record = sample_segment(&conversation.id, &hash(4));
    assert!(store.create_voice_segment(&record).await.unwrap());

    let wrong = store.claim_voice_token(&hash(5), Timestamp::from_millis(2_000)).await.unwrap();
    assert_eq!(wrong, None, "a token hash no segment has claims nothing");
    assert_eq!(get(&store, &record.segment.id).await.as_ref(), Some(&record), "unchanged");

    let first = store.claim_voice_token(&record.token_hash, Timestamp::from_millis(2_000)).await;
    assert_eq!(first.unwrap(), Some(claimed(&record, 2_000)), "the claim returns the record now");
    assert_eq!(
        get(&store, &record.segment.id).await,
        Some(claimed(&record, 2_000)),
        "the claim is stored: token used, connection connected"
    );

    let second = store.claim_voice_token(&record.token_hash, Timestamp::from_millis(3_000)).await;
    assert_eq!(second.unwrap(), None, "a token opens one socket only");
    assert_eq!(
        get(&store, &record.segment.id).await,
        Some(claimed(&record, 2_000)),
        "a refused claim changes nothing, not even when the token was used"
    );
}

async fn expired_voice_tokens_change_nothing(store: Arc<dyn ConversationStore>) {
    let conversation = stored_conversation(&store).await;
    let record = sample_segment(&conversation.id, &hash(6));
    assert!(store.create_voice_segment(&record).await.unwrap());
    for now in [EXPIRES_AT, EXPIRES_AT + 1, EXPIRES_AT * 10] {
        let claim = store.claim_voice_token(&record.token_hash, Timestamp::from_millis(now));
        assert_eq!(claim.await.unwrap(), None, "a token is expired at {now}");
    }
    assert_eq!(
        get(&store, &record.segment.id).await.as_ref(),
        Some(&record),
        "an expired token stays pending and unused"
    );

    let mut unbounded = sample_segment(&conversation.id, &hash(7));
    unbounded.connection.expires_at = None;
    assert!(store.create_voice_segment(&unbounded).await.unwrap());
    let claim = store.claim_voice_token(&unbounded.token_hash, Timestamp::from_millis(2_000));
    assert_eq!(claim.await.unwrap(), None, "a connection without an expiry has no token");
    assert_eq!(get(&store, &unbounded.segment.id).await, Some(unbounded));

    let just_in_time = Timestamp::from_millis(EXPIRES_AT - 1);
    let claim = store.claim_voice_token(&record.token_hash, just_in_time).await.unwrap();
    assert_eq!(claim, Some(claimed(&record, EXPIRES_AT - 1)), "good until its expiry");
}

async fn ended_segments_refuse_their_token(store: Arc<dyn ConversationStore>) {
    let conversation = stored_conversation(&store).await;
    let record = sample_segment(&conversation.id, &hash(8));
    assert!(store.create_voice_segment(&record).await.unwrap());
    let end = store.end_voice_segment(&record.segment.id, Timestamp::from_millis(1_500)).await;
    assert_eq!(end.unwrap(), Some(ended(&record, 1_500)));

    let claim = store.claim_voice_token(&record.token_hash, Timestamp::from_millis(2_000)).await;
    assert_eq!(claim.unwrap(), None, "an ended segment's token opens nothing");
    assert_eq!(
        get(&store, &record.segment.id).await,
        Some(ended(&record, 1_500)),
        "the refused claim leaves the token unused and the segment ended"
    );
}

async fn voice_segments_end_once(store: Arc<dyn ConversationStore>) {
    let conversation = stored_conversation(&store).await;
    let record = sample_segment(&conversation.id, &hash(9));
    assert!(store.create_voice_segment(&record).await.unwrap());
    let connected = claimed(&record, 2_000);
    let claim = store.claim_voice_token(&record.token_hash, Timestamp::from_millis(2_000)).await;
    assert_eq!(claim.unwrap().as_ref(), Some(&connected));

    let first = store.end_voice_segment(&record.segment.id, Timestamp::from_millis(5_000)).await;
    assert_eq!(
        first.unwrap(),
        Some(ended(&connected, 5_000)),
        "the end returns the record now, its token still marked used"
    );
    let second = store.end_voice_segment(&record.segment.id, Timestamp::from_millis(6_000)).await;
    assert_eq!(second.unwrap(), None, "an end is recorded once");
    assert_eq!(
        get(&store, &record.segment.id).await,
        Some(ended(&connected, 5_000)),
        "the first end stands"
    );

    let unknown = store.end_voice_segment("seg_missing", Timestamp::from_millis(5_000)).await;
    assert_eq!(unknown.unwrap(), None);
    assert_eq!(get(&store, "seg_missing").await, None, "ending nothing stores nothing");
}

async fn racing_claims_of_one_token_have_one_winner(store: Arc<dyn ConversationStore>) {
    let conversation = stored_conversation(&store).await;
    let record = sample_segment(&conversation.id, &hash(10));
    assert!(store.create_voice_segment(&record).await.unwrap());
    let start = Arc::new(tokio::sync::Barrier::new(16));
    let mut tasks = Vec::new();
    for n in 0..16i64 {
        let (store, token_hash, start) = (store.clone(), record.token_hash.clone(), start.clone());
        tasks.push(tokio::spawn(async move {
            start.wait().await;
            let now = 2_000 + n;
            (now, store.claim_voice_token(&token_hash, Timestamp::from_millis(now)).await.unwrap())
        }));
    }
    let mut winners = Vec::new();
    for task in tasks {
        let (now, claim) = task.await.unwrap();
        if let Some(claim) = claim {
            winners.push((now, claim));
        }
    }
    assert_eq!(winners.len(), 1, "exactly one of 16 racing claims gets the token");
    let (now, claim) = winners.pop().unwrap();
    assert_eq!(claim, claimed(&record, now));
    assert_eq!(
        get(&store, &record.segment.id).await,
        Some(claimed(&record, now)),
        "the stored claim is the winner's"
    );
}

async fn deleted_conversations_take_their_segments(store: Arc<dyn ConversationStore>) {
    let conversation = stored_conversation(&store).await;
    let other = stored_conversation(&store).await;
    let first = sample_segment(&conversation.id, &hash(11));
    let second = sample_segment(&conversation.id, &hash(12));
    let kept = sample_segment(&other.id, &hash(13));
    for record in [&first, &second, &kept] {
        assert!(store.create_voice_segment(record).await.unwrap());
    }
    let deleted = store.delete_conversations(std::slice::from_ref(&conversation.id)).await;
    assert_eq!(deleted.unwrap(), std::slice::from_ref(&conversation.id));
    assert_eq!(get(&store, &first.segment.id).await, None, "a deleted conversation's segments go");
    assert_eq!(get(&store, &second.segment.id).await, None);
    let claim = store.claim_voice_token(&first.token_hash, Timestamp::from_millis(2_000)).await;
    assert_eq!(claim.unwrap(), None, "and their tokens open nothing");
    assert_eq!(get(&store, &kept.segment.id).await, Some(kept), "the other's segment stays");

    // The rows are gone, not hidden: a conversation of the same id starts without segments,
    // and the deleted segment's id and token hash can be stored again.
    create(&store, &conversation, &[]).await;
    assert_eq!(get(&store, &first.segment.id).await, None);
    assert!(store.create_voice_segment(&first).await.unwrap());
    assert_eq!(get(&store, &first.segment.id).await, Some(first));
}
