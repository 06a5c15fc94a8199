//! [`cairn_store::ConversationStore`] on PostgreSQL: conversations, the event log with
//! offsets kept by a counter row, snapshots, prompts, idempotency keys and voice segments.
//!
//! A commit is one call of the `cairn_commit` function (migration 1) in autocommit: it locks
//! the conversation's row (the counter: the offset the next event gets), appends, bumps it and
//! commits in one round trip, so offsets are gapless and in commit order whichever daemons
//! append, and the row lock is held for as short as it can be.

use async_trait::async_trait;
use cairn_store::{
    ChangeListener, Commit, CommitOutcome, ConversationQuery, ConversationStore, EventRange,
    IdempotencyRecord, LockAttempt, NewEvent, PromptRecord, Result, SharedLock, StoreError,
    VoiceSegmentRecord, mentions_word, numbered_events, offset_bound, offset_from_column,
    offset_param, parse_json_column, range_bounds,
};
use cairn_types::runtime::{ChannelSegment, VoiceConnection, VoiceConnectionStatus};
use cairn_types::{
    Conversation, IdPrefix, Lifecycle, OpenPrompt, RuntimeEvent, Snapshot, Timestamp, new_id,
};
use postgres_types::ToSql;
use tokio_postgres::Row;
use tokio_postgres::error::SqlState;

use crate::rows::{Owned, first_text};
use crate::{PgStore, pg};

const CONVERSATION_COLUMNS: &str =
    "id, agent_id, channel::text, context, lifecycle, created_at, updated_at";
const EVENT_COLUMNS: &str = "id, conversation_id, event_offset, kind, created_at, data";
const PROMPT_COLUMNS: &str = "prompt_id, widget_kind, input, prompt_offset, output";
const IDEMPOTENCY_COLUMNS: &str =
    "key, conversation_id, first_offset, end_offset, created_at, fingerprint";
/// A voice segment and its connection, in the order [`voice_segment_from_row`] reads them.
const VOICE_SEGMENT_COLUMNS: &str = "id, conversation_id, channel, started_at, ended_at, \
     connection_id, adapter, status, provider, provider_session_id, expires_at, token_hash, \
     token_used_at, app, client";

/// The error `cairn_commit` raises when its idempotency key was committed meanwhile by a
/// commit to another conversation.
const KEY_TAKEN: &str = "CA001";

fn json_text(value: &impl serde::Serialize) -> String {
    serde_json::to_string(value).expect("JSON values always serialize")
}

fn offset_column(row: &Row, index: usize) -> Result<u64> {
    let value: i64 = row.get(index);
    offset_from_column(value)
}

fn lifecycle(text: &str) -> Result<Lifecycle> {
    Lifecycle::parse(text).ok_or_else(|| StoreError::Corrupt(format!("unknown lifecycle `{text}`")))
}

fn conversation_from_row(row: &Row) -> Result<Conversation> {
    let channel: Option<String> = row.get(2);
    let context: String = row.get(3);
    Ok(Conversation {
        id: row.get(0),
        agent_id: row.get(1),
        channel: channel.map(|text| parse_json_column(&text, "channel")).transpose()?,
        context: parse_json_column(&context, "context")?,
        lifecycle: lifecycle(row.get(4))?,
        created_at: Timestamp::from_millis(row.get(5)),
        updated_at: Timestamp::from_millis(row.get(6)),
    })
}

fn event_from_row(row: &Row) -> Result<RuntimeEvent> {
    let data: &str = row.get(5);
    Ok(RuntimeEvent {
        id: row.get(0),
        conversation_id: row.get(1),
        offset: offset_column(row, 2)?,
        kind: row.get(3),
        created_at: Timestamp::from_millis(row.get(4)),
        data: parse_json_column(data, "data")?,
    })
}

fn prompt_from_row(row: &Row) -> Result<PromptRecord> {
    let input: &str = row.get(2);
    let output: Option<&str> = row.get(4);
    Ok(PromptRecord {
        prompt: OpenPrompt {
            prompt_id: row.get(0),
            widget_kind: row.get(1),
            input: parse_json_column(input, "input")?,
            offset: offset_column(row, 3)?,
        },
        output: output.map(|text| parse_json_column(text, "output")).transpose()?,
    })
}

fn idempotency_from_row(row: &Row) -> Result<IdempotencyRecord> {
    Ok(IdempotencyRecord {
        key: row.get(0),
        conversation_id: row.get(1),
        first_offset: offset_column(row, 2)?,
        end_offset: offset_column(row, 3)?,
        created_at: Timestamp::from_millis(row.get(4)),
        fingerprint: row.get(5),
    })
}

fn voice_segment_from_row(row: &Row) -> Result<VoiceSegmentRecord> {
    let millis = |index: usize| row.get::<_, Option<i64>>(index).map(Timestamp::from_millis);
    let json = |index: usize, column: &str| -> Result<Option<serde_json::Value>> {
        let text: Option<&str> = row.get(index);
        text.map(|text| parse_json_column(text, column)).transpose()
    };
    let id: String = row.get(0);
    let status: &str = row.get(7);
    Ok(VoiceSegmentRecord {
        segment: ChannelSegment {
            id: id.clone(),
            conversation_id: row.get(1),
            channel: row.get(2),
            started_at: Timestamp::from_millis(row.get(3)),
            ended_at: millis(4),
        },
        connection: VoiceConnection {
            id: row.get(5),
            channel_segment_id: id,
            adapter: row.get(6),
            status: VoiceConnectionStatus::parse(status).ok_or_else(|| {
                StoreError::Corrupt(format!("unknown voice connection status `{status}`"))
            })?,
            provider: row.get(8),
            provider_session_id: row.get(9),
            expires_at: millis(10),
        },
        token_hash: row.get(11),
        token_used_at: millis(12),
        app: json(13, "app")?,
        client: json(14, "client")?,
    })
}

/// Runs a query (prepared and cached on the connection) and converts its rows.
async fn collect<T>(
    client: &deadpool_postgres::Client,
    query: &str,
    params: &[&(dyn ToSql + Sync)],
    from_row: fn(&Row) -> Result<T>,
) -> Result<Vec<T>> {
    let statement = client.prepare_cached(query).await.map_err(pg)?;
    let rows = client.query(&statement, params).await.map_err(pg)?;
    rows.iter().map(from_row).collect()
}

async fn read_idempotency(
    client: &deadpool_postgres::Client,
    key: &str,
) -> Result<Option<IdempotencyRecord>> {
    let query = format!("SELECT {IDEMPOTENCY_COLUMNS} FROM runtime_idempotency WHERE key = $1");
    Ok(collect(client, &query, &[&key], idempotency_from_row).await?.pop())
}

/// A commit as `cairn_commit`'s arguments.
struct CommitCall {
    commit: Commit,
    ids: Vec<String>,
    kinds: Vec<String>,
    data: Vec<String>,
    at_json: String,
    lifecycle: Option<String>,
    snapshot: Option<String>,
    open_ids: Vec<String>,
    open_kinds: Vec<String>,
    open_inputs: Vec<String>,
    open_index: Vec<i64>,
    close_ids: Vec<String>,
    close_outputs: Vec<String>,
    channel: String,
}

/// What `cairn_commit` answered; `None` when the key was committed meanwhile for another
/// conversation.
async fn call_commit(
    client: &deadpool_postgres::Client,
    call: &CommitCall,
) -> Result<Option<CommitOutcome>> {
    let statement = client
        .prepare_cached(
            "SELECT * FROM cairn_commit($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, \
             $14, $15, $16, $17)",
        )
        .await
        .map_err(pg)?;
    let commit = &call.commit;
    let row = client
        .query_one(
            &statement,
            &[
                &commit.conversation_id,
                &call.ids,
                &call.kinds,
                &call.data,
                &commit.at.as_millis(),
                &call.at_json,
                &call.lifecycle,
                &call.snapshot,
                &call.open_ids,
                &call.open_kinds,
                &call.open_inputs,
                &call.open_index,
                &call.close_ids,
                &call.close_outputs,
                &commit.idempotency_key,
                &commit.idempotency_fingerprint,
                &call.channel,
            ],
        )
        .await;
    let row = match row {
        Ok(row) => row,
        Err(error) if error.code() == Some(&SqlState::from_code(KEY_TAKEN)) => {
            return Ok(None);
        }
        Err(error) => return Err(pg(error)),
    };
    let outcome: &str = row.get(0);
    match outcome {
        "not_found" => Ok(Some(CommitOutcome::NotFound)),
        "duplicate" => Ok(Some(CommitOutcome::Duplicate(IdempotencyRecord {
            key: commit.idempotency_key.clone().unwrap_or_default(),
            conversation_id: row.get(8),
            first_offset: offset_column(&row, 6)?,
            end_offset: offset_column(&row, 7)?,
            created_at: Timestamp::from_millis(row.get(9)),
            fingerprint: row.get(10),
        }))),
        "committed" => {
            let channel: Option<&str> = row.get(2);
            let context: &str = row.get(3);
            let conversation = Conversation {
                id: commit.conversation_id.clone(),
                agent_id: row.get(1),
                channel: channel.map(|text| parse_json_column(text, "channel")).transpose()?,
                context: parse_json_column(context, "context")?,
                lifecycle: lifecycle(row.get(4))?,
                created_at: Timestamp::from_millis(row.get(5)),
                updated_at: commit.at,
            };
            let first_offset = offset_column(&row, 6)?;
            let events = commit.numbered(&call.ids, first_offset);
            Ok(Some(CommitOutcome::Committed { conversation, events }))
        }
        other => Err(StoreError::Corrupt(format!("cairn_commit answered `{other}`"))),
    }
}

#[async_trait]
impl ConversationStore for PgStore {
    async fn create_conversation(
        &self,
        conversation: &Conversation,
        snapshot: &Snapshot,
        events: &[NewEvent],
    ) -> Result<Option<Vec<RuntimeEvent>>> {
        let ids: Vec<String> = events.iter().map(|_| new_id(IdPrefix::Event)).collect();
        let data = (conversation.clone(), json_text(snapshot), events.to_vec(), ids);
        self.tx_with_retry(data, |store, tx, (conversation, snapshot, events, ids)| {
            Box::pin(async move {
                let insert = tx
                    .prepare_cached(
                        "INSERT INTO conversations (id, agent_id, channel, context, lifecycle, \
                         created_at, updated_at, next_offset, snapshot) \
                         VALUES ($1, $2, $3::text::jsonb, $4, $5, $6, $7, $8, $9) \
                         ON CONFLICT (id) DO NOTHING",
                    )
                    .await
                    .map_err(pg)?;
                let inserted = tx
                    .execute(
                        &insert,
                        &[
                            &conversation.id,
                            &conversation.agent_id,
                            &conversation.channel.as_ref().map(json_text),
                            &json_text(&conversation.context),
                            &conversation.lifecycle.as_str(),
                            &conversation.created_at.as_millis(),
                            &conversation.updated_at.as_millis(),
                            &offset_param(events.len() as u64)?,
                            snapshot,
                        ],
                    )
                    .await
                    .map_err(pg)?;
                if inserted == 0 {
                    return Ok(None);
                }
                if !events.is_empty() {
                    let kinds: Vec<&str> = events.iter().map(|event| event.kind.as_str()).collect();
                    let data: Vec<String> =
                        events.iter().map(|event| json_text(&event.data)).collect();
                    let append = tx
                        .prepare_cached(
                            "INSERT INTO runtime_events \
                             (conversation_id, event_offset, id, kind, created_at, data) \
                             SELECT $1, u.o - 1, u.i, u.k, $2, u.d \
                             FROM unnest($3::text[], $4::text[], $5::text[]) \
                             WITH ORDINALITY AS u(i, k, d, o)",
                        )
                        .await
                        .map_err(pg)?;
                    let at = conversation.created_at.as_millis();
                    tx.execute(&append, &[&conversation.id, &at, ids, &kinds, &data])
                        .await
                        .map_err(pg)?;
                    let payload = format!("{} {}", conversation.id, events.len());
                    tx.execute("SELECT pg_notify($1, $2)", &[&store.channels().events, &payload])
                        .await
                        .map_err(pg)?;
                }
                Ok(Some(numbered_events(&conversation.id, ids, events, 0, conversation.created_at)))
            })
        })
        .await
    }

    async fn get_conversation(&self, id: &str) -> Result<Option<Conversation>> {
        self.read(id.to_owned(), |_, client, id| {
            Box::pin(async move {
                let query =
                    format!("SELECT {CONVERSATION_COLUMNS} FROM conversations WHERE id = $1");
                Ok(collect(client, &query, &[id], conversation_from_row).await?.pop())
            })
        })
        .await
    }

    async fn list_conversations(&self, query: &ConversationQuery) -> Result<Vec<Conversation>> {
        self.read(query.clone(), |_, client, query| {
            Box::pin(async move {
                let mut conditions: Vec<String> = Vec::new();
                let mut values: Vec<Box<dyn ToSql + Sync + Send>> = Vec::new();
                let mut next = |value: Box<dyn ToSql + Sync + Send>| {
                    values.push(value);
                    format!("${}", values.len())
                };
                if let Some(agent_id) = &query.agent_id {
                    conditions.push(format!("agent_id = {}", next(Box::new(agent_id.clone()))));
                }
                for (operator, cursor) in [("<", &query.after), (">", &query.before)] {
                    if let Some(cursor) = cursor {
                        let at = next(Box::new(cursor.created_at.as_millis()));
                        let id = next(Box::new(cursor.id.clone()));
                        conditions.push(format!("(created_at, id) {operator} ({at}, {id})"));
                    }
                }
                for (operator, at) in [(">", query.updated_after), ("<", query.updated_before)] {
                    if let Some(at) = at {
                        let at = next(Box::new(at.as_millis()));
                        conditions.push(format!("updated_at {operator} {at}"));
                    }
                }
                let limit = next(Box::new(i64::from(query.limit)));
                let filter = if conditions.is_empty() {
                    String::new()
                } else {
                    format!("WHERE {}", conditions.join(" AND "))
                };
                // A page that ends before a cursor holds the conversations nearest to it: take
                // them oldest first, then turn the page around.
                let nearest_before = query.before.is_some() && query.after.is_none();
                let order = if nearest_before { "ASC" } else { "DESC" };
                let statement = format!(
                    "SELECT {CONVERSATION_COLUMNS} FROM conversations {filter} \
                     ORDER BY created_at {order}, id {order} LIMIT {limit}"
                );
                let params: Vec<&(dyn ToSql + Sync)> =
                    values.iter().map(|value| value.as_ref() as &(dyn ToSql + Sync)).collect();
                let mut page = collect(client, &statement, &params, conversation_from_row).await?;
                if nearest_before {
                    page.reverse();
                }
                Ok(page)
            })
        })
        .await
    }

    async fn delete_conversations(&self, ids: &[String]) -> Result<Vec<String>> {
        self.tx_with_retry(ids.to_vec(), |_, tx, ids| {
            Box::pin(async move {
                // The conversations' rows are locked first (in one order, so two erasures
                // cannot deadlock): a commit, which locks its conversation's row to append,
                // then lands wholly before the erasure (its events are deleted with the rest)
                // or after it (it finds no conversation), and a token minted meanwhile waits.
                tx.execute(
                    "SELECT id FROM conversations WHERE id = ANY($1) ORDER BY id FOR UPDATE",
                    &[ids],
                )
                .await
                .map_err(pg)?;
                for statement in [
                    "DELETE FROM runtime_events WHERE conversation_id = ANY($1)",
                    "DELETE FROM runtime_prompts WHERE conversation_id = ANY($1)",
                    "DELETE FROM runtime_idempotency WHERE conversation_id = ANY($1)",
                    "DELETE FROM conversation_tokens WHERE conversation_id = ANY($1)",
                    "DELETE FROM voice_segments WHERE conversation_id = ANY($1)",
                ] {
                    tx.execute(statement, &[ids]).await.map_err(pg)?;
                }
                let removed: Vec<String> = tx
                    .query("DELETE FROM conversations WHERE id = ANY($1) RETURNING id", &[ids])
                    .await
                    .map_err(pg)?
                    .iter()
                    .map(|row| row.get(0))
                    .collect();
                let mut deleted: Vec<String> = Vec::new();
                for id in ids {
                    if removed.contains(id) && !deleted.contains(id) {
                        deleted.push(id.clone());
                    }
                }
                Ok(deleted)
            })
        })
        .await
    }

    async fn conversations_with_contact(&self, kind: &str, address: &str) -> Result<Vec<String>> {
        let sql = "SELECT id FROM conversations \
                   WHERE channel->>'type' = $1 AND channel->>'id' = $2 ORDER BY created_at, id";
        let params: Owned = vec![Box::new(kind.to_owned()), Box::new(address.to_owned())];
        self.select(sql.to_owned(), params, first_text).await
    }

    async fn conversations_mentioning(&self, text: &str) -> Result<Vec<String>> {
        self.read(text.to_lowercase(), |_, client, text| {
            Box::pin(async move {
                // PostgreSQL finds candidates; only whole words count, so "Ada" is not found
                // in "Canada" or inside an id such as `msg_01kadab…`.
                let statement = client
                    .prepare_cached(
                        "SELECT conversation_id, lower(data) FROM runtime_events \
                         WHERE strpos(lower(data), $1) > 0 ORDER BY conversation_id, event_offset",
                    )
                    .await
                    .map_err(pg)?;
                let rows = client.query(&statement, &[text]).await.map_err(pg)?;
                let mut found: Vec<String> = Vec::new();
                for row in &rows {
                    let (conversation_id, data): (String, &str) = (row.get(0), row.get(1));
                    if !found.contains(&conversation_id) && mentions_word(data, text) {
                        found.push(conversation_id);
                    }
                }
                Ok(found)
            })
        })
        .await
    }

    async fn commit(&self, commit: &Commit) -> Result<CommitOutcome> {
        commit.check()?;
        let call = CommitCall {
            ids: commit.events.iter().map(|_| new_id(IdPrefix::Event)).collect(),
            kinds: commit.events.iter().map(|event| event.kind.clone()).collect(),
            data: commit.events.iter().map(|event| json_text(&event.data)).collect(),
            at_json: json_text(&commit.at),
            lifecycle: commit.lifecycle.map(|lifecycle| lifecycle.as_str().to_owned()),
            snapshot: commit.snapshot.as_ref().map(json_text),
            open_ids: commit.open_prompts.iter().map(|prompt| prompt.prompt_id.clone()).collect(),
            open_kinds: commit
                .open_prompts
                .iter()
                .map(|prompt| prompt.widget_kind.clone())
                .collect(),
            open_inputs: commit
                .open_prompts
                .iter()
                .map(|prompt| json_text(&prompt.input))
                .collect(),
            open_index: commit
                .open_prompts
                .iter()
                .map(|prompt| prompt.event_index as i64)
                .collect(),
            close_ids: commit.close_prompts.iter().map(|(id, _)| id.clone()).collect(),
            close_outputs: commit
                .close_prompts
                .iter()
                .map(|(_, output)| json_text(output))
                .collect(),
            channel: self.channels().events.clone(),
            commit: commit.clone(),
        };
        // One statement in autocommit: atomic by itself, and never repeated (a connection lost
        // after it was sent leaves unknown whether it committed; callers retry with a key).
        self.call(call, |_, client, call| {
            Box::pin(async move {
                match call_commit(client, call).await? {
                    Some(outcome) => Ok(outcome),
                    None => {
                        // Another daemon committed the key first, for another conversation:
                        // the first use wins everywhere.
                        let key = call.commit.idempotency_key.as_deref().unwrap_or_default();
                        match read_idempotency(client, key).await? {
                            Some(record) => Ok(CommitOutcome::Duplicate(record)),
                            None => Err(StoreError::Corrupt(format!(
                                "idempotency key `{key}` was taken, yet it is not stored"
                            ))),
                        }
                    }
                }
            })
        })
        .await
    }

    async fn list_events(
        &self,
        conversation_id: &str,
        after_offset: Option<u64>,
        limit: u32,
    ) -> Result<Vec<RuntimeEvent>> {
        let after = after_offset.map_or(-1, offset_bound);
        let data = (conversation_id.to_owned(), after, i64::from(limit));
        self.read(data, |_, client, (conversation_id, after, limit)| {
            Box::pin(async move {
                let query = format!(
                    "SELECT {EVENT_COLUMNS} FROM runtime_events \
                     WHERE conversation_id = $1 AND event_offset > $2 \
                     ORDER BY event_offset LIMIT $3"
                );
                collect(client, &query, &[conversation_id, after, limit], event_from_row).await
            })
        })
        .await
    }

    async fn read_events(
        &self,
        conversation_id: &str,
        range: &EventRange,
    ) -> Result<Vec<RuntimeEvent>> {
        let (after, before) = range_bounds(range);
        let data = (conversation_id.to_owned(), after, before, range.clone());
        self.read(data, |_, client, (conversation_id, after, before, range)| {
            Box::pin(async move {
                let order = if range.newest { "DESC" } else { "ASC" };
                let limit = i64::from(range.limit);
                let mut params: Vec<&(dyn ToSql + Sync)> =
                    vec![conversation_id, after, before, &limit];
                let kind = match &range.kind {
                    Some(kind) => {
                        params.push(kind);
                        "AND kind = $5"
                    }
                    None => "",
                };
                let query = format!(
                    "SELECT {EVENT_COLUMNS} FROM runtime_events \
                     WHERE conversation_id = $1 AND event_offset > $2 AND event_offset < $3 \
                     {kind} ORDER BY event_offset {order} LIMIT $4"
                );
                let mut events = collect(client, &query, &params, event_from_row).await?;
                if range.newest {
                    events.reverse();
                }
                Ok(events)
            })
        })
        .await
    }

    async fn count_events(&self, conversation_id: &str, range: &EventRange) -> Result<u64> {
        let (after, before) = range_bounds(range);
        let data = (conversation_id.to_owned(), after, before, range.kind.clone());
        self.read(data, |_, client, (conversation_id, after, before, kind)| {
            Box::pin(async move {
                let mut params: Vec<&(dyn ToSql + Sync)> = vec![conversation_id, after, before];
                let kind = match kind {
                    Some(kind) => {
                        params.push(kind);
                        "AND kind = $4"
                    }
                    None => "",
                };
                let query = format!(
                    "SELECT count(*) FROM runtime_events \
                     WHERE conversation_id = $1 AND event_offset > $2 AND event_offset < $3 {kind}"
                );
                let statement = client.prepare_cached(&query).await.map_err(pg)?;
                let count: i64 = client.query_one(&statement, &params).await.map_err(pg)?.get(0);
                Ok(u64::try_from(count).unwrap_or_default())
            })
        })
        .await
    }

    async fn get_event(
        &self,
        conversation_id: &str,
        event_id: &str,
    ) -> Result<Option<RuntimeEvent>> {
        let data = (conversation_id.to_owned(), event_id.to_owned());
        self.read(data, |_, client, (conversation_id, event_id)| {
            Box::pin(async move {
                let query = format!(
                    "SELECT {EVENT_COLUMNS} FROM runtime_events \
                     WHERE id = $2 AND conversation_id = $1 LIMIT 1"
                );
                Ok(collect(client, &query, &[conversation_id, event_id], event_from_row)
                    .await?
                    .pop())
            })
        })
        .await
    }

    async fn events_between(
        &self,
        conversation_id: &str,
        from: u64,
        to: u64,
    ) -> Result<Vec<RuntimeEvent>> {
        let data = (conversation_id.to_owned(), offset_bound(from), offset_bound(to));
        self.read(data, |_, client, (conversation_id, from, to)| {
            Box::pin(async move {
                let query = format!(
                    "SELECT {EVENT_COLUMNS} FROM runtime_events \
                     WHERE conversation_id = $1 AND event_offset >= $2 AND event_offset < $3 \
                     ORDER BY event_offset"
                );
                collect(client, &query, &[conversation_id, from, to], event_from_row).await
            })
        })
        .await
    }

    async fn get_snapshot(&self, conversation_id: &str) -> Result<Option<Snapshot>> {
        self.read(conversation_id.to_owned(), |_, client, id| {
            Box::pin(async move {
                let statement = client
                    .prepare_cached("SELECT snapshot FROM conversations WHERE id = $1")
                    .await
                    .map_err(pg)?;
                let row = client.query_opt(&statement, &[id]).await.map_err(pg)?;
                row.map(|row| parse_json_column(row.get(0), "snapshot")).transpose()
            })
        })
        .await
    }

    async fn open_prompts(
        &self,
        conversation_id: &str,
        after: Option<u64>,
        before: Option<u64>,
        limit: u32,
    ) -> Result<Vec<OpenPrompt>> {
        let range = EventRange { after, before, ..EventRange::default() };
        let (after, before) = range_bounds(&range);
        let data = (conversation_id.to_owned(), after, before, i64::from(limit));
        self.read(data, |_, client, (conversation_id, after, before, limit)| {
            Box::pin(async move {
                let query = format!(
                    "SELECT {PROMPT_COLUMNS} FROM runtime_prompts \
                     WHERE conversation_id = $1 AND output IS NULL \
                     AND prompt_offset > $2 AND prompt_offset < $3 \
                     ORDER BY prompt_offset, prompt_id LIMIT $4"
                );
                let params: [&(dyn ToSql + Sync); 4] = [conversation_id, after, before, limit];
                let records = collect(client, &query, &params, prompt_from_row).await?;
                Ok(records.into_iter().map(|record| record.prompt).collect())
            })
        })
        .await
    }

    async fn get_prompt(
        &self,
        conversation_id: &str,
        prompt_id: &str,
    ) -> Result<Option<PromptRecord>> {
        let data = (conversation_id.to_owned(), prompt_id.to_owned());
        self.read(data, |_, client, (conversation_id, prompt_id)| {
            Box::pin(async move {
                let query = format!(
                    "SELECT {PROMPT_COLUMNS} FROM runtime_prompts \
                     WHERE conversation_id = $1 AND prompt_id = $2"
                );
                Ok(collect(client, &query, &[conversation_id, prompt_id], prompt_from_row)
                    .await?
                    .pop())
            })
        })
        .await
    }

    async fn find_idempotency(&self, key: &str) -> Result<Option<IdempotencyRecord>> {
        self.read(key.to_owned(), |_, client, key| {
            Box::pin(async move { read_idempotency(client, key).await })
        })
        .await
    }

    async fn create_voice_segment(&self, record: &VoiceSegmentRecord) -> Result<bool> {
        if record.connection.channel_segment_id != record.segment.id {
            let message = format!(
                "connection {} belongs to segment {}, not {}",
                record.connection.id, record.connection.channel_segment_id, record.segment.id
            );
            return Err(StoreError::Backend(message.into()));
        }
        self.call(record.clone(), |_, client, record| {
            Box::pin(async move {
                // Inserts only when the conversation exists: no row otherwise.
                let statement = client
                    .prepare_cached(&format!(
                        "INSERT INTO voice_segments ({VOICE_SEGMENT_COLUMNS}) \
                         SELECT $1::text, $2::text, $3::text, $4::bigint, $5::bigint, $6::text, \
                         $7::text, $8::text, $9::text, $10::text, $11::bigint, $12::text, \
                         $13::bigint, $14::text, $15::text \
                         FROM conversations WHERE id = $2"
                    ))
                    .await
                    .map_err(pg)?;
                let inserted = client
                    .execute(
                        &statement,
                        &[
                            &record.segment.id,
                            &record.segment.conversation_id,
                            &record.segment.channel,
                            &record.segment.started_at.as_millis(),
                            &record.segment.ended_at.map(Timestamp::as_millis),
                            &record.connection.id,
                            &record.connection.adapter,
                            &record.connection.status.as_str(),
                            &record.connection.provider,
                            &record.connection.provider_session_id,
                            &record.connection.expires_at.map(Timestamp::as_millis),
                            &record.token_hash,
                            &record.token_used_at.map(Timestamp::as_millis),
                            &record.app.as_ref().map(json_text),
                            &record.client.as_ref().map(json_text),
                        ],
                    )
                    .await
                    .map_err(pg)?;
                Ok(inserted > 0)
            })
        })
        .await
    }

    async fn claim_voice_token(
        &self,
        token_hash: &str,
        now: Timestamp,
    ) -> Result<Option<VoiceSegmentRecord>> {
        // One statement: of racing claims (on any daemon), the first to lock the row marks
        // the token used; the others wait for it, re-check the row as it now is, and change
        // nothing. A connection without `expires_at` has no token to claim.
        self.call((token_hash.to_owned(), now.as_millis()), |_, client, (hash, now)| {
            Box::pin(async move {
                let query = format!(
                    "UPDATE voice_segments SET token_used_at = $2, status = 'connected' \
                     WHERE token_hash = $1 AND token_used_at IS NULL AND ended_at IS NULL \
                     AND $2 < expires_at RETURNING {VOICE_SEGMENT_COLUMNS}"
                );
                Ok(collect(client, &query, &[hash, now], voice_segment_from_row).await?.pop())
            })
        })
        .await
    }

    async fn end_voice_segment(
        &self,
        segment_id: &str,
        at: Timestamp,
    ) -> Result<Option<VoiceSegmentRecord>> {
        self.call((segment_id.to_owned(), at.as_millis()), |_, client, (id, at)| {
            Box::pin(async move {
                let query = format!(
                    "UPDATE voice_segments SET ended_at = $2, status = 'ended' \
                     WHERE id = $1 AND ended_at IS NULL RETURNING {VOICE_SEGMENT_COLUMNS}"
                );
                Ok(collect(client, &query, &[id, at], voice_segment_from_row).await?.pop())
            })
        })
        .await
    }

    async fn get_voice_segment(&self, segment_id: &str) -> Result<Option<VoiceSegmentRecord>> {
        self.read(segment_id.to_owned(), |_, client, id| {
            Box::pin(async move {
                let query =
                    format!("SELECT {VOICE_SEGMENT_COLUMNS} FROM voice_segments WHERE id = $1");
                Ok(collect(client, &query, &[id], voice_segment_from_row).await?.pop())
            })
        })
        .await
    }

    async fn lock(&self, name: &str) -> Result<Option<SharedLock>> {
        crate::locks::lock(self, name).await.map(Some)
    }

    async fn try_lock(&self, name: &str) -> Result<LockAttempt> {
        crate::locks::try_lock(self, name).await
    }

    fn listen(&self, listener: ChangeListener) {
        self.feed().add(listener);
    }
}
