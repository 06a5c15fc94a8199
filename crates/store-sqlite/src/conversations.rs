//! The conversation runtime's records in SQLite: conversations, their event log, prompts,
//! idempotency keys and voice segments.
//!
//! Offsets come from the conversation's `next_offset`, read and bumped inside the commit's
//! transaction; the single writer connection runs commits one at a time, so offsets never
//! repeat or skip.

use async_trait::async_trait;
use cairn_store::{
    Commit, CommitOutcome, ConversationQuery, ConversationStore, EventRange, IdempotencyRecord,
    NewEvent, PromptRecord, Result, StoreError, VoiceSegmentRecord, mentions_word, numbered_events,
    offset_bound, offset_from_column, offset_param, parse_json_column, range_bounds,
};
use cairn_types::runtime::{ChannelSegment, VoiceConnection, VoiceConnectionStatus};
use cairn_types::{
    Conversation, IdPrefix, Lifecycle, OpenPrompt, RuntimeEvent, Snapshot, Timestamp, new_id,
};
use rusqlite::types::Value;
use rusqlite::{Connection, OptionalExtension, Row, Transaction, params, params_from_iter};

use crate::rows::json_text;
use crate::{SqliteStore, sql};

const CONVERSATION_COLUMNS: &str =
    "id, agent_id, channel, context, lifecycle, created_at, updated_at";
const EVENT_COLUMNS: &str = "id, conversation_id, offset, kind, created_at, data";
const PROMPT_COLUMNS: &str = "prompt_id, widget_kind, input, offset, output";
const IDEMPOTENCY_COLUMNS: &str =
    "key, conversation_id, first_offset, end_offset, created_at, fingerprint";
/// A voice segment and its connection, in the order [`voice_segment_from_row`] reads them.
const VOICE_SEGMENT_COLUMNS: &str = "id, conversation_id, channel, started_at, ended_at, \
     connection_id, adapter, status, provider, provider_session_id, expires_at, token_hash, \
     token_used_at, app, client";

fn offset_column(row: &Row<'_>, index: usize) -> Result<u64> {
    let value: i64 = row.get(index).map_err(sql)?;
    offset_from_column(value)
}

/// The statement of `read_events`: the primary key (conversation_id, offset) walks the
/// range from the end the limit keeps, and stops once it has `limit` rows.
fn read_events_query(newest: bool) -> String {
    let order = if newest { "DESC" } else { "ASC" };
    format!(
        "SELECT {EVENT_COLUMNS} FROM runtime_events \
         WHERE conversation_id = ?1 AND offset > ?2 AND offset < ?3 \
         AND (?4 IS NULL OR kind = ?4) ORDER BY offset {order} LIMIT ?5"
    )
}

/// The statement of `get_event`: walks the conversation's log back from its newest event
/// and stops at the match, inside SQLite (no other row leaves it), so the events asked
/// about, outputs just delivered, are found after a few rows.
fn get_event_query() -> String {
    format!(
        "SELECT {EVENT_COLUMNS} FROM runtime_events \
         WHERE conversation_id = ?1 AND id = ?2 ORDER BY offset DESC LIMIT 1"
    )
}

fn conversation_from_row(row: &Row<'_>) -> Result<Conversation> {
    let channel: Option<String> = row.get(2).map_err(sql)?;
    let context: String = row.get(3).map_err(sql)?;
    let lifecycle: String = row.get(4).map_err(sql)?;
    Ok(Conversation {
        id: row.get(0).map_err(sql)?,
        agent_id: row.get(1).map_err(sql)?,
        channel: channel.map(|text| parse_json_column(&text, "channel")).transpose()?,
        context: parse_json_column(&context, "context")?,
        lifecycle: Lifecycle::parse(&lifecycle)
            .ok_or_else(|| StoreError::Corrupt(format!("unknown lifecycle `{lifecycle}`")))?,
        created_at: Timestamp::from_millis(row.get(5).map_err(sql)?),
        updated_at: Timestamp::from_millis(row.get(6).map_err(sql)?),
    })
}

fn event_from_row(row: &Row<'_>) -> Result<RuntimeEvent> {
    let data: String = row.get(5).map_err(sql)?;
    Ok(RuntimeEvent {
        id: row.get(0).map_err(sql)?,
        conversation_id: row.get(1).map_err(sql)?,
        offset: offset_column(row, 2)?,
        kind: row.get(3).map_err(sql)?,
        created_at: Timestamp::from_millis(row.get(4).map_err(sql)?),
        data: parse_json_column(&data, "data")?,
    })
}

fn prompt_from_row(row: &Row<'_>) -> Result<PromptRecord> {
    let input: String = row.get(2).map_err(sql)?;
    let output: Option<String> = row.get(4).map_err(sql)?;
    Ok(PromptRecord {
        prompt: OpenPrompt {
            prompt_id: row.get(0).map_err(sql)?,
            widget_kind: row.get(1).map_err(sql)?,
            input: parse_json_column(&input, "input")?,
            offset: offset_column(row, 3)?,
        },
        output: output.map(|text| parse_json_column(&text, "output")).transpose()?,
    })
}

fn idempotency_from_row(row: &Row<'_>) -> Result<IdempotencyRecord> {
    Ok(IdempotencyRecord {
        key: row.get(0).map_err(sql)?,
        conversation_id: row.get(1).map_err(sql)?,
        first_offset: offset_column(row, 2)?,
        end_offset: offset_column(row, 3)?,
        created_at: Timestamp::from_millis(row.get(4).map_err(sql)?),
        fingerprint: row.get(5).map_err(sql)?,
    })
}

fn voice_segment_from_row(row: &Row<'_>) -> Result<VoiceSegmentRecord> {
    let millis = |index: usize| -> Result<Option<Timestamp>> {
        Ok(row.get::<_, Option<i64>>(index).map_err(sql)?.map(Timestamp::from_millis))
    };
    let json = |index: usize, column: &str| -> Result<Option<serde_json::Value>> {
        let text: Option<String> = row.get(index).map_err(sql)?;
        text.map(|text| parse_json_column(&text, column)).transpose()
    };
    let id: String = row.get(0).map_err(sql)?;
    let status: String = row.get(7).map_err(sql)?;
    Ok(VoiceSegmentRecord {
        segment: ChannelSegment {
            id: id.clone(),
            conversation_id: row.get(1).map_err(sql)?,
            channel: row.get(2).map_err(sql)?,
            started_at: Timestamp::from_millis(row.get(3).map_err(sql)?),
            ended_at: millis(4)?,
        },
        connection: VoiceConnection {
            id: row.get(5).map_err(sql)?,
            channel_segment_id: id,
            adapter: row.get(6).map_err(sql)?,
            status: VoiceConnectionStatus::parse(&status).ok_or_else(|| {
                StoreError::Corrupt(format!("unknown voice connection status `{status}`"))
            })?,
            provider: row.get(8).map_err(sql)?,
            provider_session_id: row.get(9).map_err(sql)?,
            expires_at: millis(10)?,
        },
        token_hash: row.get(11).map_err(sql)?,
        token_used_at: millis(12)?,
        app: json(13, "app")?,
        client: json(14, "client")?,
    })
}

/// Runs a statement that changes at most one voice segment and returns it (`RETURNING`).
fn change_voice_segment(
    tx: &Transaction<'_>,
    statement: &str,
    params: impl rusqlite::Params,
) -> Result<Option<VoiceSegmentRecord>> {
    let row = tx
        .prepare_cached(statement)
        .map_err(sql)?
        .query_row(params, |row| Ok(voice_segment_from_row(row)))
        .optional()
        .map_err(sql)?;
    row.transpose()
}

/// Collects rows read by a `from_row` function, stopping at the first error.
fn collect<T>(
    connection: &Connection,
    query: &str,
    params: impl rusqlite::Params,
    from_row: fn(&Row<'_>) -> Result<T>,
) -> Result<Vec<T>> {
    let mut statement = connection.prepare_cached(query).map_err(sql)?;
    let rows = statement.query_map(params, |row| Ok(from_row(row))).map_err(sql)?;
    rows.map(|row| row.map_err(sql)?).collect()
}

/// The conversation and the offset its next event gets.
fn conversation_with_next_offset(row: &Row<'_>) -> Result<(Conversation, u64)> {
    Ok((conversation_from_row(row)?, offset_column(row, 7)?))
}

fn read_snapshot(connection: &Connection, conversation_id: &str) -> Result<Option<Snapshot>> {
    let text: Option<String> = connection
        .prepare_cached("SELECT snapshot FROM conversations WHERE id = ?1")
        .map_err(sql)?
        .query_row([conversation_id], |row| row.get(0))
        .optional()
        .map_err(sql)?;
    text.map(|text| parse_json_column(&text, "snapshot")).transpose()
}

fn read_idempotency(connection: &Connection, key: &str) -> Result<Option<IdempotencyRecord>> {
    let query = format!("SELECT {IDEMPOTENCY_COLUMNS} FROM runtime_idempotency WHERE key = ?1");
    let row = connection
        .prepare_cached(&query)
        .map_err(sql)?
        .query_row([key], |row| Ok(idempotency_from_row(row)))
        .optional()
        .map_err(sql)?;
    row.transpose()
}

/// Stores `events` at consecutive offsets from `first_offset`, with fresh ids and time `at`.
fn append_events(
    tx: &Transaction<'_>,
    conversation_id: &str,
    first_offset: u64,
    events: &[NewEvent],
    at: Timestamp,
) -> Result<Vec<RuntimeEvent>> {
    let mut insert = tx
        .prepare_cached(&format!(
            "INSERT INTO runtime_events ({EVENT_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6)"
        ))
        .map_err(sql)?;
    let ids: Vec<String> = events.iter().map(|_| new_id(IdPrefix::Event)).collect();
    let stored = numbered_events(conversation_id, &ids, events, first_offset, at);
    for event in &stored {
        insert
            .execute(params![
                event.id,
                event.conversation_id,
                offset_param(event.offset)?,
                event.kind,
                at.as_millis(),
                json_text(&event.data),
            ])
            .map_err(sql)?;
    }
    Ok(stored)
}

/// Applies one commit; see [`Commit`]. Every check happens before the first write, and an
/// error rolls the whole transaction back.
fn apply_commit(tx: &Transaction<'_>, commit: &Commit) -> Result<CommitOutcome> {
    let id = commit.conversation_id.as_str();
    let query =
        format!("SELECT {CONVERSATION_COLUMNS}, next_offset FROM conversations WHERE id = ?1");
    let Some((before, next_offset)) =
        collect(tx, &query, [id], conversation_with_next_offset)?.pop()
    else {
        return Ok(CommitOutcome::NotFound);
    };
    if let Some(key) = &commit.idempotency_key
        && let Some(record) = read_idempotency(tx, key)?
    {
        return Ok(CommitOutcome::Duplicate(record));
    }
    commit.check()?;

    let events = append_events(tx, id, next_offset, &commit.events, commit.at)?;
    let end_offset = next_offset + events.len() as u64;
    let lifecycle = commit.lifecycle.unwrap_or(before.lifecycle);
    // The snapshot carries the lifecycle too, so it follows a change even when the commit
    // brings no snapshot of its own.
    let snapshot = match &commit.snapshot {
        Some(snapshot) => Some(snapshot.clone()),
        None if lifecycle != before.lifecycle => read_snapshot(tx, id)?,
        None => None,
    }
    .map(|snapshot| Snapshot { lifecycle, updated_at: commit.at, ..snapshot });
    tx.prepare_cached(
        "UPDATE conversations SET lifecycle = ?2, updated_at = ?3, next_offset = ?4, \
         snapshot = coalesce(?5, snapshot) WHERE id = ?1",
    )
    .map_err(sql)?
    .execute(params![
        id,
        lifecycle.as_str(),
        commit.at.as_millis(),
        offset_param(end_offset)?,
        snapshot.as_ref().map(json_text),
    ])
    .map_err(sql)?;

    let mut open = tx
        .prepare_cached(&format!(
            "INSERT INTO runtime_prompts (conversation_id, {PROMPT_COLUMNS}) \
             VALUES (?1, ?2, ?3, ?4, ?5, NULL)"
        ))
        .map_err(sql)?;
    for prompt in &commit.open_prompts {
        let offset = events[prompt.event_index].offset;
        open.execute(params![
            id,
            prompt.prompt_id,
            prompt.widget_kind,
            json_text(&prompt.input),
            offset_param(offset)?,
        ])
        .map_err(sql)?;
    }
    // An answered prompt keeps its first answer.
    let mut close = tx
        .prepare_cached(
            "UPDATE runtime_prompts SET output = ?3 \
             WHERE conversation_id = ?1 AND prompt_id = ?2 AND output IS NULL",
        )
        .map_err(sql)?;
    for (prompt_id, output) in &commit.close_prompts {
        close.execute(params![id, prompt_id, json_text(output)]).map_err(sql)?;
    }

    if let Some(key) = &commit.idempotency_key {
        tx.prepare_cached(&format!(
            "INSERT INTO runtime_idempotency ({IDEMPOTENCY_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6)"
        ))
        .map_err(sql)?
        .execute(params![
            key,
            id,
            offset_param(next_offset)?,
            offset_param(end_offset)?,
            commit.at.as_millis(),
            commit.idempotency_fingerprint,
        ])
        .map_err(sql)?;
    }

    let conversation = Conversation { lifecycle, updated_at: commit.at, ..before };
    Ok(CommitOutcome::Committed { conversation, events })
}

#[async_trait]
impl ConversationStore for SqliteStore {
    async fn create_conversation(
        &self,
        conversation: &Conversation,
        snapshot: &Snapshot,
        events: &[NewEvent],
    ) -> Result<Option<Vec<RuntimeEvent>>> {
        let (conversation, snapshot, events) =
            (conversation.clone(), snapshot.clone(), events.to_vec());
        self.write(move |tx| {
            let inserted = tx
                .prepare_cached(&format!(
                    "INSERT INTO conversations ({CONVERSATION_COLUMNS}, next_offset, snapshot) \
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9) ON CONFLICT (id) DO NOTHING"
                ))
                .map_err(sql)?
                .execute(params![
                    conversation.id,
                    conversation.agent_id,
                    conversation.channel.as_ref().map(json_text),
                    json_text(&conversation.context),
                    conversation.lifecycle.as_str(),
                    conversation.created_at.as_millis(),
                    conversation.updated_at.as_millis(),
                    offset_param(events.len() as u64)?,
                    json_text(&snapshot),
                ])
                .map_err(sql)?;
            if inserted == 0 {
                return Ok(None);
            }
            append_events(tx, &conversation.id, 0, &events, conversation.created_at).map(Some)
        })
        .await
    }

    async fn get_conversation(&self, id: &str) -> Result<Option<Conversation>> {
        let id = id.to_owned();
        self.read(move |connection| {
            let query = format!("SELECT {CONVERSATION_COLUMNS} FROM conversations WHERE id = ?1");
            let mut found = collect(connection, &query, [id], conversation_from_row)?;
            Ok(found.pop())
        })
        .await
    }

    async fn list_conversations(&self, query: &ConversationQuery) -> Result<Vec<Conversation>> {
        let mut conditions: Vec<&'static str> = Vec::new();
        let mut values = Vec::new();
        if let Some(agent_id) = &query.agent_id {
            conditions.push("agent_id = ?");
            values.push(Value::Text(agent_id.clone()));
        }
        for (condition, cursor) in [
            ("(created_at, id) < (?, ?)", &query.after),
            ("(created_at, id) > (?, ?)", &query.before),
        ] {
            if let Some(cursor) = cursor {
                conditions.push(condition);
                values.push(Value::Integer(cursor.created_at.as_millis()));
                values.push(Value::Text(cursor.id.clone()));
            }
        }
        for (condition, at) in
            [("updated_at > ?", query.updated_after), ("updated_at < ?", query.updated_before)]
        {
            if let Some(at) = at {
                conditions.push(condition);
                values.push(Value::Integer(at.as_millis()));
            }
        }
        let filter = if conditions.is_empty() {
            String::new()
        } else {
            format!("WHERE {}", conditions.join(" AND "))
        };
        // A page that ends before a cursor holds the conversations nearest to it: take them
        // oldest first, then turn the page around.
        let nearest_before = query.before.is_some() && query.after.is_none();
        let order = if nearest_before { "ASC" } else { "DESC" };
        values.push(Value::Integer(i64::from(query.limit)));
        let statement = format!(
            "SELECT {CONVERSATION_COLUMNS} FROM conversations {filter} ORDER BY created_at {order}, id {order} LIMIT ?"
        );
        self.read(move |connection| {
            let mut page =
                collect(connection, &statement, params_from_iter(values), conversation_from_row)?;
            if nearest_before {
                page.reverse();
            }
            Ok(page)
        })
        .await
    }

    async fn delete_conversations(&self, ids: &[String]) -> Result<Vec<String>> {
        let ids = ids.to_vec();
        let deleted = self
            .write(move |tx| {
                let mut deleted = Vec::new();
                for id in &ids {
                    for statement in [
                        "DELETE FROM runtime_events WHERE conversation_id = ?1",
                        "DELETE FROM runtime_prompts WHERE conversation_id = ?1",
                        "DELETE FROM runtime_idempotency WHERE conversation_id = ?1",
                        "DELETE FROM conversation_tokens WHERE conversation_id = ?1",
                        "DELETE FROM voice_segments WHERE conversation_id = ?1",
                    ] {
                        tx.prepare_cached(statement).map_err(sql)?.execute([id]).map_err(sql)?;
                    }
                    let removed = tx
                        .prepare_cached("DELETE FROM conversations WHERE id = ?1")
                        .map_err(sql)?
                        .execute([id])
                        .map_err(sql)?;
                    if removed > 0 {
                        deleted.push(id.clone());
                    }
                }
                Ok(deleted)
            })
            .await;
        if deleted.as_ref().is_ok_and(|deleted| !deleted.is_empty()) {
            self.scrub_log().await;
        }
        deleted
    }

    async fn conversations_with_contact(&self, kind: &str, address: &str) -> Result<Vec<String>> {
        let (kind, address) = (kind.to_owned(), address.to_owned());
        self.read(move |connection| {
            let mut statement = connection
                .prepare_cached(
                    "SELECT id FROM conversations WHERE json_extract(channel, '$.type') = ?1 \
                     AND json_extract(channel, '$.id') = ?2",
                )
                .map_err(sql)?;
            let rows = statement.query_map([kind, address], |row| row.get(0)).map_err(sql)?;
            rows.map(|row| row.map_err(sql)).collect()
        })
        .await
    }

    async fn conversations_mentioning(&self, text: &str) -> Result<Vec<String>> {
        let text = text.to_lowercase();
        self.read(move |connection| {
            // SQLite finds candidates; only whole words count, so "Ada" is not found in
            // "Canada" or inside an id such as `msg_01kadab…`.
            let mut statement = connection
                .prepare_cached(
                    "SELECT conversation_id, cairn_fold(data) FROM runtime_events \
                     WHERE instr(cairn_fold(data), ?1) > 0",
                )
                .map_err(sql)?;
            let rows = statement
                .query_map([&text], |row| Ok((row.get::<_, String>(0)?, row.get::<_, String>(1)?)))
                .map_err(sql)?;
            let mut found: Vec<String> = Vec::new();
            for row in rows {
                let (conversation_id, data) = row.map_err(sql)?;
                if !found.contains(&conversation_id) && mentions_word(&data, &text) {
                    found.push(conversation_id);
                }
            }
            Ok(found)
        })
        .await
    }

    async fn commit(&self, commit: &Commit) -> Result<CommitOutcome> {
        let commit = commit.clone();
        self.write(move |tx| apply_commit(tx, &commit)).await
    }

    async fn list_events(
        &self,
        conversation_id: &str,
        after_offset: Option<u64>,
        limit: u32,
    ) -> Result<Vec<RuntimeEvent>> {
        let conversation_id = conversation_id.to_owned();
        let after = after_offset.map_or(-1, offset_bound);
        self.read(move |connection| {
            let query = format!(
                "SELECT {EVENT_COLUMNS} FROM runtime_events \
                 WHERE conversation_id = ?1 AND offset > ?2 ORDER BY offset LIMIT ?3"
            );
            collect(connection, &query, params![conversation_id, after, limit], event_from_row)
        })
        .await
    }

    async fn read_events(
        &self,
        conversation_id: &str,
        range: &EventRange,
    ) -> Result<Vec<RuntimeEvent>> {
        let conversation_id = conversation_id.to_owned();
        let (after, before) = range_bounds(range);
        let (kind, limit, newest) = (range.kind.clone(), range.limit, range.newest);
        self.read(move |connection| {
            let query = read_events_query(newest);
            let params = params![conversation_id, after, before, kind, limit];
            let mut events = collect(connection, &query, params, event_from_row)?;
            if newest {
                events.reverse();
            }
            Ok(events)
        })
        .await
    }

    async fn count_events(&self, conversation_id: &str, range: &EventRange) -> Result<u64> {
        let conversation_id = conversation_id.to_owned();
        let (after, before) = range_bounds(range);
        let kind = range.kind.clone();
        self.read(move |connection| {
            let count: i64 = connection
                .prepare_cached(
                    "SELECT count(*) FROM runtime_events \
                     WHERE conversation_id = ?1 AND offset > ?2 AND offset < ?3 \
                     AND (?4 IS NULL OR kind = ?4)",
                )
                .map_err(sql)?
                .query_row(params![conversation_id, after, before, kind], |row| row.get(0))
                .map_err(sql)?;
            Ok(u64::try_from(count).unwrap_or_default())
        })
        .await
    }

    async fn get_event(
        &self,
        conversation_id: &str,
        event_id: &str,
    ) -> Result<Option<RuntimeEvent>> {
        let (conversation_id, event_id) = (conversation_id.to_owned(), event_id.to_owned());
        self.read(move |connection| {
            let query = get_event_query();
            Ok(collect(connection, &query, [conversation_id, event_id], event_from_row)?.pop())
        })
        .await
    }

    async fn events_between(
        &self,
        conversation_id: &str,
        from: u64,
        to: u64,
    ) -> Result<Vec<RuntimeEvent>> {
        let conversation_id = conversation_id.to_owned();
        let (from, to) = (offset_bound(from), offset_bound(to));
        self.read(move |connection| {
            let query = format!(
                "SELECT {EVENT_COLUMNS} FROM runtime_events \
                 WHERE conversation_id = ?1 AND offset >= ?2 AND offset < ?3 ORDER BY offset"
            );
            collect(connection, &query, params![conversation_id, from, to], event_from_row)
        })
        .await
    }

    async fn get_snapshot(&self, conversation_id: &str) -> Result<Option<Snapshot>> {
        let conversation_id = conversation_id.to_owned();
        self.read(move |connection| read_snapshot(connection, &conversation_id)).await
    }

    async fn open_prompts(
        &self,
        conversation_id: &str,
        after: Option<u64>,
        before: Option<u64>,
        limit: u32,
    ) -> Result<Vec<OpenPrompt>> {
        let conversation_id = conversation_id.to_owned();
        let range = EventRange { after, before, ..EventRange::default() };
        let (after, before) = range_bounds(&range);
        self.read(move |connection| {
            let query = format!(
                "SELECT {PROMPT_COLUMNS} FROM runtime_prompts \
                 WHERE conversation_id = ?1 AND output IS NULL AND offset > ?2 AND offset < ?3 \
                 ORDER BY offset, prompt_id LIMIT ?4"
            );
            let params = params![conversation_id, after, before, limit];
            let records = collect(connection, &query, params, prompt_from_row)?;
            Ok(records.into_iter().map(|record| record.prompt).collect())
        })
        .await
    }

    async fn get_prompt(
        &self,
        conversation_id: &str,
        prompt_id: &str,
    ) -> Result<Option<PromptRecord>> {
        let (conversation_id, prompt_id) = (conversation_id.to_owned(), prompt_id.to_owned());
        self.read(move |connection| {
            let query = format!(
                "SELECT {PROMPT_COLUMNS} FROM runtime_prompts \
                 WHERE conversation_id = ?1 AND prompt_id = ?2"
            );
            let mut found =
                collect(connection, &query, [conversation_id, prompt_id], prompt_from_row)?;
            Ok(found.pop())
        })
        .await
    }

    async fn find_idempotency(&self, key: &str) -> Result<Option<IdempotencyRecord>> {
        let key = key.to_owned();
        self.read(move |connection| read_idempotency(connection, &key)).await
    }

    async fn create_voice_segment(&self, record: &VoiceSegmentRecord) -> Result<bool> {
        if record.connection.channel_segment_id != record.segment.id {
            let message = format!(
                "connection {} belongs to segment {}, not {}",
                record.connection.id, record.connection.channel_segment_id, record.segment.id
            );
            return Err(StoreError::Backend(message.into()));
        }
        let record = record.clone();
        self.write(move |tx| {
            // Inserts only when the conversation exists: no row otherwise.
            let inserted = tx
                .prepare_cached(&format!(
                    "INSERT INTO voice_segments ({VOICE_SEGMENT_COLUMNS}) \
                     SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15 \
                     FROM conversations WHERE id = ?2"
                ))
                .map_err(sql)?
                .execute(params![
                    record.segment.id,
                    record.segment.conversation_id,
                    record.segment.channel,
                    record.segment.started_at.as_millis(),
                    record.segment.ended_at.map(Timestamp::as_millis),
                    record.connection.id,
                    record.connection.adapter,
                    record.connection.status.as_str(),
                    record.connection.provider,
                    record.connection.provider_session_id,
                    record.connection.expires_at.map(Timestamp::as_millis),
                    record.token_hash,
                    record.token_used_at.map(Timestamp::as_millis),
                    record.app.as_ref().map(json_text),
                    record.client.as_ref().map(json_text),
                ])
                .map_err(sql)?;
            Ok(inserted > 0)
        })
        .await
    }

    async fn claim_voice_token(
        &self,
        token_hash: &str,
        now: Timestamp,
    ) -> Result<Option<VoiceSegmentRecord>> {
        let token_hash = token_hash.to_owned();
        // One statement on the single writer: of racing claims, the first to run marks the
        // token used and the others find it used. A connection without `expires_at` has no
        // token to claim.
        self.write(move |tx| {
            let statement = format!(
                "UPDATE voice_segments SET token_used_at = ?2, status = 'connected' \
                 WHERE token_hash = ?1 AND token_used_at IS NULL AND ended_at IS NULL \
                 AND ?2 < expires_at RETURNING {VOICE_SEGMENT_COLUMNS}"
            );
            change_voice_segment(tx, &statement, params![token_hash, now.as_millis()])
        })
        .await
    }

    async fn end_voice_segment(
        &self,
        segment_id: &str,
        at: Timestamp,
    ) -> Result<Option<VoiceSegmentRecord>> {
        let segment_id = segment_id.to_owned();
        self.write(move |tx| {
            let statement = format!(
                "UPDATE voice_segments SET ended_at = ?2, status = 'ended' \
                 WHERE id = ?1 AND ended_at IS NULL RETURNING {VOICE_SEGMENT_COLUMNS}"
            );
            change_voice_segment(tx, &statement, params![segment_id, at.as_millis()])
        })
        .await
    }

    async fn get_voice_segment(&self, segment_id: &str) -> Result<Option<VoiceSegmentRecord>> {
        let segment_id = segment_id.to_owned();
        self.read(move |connection| {
            let query = format!("SELECT {VOICE_SEGMENT_COLUMNS} FROM voice_segments WHERE id = ?1");
            Ok(collect(connection, &query, [segment_id], voice_segment_from_row)?.pop())
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use cairn_store::conformance::sample_conversation;
    use cairn_store::{Commit, CommitOutcome, ConversationStore, NewEvent, NewPrompt};
    use cairn_types::{Lifecycle, Snapshot, Timestamp};

    use crate::SqliteStore;
    use crate::tests::fresh_stores;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn sqlite_store_passes_the_conversation_conformance_suite() {
        let directory = tempfile::tempdir().unwrap();
        cairn_store::conformance::run_conversations(fresh_stores(&directory, "conversations"))
            .await;
    }

    /// The bounded reads stop early inside SQLite too: on a 10,000-event log, the newest
    /// messages and a recent event by id cost a small fraction of the virtual machine steps
    /// of reading the whole log.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn bounded_reads_stop_early_inside_sqlite() {
        let directory = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(&directory.path().join("cairn.db")).unwrap();
        let conversation = sample_conversation("agent-a", 1_000);
        let kind = |n: u64| if n.is_multiple_of(5) { "message" } else { "activity" };
        let events: Vec<NewEvent> = (0..10_000)
            .map(|n| NewEvent { kind: kind(n).to_owned(), data: serde_json::json!({"n": n}) })
            .collect();
        let snapshot = Snapshot::empty(&conversation);
        let log = store.create_conversation(&conversation, &snapshot, &events).await.unwrap();
        let (id, recent) = (conversation.id.clone(), log.unwrap()[9_990].id.clone());
        let steps = store
            .read(move |connection| {
                let run = |query: &str, params: &[&dyn rusqlite::ToSql]| {
                    let mut statement = connection.prepare(query).unwrap();
                    let rows = statement.query_map(params, |_| Ok(())).unwrap().count();
                    (rows, statement.get_status(rusqlite::StatementStatus::VmStep))
                };
                let all = run(
                    &super::read_events_query(false),
                    rusqlite::params![id, -1, i64::MAX, None::<String>, u32::MAX],
                );
                let newest = run(
                    &super::read_events_query(true),
                    rusqlite::params![id, -1, i64::MAX, "message", 40],
                );
                let by_id = run(&super::get_event_query(), rusqlite::params![id, recent]);
                Ok([all, newest, by_id])
            })
            .await
            .unwrap();
        let [(all_rows, all), (newest_rows, newest), (found, by_id)] = steps;
        assert_eq!((all_rows, newest_rows, found), (10_000, 40, 1));
        assert!(newest * 20 < all, "the newest 40 messages took {newest} steps, the log {all}");
        assert!(by_id * 20 < all, "a recent event by id took {by_id} steps, the log {all}");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn conversations_survive_reopening_the_file() {
        let directory = tempfile::tempdir().unwrap();
        let path = directory.path().join("cairn.db");
        let conversation = sample_conversation("agent-a", 1_000);
        let event = |kind: &str| NewEvent { kind: kind.to_owned(), data: serde_json::json!({}) };
        let commit = Commit {
            lifecycle: Some(Lifecycle::Handoff),
            open_prompts: vec![NewPrompt {
                prompt_id: "prm_kept".to_owned(),
                widget_kind: "choice".to_owned(),
                input: serde_json::json!({"options": ["a"]}),
                event_index: 1,
            }],
            idempotency_key: Some("request-kept".to_owned()),
            ..Commit::events(
                &conversation.id,
                vec![event("a"), event("prompt.opened")],
                Timestamp::from_millis(2_000),
            )
        };
        let (events, snapshot, prompts, record, stored) = {
            let store = SqliteStore::open(&path).unwrap();
            let snapshot = Snapshot::empty(&conversation);
            store.create_conversation(&conversation, &snapshot, &[event("created")]).await.unwrap();
            assert!(matches!(
                store.commit(&commit).await.unwrap(),
                CommitOutcome::Committed { .. }
            ));
            (
                store.list_events(&conversation.id, None, 100).await.unwrap(),
                store.get_snapshot(&conversation.id).await.unwrap(),
                store.open_prompts(&conversation.id, None, None, 100).await.unwrap(),
                store.find_idempotency("request-kept").await.unwrap(),
                store.get_conversation(&conversation.id).await.unwrap(),
            )
        };
        let reopened = SqliteStore::open(&path).unwrap();
        assert_eq!(reopened.get_conversation(&conversation.id).await.unwrap(), stored);
        assert_eq!(reopened.list_events(&conversation.id, None, 100).await.unwrap(), events);
        assert_eq!(events.len(), 3);
        assert_eq!(reopened.get_snapshot(&conversation.id).await.unwrap(), snapshot);
        assert_eq!(
            reopened.open_prompts(&conversation.id, None, None, 100).await.unwrap(),
            prompts
        );
        assert_eq!(prompts.len(), 1);
        assert_eq!(reopened.find_idempotency("request-kept").await.unwrap(), record);
        assert!(matches!(reopened.commit(&commit).await.unwrap(), CommitOutcome::Duplicate(_)));

        let next =
            Commit::events(&conversation.id, vec![event("b")], Timestamp::from_millis(3_000));
        let CommitOutcome::Committed { events, .. } = reopened.commit(&next).await.unwrap() else {
            panic!("the commit applies after reopening");
        };
        assert_eq!(events[0].offset, 3, "offsets go on where they stopped");
    }
}
