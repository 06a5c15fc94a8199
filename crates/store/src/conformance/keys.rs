//! Checks of keys: API keys, conversation tokens and idempotency keys.

use std::sync::Arc;

use cairn_types::{ApiKey, IdPrefix, Role, Timestamp, new_id};

use super::conversations::{create, sample_conversation};
use crate::Store;

/// An idempotency key is claimed once; its answer is given again for a day; another request
/// under it is refused; a claim whose answer never came lapses after its lease.
pub(super) async fn idempotency_keys_run_once_and_answer_again(store: Arc<dyn Store>) {
    use crate::{Claim, IDEMPOTENCY_LEASE_MILLIS, IDEMPOTENCY_TTL_MILLIS, StoredAnswer};
    let at = Timestamp::from_millis;
    let t0 = 1_000_000_000_000;
    let claim = |key: &'static str, fingerprint: &'static str, now: i64| {
        let store = store.clone();
        async move { store.claim_idempotency("scope-a", key, fingerprint, at(now)).await.unwrap() }
    };
    assert_eq!(claim("k1", "post /a body1", t0).await, Claim::Claimed);
    assert_eq!(claim("k1", "post /a body1", t0 + 1).await, Claim::Running);
    assert_eq!(claim("k1", "post /a body2", t0 + 1).await, Claim::Reused);
    // Keys are per scope.
    let other = store.claim_idempotency("scope-b", "k1", "x", at(t0)).await.unwrap();
    assert_eq!(other, Claim::Claimed);

    let answer = StoredAnswer {
        status: 201,
        content_type: Some("application/json".to_owned()),
        body: b"{\"id\":\"mem_1\"}".to_vec(),
    };
    store.complete_idempotency("scope-a", "k1", &answer).await.unwrap();
    // A release after the answer changes nothing.
    store.release_idempotency("scope-a", "k1").await.unwrap();
    assert_eq!(claim("k1", "post /a body1", t0 + 5).await, Claim::Replay(answer.clone()));
    assert_eq!(claim("k1", "post /a body2", t0 + 5).await, Claim::Reused);
    let day_later = t0 + IDEMPOTENCY_TTL_MILLIS;
    assert_eq!(claim("k1", "post /a body2", day_later).await, Claim::Claimed, "a day later");

    assert_eq!(claim("k2", "f", t0).await, Claim::Claimed);
    store.release_idempotency("scope-a", "k2").await.unwrap();
    assert_eq!(claim("k2", "f", t0 + 1).await, Claim::Claimed, "released: runs again");
    assert_eq!(claim("k2", "f", t0 + IDEMPOTENCY_LEASE_MILLIS - 1).await, Claim::Running);
    assert_eq!(claim("k2", "f", t0 + IDEMPOTENCY_LEASE_MILLIS + 1).await, Claim::Claimed);

    // What lapsed is purged: `scope-b`'s claim (never answered) and nothing else yet.
    let purged = store.purge_idempotency(at(t0 + IDEMPOTENCY_LEASE_MILLIS)).await.unwrap();
    assert_eq!(purged, 1);
    assert_eq!(store.purge_idempotency(at(day_later + IDEMPOTENCY_TTL_MILLIS)).await.unwrap(), 2);
}

pub(super) async fn conversation_tokens_open_until_expired_or_revoked(store: Arc<dyn Store>) {
    let token = cairn_types::ConversationTokenRecord {
        id: "tok_1".to_owned(),
        conversation_id: "conv_1".to_owned(),
        hash: "ef".repeat(32),
        created_at: Timestamp::from_millis(1_000),
        expires_at: Timestamp::from_millis(2_000),
        revoked_at: None,
    };
    assert!(
        !store.insert_conversation_token(&token).await.unwrap(),
        "no token for a conversation that does not exist"
    );
    assert_eq!(
        store.find_conversation_token(&token.hash, Timestamp::from_millis(1_500)).await.unwrap(),
        None
    );
    let conversation = sample_conversation("agent-a", 1_000);
    create(&store, &conversation, &[]).await;
    let token = cairn_types::ConversationTokenRecord { conversation_id: conversation.id, ..token };
    assert!(store.insert_conversation_token(&token).await.unwrap());
    let find = |at: i64| store.find_conversation_token(&token.hash, Timestamp::from_millis(at));
    assert_eq!(find(1_500).await.unwrap(), Some(token.clone()));
    assert_eq!(find(2_000).await.unwrap(), None, "expired at its expiry");
    assert!(store.revoke_conversation_token("tok_1", Timestamp::from_millis(1_600)).await.unwrap());
    assert_eq!(find(1_700).await.unwrap(), None, "revoked");
    assert!(
        !store.revoke_conversation_token("tok_1", Timestamp::from_millis(1_800)).await.unwrap()
    );
}

pub(super) async fn keys_are_found_by_hash_until_revoked(store: Arc<dyn Store>) {
    let key = ApiKey {
        id: new_id(IdPrefix::ApiKey),
        name: Some("ci".to_owned()),
        role: Role::Write,
        prefix: "cairn_ab12".to_owned(),
        hash: "ab".repeat(32),
        created_at: Timestamp::from_millis(1),
        revoked_at: None,
        expires_at: Some(Timestamp::from_millis(86_400_000)),
        last_used_at: None,
    };
    store.insert_key(&key).await.unwrap();
    assert_eq!(store.find_active_key(&key.hash).await.unwrap(), Some(key.clone()));
    store.mark_key_used(&key.id, Timestamp::from_millis(5)).await.unwrap();
    let used = store.find_active_key(&key.hash).await.unwrap().unwrap();
    assert_eq!(used.last_used_at, Some(Timestamp::from_millis(5)), "its last use is noted");
    let key = used;
    assert_eq!(store.find_active_key(&"cd".repeat(32)).await.unwrap(), None);
    assert_eq!(store.list_keys().await.unwrap(), vec![key.clone()]);
    assert!(store.revoke_key(&key.id, Timestamp::from_millis(2)).await.unwrap());
    assert!(
        !store.revoke_key(&key.id, Timestamp::from_millis(3)).await.unwrap(),
        "revoking twice says so"
    );
    assert_eq!(store.find_active_key(&key.hash).await.unwrap(), None, "revoked keys stop working");
    assert_eq!(store.list_keys().await.unwrap()[0].revoked_at, Some(Timestamp::from_millis(2)));
}
