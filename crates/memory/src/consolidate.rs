//! The dream cycle: merging near-duplicates (keeping provenance), marking memories stale that
//! nobody has recalled or confirmed for a while, and surfacing conflicts for review; and the
//! settling of conflicts.

use cairn_store::{Audit, ConflictRecord, MemoryChange, MemoryFilter};
use cairn_types::{
    Conflict, ConflictList, ConflictResolution, DreamReport, DreamRequest, IdPrefix, Memory,
    MergeGroup, NewMemory, ResolutionAction, Status, Timestamp, new_id,
};
use serde_json::{Value, json};

use crate::dream::{self, Candidate};
use crate::{Engine, Error, Result, validate};

const DEFAULT_STALE_AFTER_DAYS: f64 = 90.0;
const DEFAULT_SIMILARITY: f64 = 0.8;
const PAGE: u32 = 5_000;
const DAY_MILLIS: i64 = 86_400_000;

impl Engine {
    /// Runs the dream cycle on behalf of `actor`.
    pub async fn dream(&self, request: DreamRequest, actor: &str) -> Result<DreamReport> {
        let stale_after_days = request.stale_after_days.unwrap_or(DEFAULT_STALE_AFTER_DAYS);
        if !(stale_after_days > 0.0 && stale_after_days <= 36_500.0) {
            return Err(Error::Invalid {
                field: "staleAfterDays",
                reason: "must be above 0 and at most 36500".to_owned(),
            });
        }
        let similarity = request.similarity.unwrap_or(DEFAULT_SIMILARITY);
        if !(0.5..=1.0).contains(&similarity) {
            return Err(Error::Invalid {
                field: "similarity",
                reason: "must be from 0.5 to 1".to_owned(),
            });
        }
        let _decision = self.decisions.lock().await;
        let started_at = Timestamp::now();
        // What a conversation's visitor left is theirs: never merged into, or weighed against,
        // anyone else's memories.
        let mut memories = self.all_live_memories().await?;
        memories.retain(|memory| crate::privacy::owners(memory).next().is_none());
        let examined = memories.len() as u64;
        let dry_run = request.dry_run;

        // Near-duplicates: keep the most recalled (then the oldest) of each group.
        let candidates: Vec<Candidate<'_>> = memories.iter().map(candidate).collect();
        let groups = dream::near_duplicate_groups(&candidates, similarity);
        let mut merged_away = std::collections::HashSet::new();
        let mut merged = Vec::new();
        for group in groups {
            let mut members: Vec<&Memory> = group.iter().map(|&index| &memories[index]).collect();
            members.sort_by(|a, b| {
                b.recall_count.cmp(&a.recall_count).then(a.created_at.cmp(&b.created_at))
            });
            let (kept, others) = members.split_first().expect("groups have two members or more");
            if !dry_run {
                self.merge_into(kept, others, actor).await?;
            }
            merged_away.extend(others.iter().map(|memory| memory.id.clone()));
            merged.push(MergeGroup {
                kept_id: kept.id.clone(),
                merged_ids: others.iter().map(|m| m.id.clone()).collect(),
            });
        }

        // Stale: active, and neither changed nor recalled within the window.
        let cutoff = started_at.as_millis() - (stale_after_days * DAY_MILLIS as f64) as i64;
        let mut staled = Vec::new();
        for memory in memories.iter().filter(|memory| !merged_away.contains(&memory.id)) {
            let touched =
                memory.last_recalled_at.map_or(memory.updated_at, |at| at.max(memory.updated_at));
            if memory.status == Status::Active && touched.as_millis() < cutoff {
                if !dry_run {
                    let change =
                        MemoryChange { status: Some(Status::Stale), ..MemoryChange::default() };
                    self.store
                        .update_memory(
                            &memory.id,
                            &change,
                            Timestamp::now(),
                            &Audit { actor, action: "stale" },
                        )
                        .await?;
                }
                staled.push(memory.id.clone());
            }
        }

        // Conflicts among what remains; both memories go to review.
        let remaining: Vec<&Memory> =
            memories.iter().filter(|memory| !merged_away.contains(&memory.id)).collect();
        let candidates: Vec<Candidate<'_>> =
            remaining.iter().map(|memory| candidate(memory)).collect();
        let mut records = Vec::new();
        for pair in dream::conflicts(&candidates) {
            let (a, b) = (remaining[pair.first], remaining[pair.second]);
            let (first, second) = if a.id < b.id { (a, b) } else { (b, a) };
            if self.store.conflict_exists(&first.id, &second.id).await? {
                continue;
            }
            records.push(ConflictRecord {
                id: new_id(IdPrefix::Conflict),
                first_id: first.id.clone(),
                second_id: second.id.clone(),
                subject: pair.subject,
                reason: pair.reason,
                status: "open".to_owned(),
                detected_at: started_at,
                resolution: None,
                resolved_at: None,
            });
        }
        if !dry_run {
            records = self.store.insert_conflicts(&records).await?;
            for record in &records {
                for id in [&record.first_id, &record.second_id] {
                    let change =
                        MemoryChange { status: Some(Status::Review), ..MemoryChange::default() };
                    self.store
                        .update_memory(
                            id,
                            &change,
                            Timestamp::now(),
                            &Audit { actor, action: "review" },
                        )
                        .await?;
                }
            }
        }
        let mut conflicts = Vec::with_capacity(records.len());
        for record in records {
            conflicts.push(self.conflict_view(record).await?);
        }
        Ok(DreamReport {
            dry_run,
            started_at,
            finished_at: Timestamp::now(),
            examined,
            merged,
            staled,
            conflicts,
        })
    }

    /// Every memory that is not archived, each once (pages shift while memories are added).
    async fn all_live_memories(&self) -> Result<Vec<Memory>> {
        let mut memories: Vec<Memory> = Vec::new();
        let mut seen = std::collections::HashSet::new();
        let mut offset = 0;
        loop {
            let page = self.store.list_memories(&MemoryFilter::default(), PAGE, offset).await?;
            let done = page.memories.len() < PAGE as usize;
            offset += page.memories.len() as u64;
            memories
                .extend(page.memories.into_iter().filter(|memory| seen.insert(memory.id.clone())));
            if done {
                return Ok(memories);
            }
        }
    }

    /// Archives `others` into `kept`, recording where each came from in `kept`'s metadata.
    async fn merge_into(&self, kept: &Memory, others: &[&Memory], actor: &str) -> Result<()> {
        let audit = Audit { actor, action: "merge" };
        let mut metadata = kept.metadata.clone();
        let mut provenance = match metadata.remove("mergedFrom") {
            Some(Value::Array(items)) => items,
            _ => Vec::new(),
        };
        let mut tags = kept.tags.clone();
        for other in others {
            provenance.push(
                json!({"id": other.id, "source": other.source, "createdAt": other.created_at}),
            );
            for tag in &other.tags {
                if !tags.contains(tag) {
                    tags.push(tag.clone());
                }
            }
            let mut other_metadata = other.metadata.clone();
            other_metadata.insert("mergedInto".to_owned(), Value::String(kept.id.clone()));
            let now = Timestamp::now();
            let archive = MemoryChange {
                archived_at: Some(Some(now)),
                metadata: Some(other_metadata),
                ..MemoryChange::default()
            };
            self.store.update_memory(&other.id, &archive, now, &audit).await?;
        }
        metadata.insert("mergedFrom".to_owned(), Value::Array(provenance));
        let change =
            MemoryChange { metadata: Some(metadata), tags: Some(tags), ..MemoryChange::default() };
        self.store.update_memory(&kept.id, &change, Timestamp::now(), &audit).await?;
        Ok(())
    }

    pub async fn list_conflicts(&self, status: Option<String>) -> Result<ConflictList> {
        let status = match status.as_deref() {
            None | Some("open") => Some("open"),
            Some("resolved") => Some("resolved"),
            Some("all") => None,
            Some(other) => {
                return Err(Error::Invalid {
                    field: "status",
                    reason: format!("`{other}` is not one of open, resolved, all"),
                });
            }
        };
        let mut conflicts = Vec::new();
        for record in self.store.list_conflicts(status).await? {
            conflicts.push(self.conflict_view(record).await?);
        }
        Ok(ConflictList { conflicts })
    }

    async fn conflict_view(&self, record: ConflictRecord) -> Result<Conflict> {
        let ids = vec![record.first_id.clone(), record.second_id.clone()];
        let memories = self.store.get_memories(&ids).await?;
        Ok(Conflict {
            id: record.id,
            memory_ids: ids,
            memories,
            subject: record.subject,
            reason: record.reason,
            status: record.status,
            detected_at: record.detected_at,
            resolution: record.resolution,
            resolved_at: record.resolved_at,
        })
    }

    /// Settles an open conflict: keep one, keep both, or merge them into a new memory.
    pub async fn resolve_conflict(
        &self,
        id: &str,
        resolution: ConflictResolution,
        actor: &str,
    ) -> Result<Conflict> {
        let _decision = self.decisions.lock().await;
        self.resolve_conflict_decided(id, resolution, actor).await
    }

    /// Settles the open conflicts `memory_id` is in, after a review decision on it: the
    /// memory approved is kept, or the other one when it was rejected. The caller holds the
    /// decisions lock.
    pub(crate) async fn settle_conflicts_of(
        &self,
        memory_id: &str,
        approved: bool,
        actor: &str,
    ) -> Result<()> {
        let open = self.store.list_conflicts(Some("open")).await?;
        for record in open {
            let other = match (record.first_id == memory_id, record.second_id == memory_id) {
                (true, _) => record.second_id.clone(),
                (_, true) => record.first_id.clone(),
                _ => continue,
            };
            let keep = if approved { memory_id.to_owned() } else { other };
            let resolution = ConflictResolution {
                action: ResolutionAction::Keep,
                memory_id: Some(keep),
                content: None,
            };
            self.resolve_conflict_decided(&record.id, resolution, actor).await?;
        }
        Ok(())
    }

    /// [`Engine::resolve_conflict`] for a caller that holds the decisions lock.
    async fn resolve_conflict_decided(
        &self,
        id: &str,
        resolution: ConflictResolution,
        actor: &str,
    ) -> Result<Conflict> {
        let record = self
            .store
            .get_conflict(id)
            .await?
            .ok_or_else(|| Error::ConflictNotFound(id.to_owned()))?;
        if record.status != "open" {
            return Err(Error::ConflictResolved(id.to_owned()));
        }
        let pair = [record.first_id.clone(), record.second_id.clone()];
        let audit = Audit { actor, action: "resolve" };
        let now = Timestamp::now();
        let activate = MemoryChange {
            status: Some(Status::Active),
            archived_at: Some(None),
            ..MemoryChange::default()
        };
        let archive = MemoryChange { archived_at: Some(Some(now)), ..MemoryChange::default() };
        let outcome = match resolution.action {
            ResolutionAction::Keep => {
                let keep = resolution.memory_id.ok_or_else(|| Error::Invalid {
                    field: "memoryId",
                    reason: "is required with `keep`: name the memory to keep".to_owned(),
                })?;
                if !pair.contains(&keep) {
                    return Err(Error::Invalid {
                        field: "memoryId",
                        reason: format!("`{keep}` is not one of this conflict's memories"),
                    });
                }
                for memory_id in &pair {
                    let change = if *memory_id == keep { &activate } else { &archive };
                    self.store.update_memory(memory_id, change, now, &audit).await?;
                }
                format!("keep {keep}")
            }
            ResolutionAction::KeepBoth => {
                for memory_id in &pair {
                    self.store.update_memory(memory_id, &activate, now, &audit).await?;
                }
                "keepBoth".to_owned()
            }
            ResolutionAction::Merge => {
                let memories = self.store.get_memories(&pair).await?;
                let first =
                    memories.first().ok_or_else(|| Error::MemoryNotFound(pair[0].clone()))?;
                let content = match resolution.content {
                    Some(content) => content,
                    None => memories
                        .iter()
                        .map(|memory| memory.content.trim())
                        .collect::<Vec<_>>()
                        .join("\n"),
                };
                let content = validate::required_text(
                    "content",
                    Some(content),
                    cairn_types::MAX_CONTENT_BYTES,
                )?;
                let mut metadata = cairn_types::JsonObject::new();
                metadata.insert("mergedFrom".to_owned(), json!(pair));
                let input = NewMemory {
                    content,
                    scope: first.scope,
                    repo: first.repo.clone(),
                    tags: first.tags.clone(),
                    source: Some(format!("conflict {id}")),
                    metadata,
                };
                let merged = self.create_memory(input, actor).await?;
                for memory_id in &pair {
                    self.store.update_memory(memory_id, &archive, now, &audit).await?;
                }
                format!("merge {}", merged.id)
            }
        };
        self.store.resolve_conflict(id, &outcome, now).await?;
        let record = self
            .store
            .get_conflict(id)
            .await?
            .ok_or_else(|| Error::ConflictNotFound(id.to_owned()))?;
        self.conflict_view(record).await
    }
}

fn candidate(memory: &Memory) -> Candidate<'_> {
    Candidate { content: &memory.content, repo: memory.repo.as_deref() }
}
