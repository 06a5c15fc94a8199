//! The dream cycle: merging near-duplicates (keeping provenance), marking memories stale that
//! nobody has recalled or confirmed for a while, and surfacing conflicts for review; and the
//! settling of conflicts.
//!
//! The cycle reads every memory once and decides on a blocking thread; each change it then
//! writes is guarded by the version it read, so a memory edited, recalled or archived while
//! the cycle ran is left alone (a merge group applies whole or not at all), and the next
//! cycle sees it afresh.

use std::collections::HashSet;

use cairn_store::{Audit, ConflictRecord, GuardedChange, MemoryChange, Settlement, Version};
use cairn_types::{
    Conflict, ConflictList, ConflictResolution, ConflictSide, ConflictStatus, DreamReport,
    DreamRequest, IdPrefix, Memory, MergeGroup, ResolutionAction, Status, Timestamp, new_id,
};
use serde_json::{Value, json};

use crate::dream::{self, Candidate};
use crate::{Engine, Error, Result, validate};

const DEFAULT_STALE_AFTER_DAYS: f64 = 90.0;
const DEFAULT_SIMILARITY: f64 = 0.8;
const PAGE: u32 = 5_000;
const DAY_MILLIS: i64 = 86_400_000;
/// How many guarded groups one transaction applies, so the writer is never held for long.
const GROUPS_PER_COMMIT: usize = 500;

/// The memories a cycle read, and what it decided.
struct DreamRead {
    started_at: Timestamp,
    memories: Vec<Memory>,
    plan: Plan,
}

/// What a cycle decided, by index into the memories it read.
struct Plan {
    /// Kept first, then the others, in the order they are merged.
    merges: Vec<Vec<usize>>,
    stale: Vec<usize>,
    conflicts: Vec<FoundConflict>,
}

struct FoundConflict {
    subject: String,
    repo: Option<String>,
    sides: Vec<(String, Vec<usize>)>,
    reason: String,
}

impl Engine {
    /// Runs the dream cycle on behalf of `actor`.
    pub async fn dream(&self, request: DreamRequest, actor: &str) -> Result<DreamReport> {
        let started = std::time::Instant::now();
        let dry_run = request.dry_run;
        let report = self.dream_once(request, actor).await;
        let outcome = if report.is_ok() { "completed" } else { "failed" };
        let mode = if dry_run { "dry_run" } else { "applied" };
        metrics::counter!("cairn_dream_cycles_total", "outcome" => outcome, "mode" => mode)
            .increment(1);
        metrics::histogram!("cairn_dream_cycle_duration_seconds", "mode" => mode)
            .record(started.elapsed().as_secs_f64());
        report
    }

    async fn dream_once(&self, request: DreamRequest, actor: &str) -> Result<DreamReport> {
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
        let _decision = self.decision_lock().await?;
        let read = self.read_for_dream(stale_after_days, similarity).await?;
        self.apply_dream(read, request.dry_run, actor).await
    }

    /// The dream cycle's first half: every memory read once, and what to do with them
    /// decided on a blocking thread.
    async fn read_for_dream(&self, stale_after_days: f64, similarity: f64) -> Result<DreamRead> {
        let started_at = self.now();
        let cutoff = Timestamp::from_millis(
            started_at.as_millis() - (stale_after_days * DAY_MILLIS as f64) as i64,
        );
        // What a conversation's visitor left is theirs: never merged into, or weighed against,
        // anyone else's memories.
        let mut memories = self.all_live_memories().await?;
        memories.retain(|memory| crate::privacy::owners(memory).next().is_none());
        let (memories, plan) = tokio::task::spawn_blocking(move || {
            let plan = plan(&memories, similarity, cutoff);
            (memories, plan)
        })
        .await
        .map_err(cairn_store::StoreError::backend)?;
        Ok(DreamRead { started_at, memories, plan })
    }

    /// The second half: the plan written, each change guarded by the version read.
    async fn apply_dream(
        &self,
        read: DreamRead,
        dry_run: bool,
        actor: &str,
    ) -> Result<DreamReport> {
        let DreamRead { started_at, memories, plan } = read;
        let examined = memories.len() as u64;
        let clock = std::time::Instant::now();

        // Merges: each group whole or not at all, only if no member changed since it was read.
        let groups: Vec<Vec<GuardedChange>> =
            plan.merges.iter().map(|group| merge_changes(&memories, group)).collect();
        let applied = self.apply_guarded(groups, dry_run, started_at, actor, "merge").await?;
        let merging = clock.elapsed();
        let mut merged = Vec::new();
        let mut merged_away = HashSet::new();
        for (group, applied) in plan.merges.iter().zip(applied) {
            if applied {
                merged_away.extend(group[1..].iter().copied());
                merged.push(MergeGroup {
                    kept_id: memories[group[0]].id.clone(),
                    merged_ids: group[1..].iter().map(|&i| memories[i].id.clone()).collect(),
                });
            }
        }

        // Stale: only if still active and untouched (not changed, not recalled) when written.
        let groups: Vec<Vec<GuardedChange>> = plan
            .stale
            .iter()
            .map(|&i| {
                vec![GuardedChange {
                    id: memories[i].id.clone(),
                    change: MemoryChange { status: Some(Status::Stale), ..MemoryChange::default() },
                    expected: Version::of(&memories[i]),
                }]
            })
            .collect();
        let applied = self.apply_guarded(groups, dry_run, started_at, actor, "stale").await?;
        let staled: Vec<String> = plan
            .stale
            .iter()
            .zip(applied)
            .filter(|(_, applied)| *applied)
            .map(|(&i, _)| memories[i].id.clone())
            .collect();

        // Conflicts among what remains, one per subject and repository; their memories go to
        // review.
        let found: Vec<ConflictRecord> = plan
            .conflicts
            .into_iter()
            .filter_map(|found| {
                let sides: Vec<ConflictSide> = found
                    .sides
                    .into_iter()
                    .map(|(label, items)| {
                        let mut memory_ids: Vec<String> = items
                            .into_iter()
                            .filter(|i| !merged_away.contains(i))
                            .map(|i| memories[i].id.clone())
                            .collect();
                        memory_ids.sort();
                        ConflictSide { label, memory_ids }
                    })
                    .filter(|side| !side.memory_ids.is_empty())
                    .collect();
                (sides.len() >= 2).then(|| ConflictRecord {
                    id: new_id(IdPrefix::Conflict),
                    subject: found.subject,
                    repo: found.repo,
                    sides,
                    reason: found.reason,
                    status: ConflictStatus::Open,
                    detected_at: started_at,
                    resolution: None,
                    resolved_at: None,
                })
            })
            .collect();
        let before_conflicts = clock.elapsed();
        let records = self.store.record_conflicts(&found, actor, dry_run).await?;
        let recording = clock.elapsed() - before_conflicts;
        let mut conflicts = Vec::with_capacity(records.len());
        for record in records {
            conflicts.push(self.conflict_view(record).await?);
        }
        tracing::info!(
            dry_run,
            examined,
            merge_seconds = merging.as_secs_f64(),
            stale_seconds = (before_conflicts - merging).as_secs_f64(),
            conflict_seconds = recording.as_secs_f64(),
            report_seconds = (clock.elapsed() - before_conflicts - recording).as_secs_f64(),
            "the dream cycle's writes"
        );
        Ok(DreamReport {
            dry_run,
            started_at,
            finished_at: self.now(),
            examined,
            merged,
            staled,
            conflicts,
        })
    }

    /// Applies guarded groups a bounded number per transaction; in a dry run, applies nothing
    /// and reports every group as applied.
    async fn apply_guarded(
        &self,
        groups: Vec<Vec<GuardedChange>>,
        dry_run: bool,
        at: Timestamp,
        actor: &str,
        action: &str,
    ) -> Result<Vec<bool>> {
        if dry_run {
            return Ok(vec![true; groups.len()]);
        }
        let mut applied = Vec::with_capacity(groups.len());
        for chunk in groups.chunks(GROUPS_PER_COMMIT) {
            applied.extend(self.store.apply_guarded(chunk, at, &Audit { actor, action }).await?);
        }
        Ok(applied)
    }

    /// Every memory that is not archived, each once, the last stored first (as the cycle
    /// always saw them: newest first), read a page at a time in the order of storing.
    async fn all_live_memories(&self) -> Result<Vec<Memory>> {
        let mut memories: Vec<Memory> = Vec::new();
        let mut after = 0;
        loop {
            let page = self.store.live_memories_after(after, PAGE).await?;
            let done = page.len() < PAGE as usize;
            if let Some(&(last, _)) = page.last() {
                after = last;
            }
            memories.extend(page.into_iter().map(|(_, memory)| memory));
            if done {
                memories.reverse();
                return Ok(memories);
            }
        }
    }

    pub async fn list_conflicts(&self, status: Option<String>) -> Result<ConflictList> {
        let status = match status.as_deref() {
            None => Some(ConflictStatus::Open),
            Some("all") => None,
            Some(text) => Some(ConflictStatus::parse(text).ok_or_else(|| Error::Invalid {
                field: "status",
                reason: format!("`{text}` is not one of open, resolved, all"),
            })?),
        };
        let mut conflicts = Vec::new();
        for record in self.store.list_conflicts(status).await? {
            conflicts.push(self.conflict_view(record).await?);
        }
        Ok(ConflictList { conflicts })
    }

    async fn conflict_view(&self, record: ConflictRecord) -> Result<Conflict> {
        let memory_ids: Vec<String> = record.memory_ids().cloned().collect();
        let memories = self.store.get_memories(&memory_ids).await?;
        Ok(Conflict {
            id: record.id,
            subject: record.subject,
            repo: record.repo,
            sides: record.sides,
            memory_ids,
            memories,
            reason: record.reason,
            status: record.status,
            detected_at: record.detected_at,
            resolution: record.resolution,
            resolved_at: record.resolved_at,
        })
    }

    /// Settles an open conflict: keep one side, keep every side, or merge them into a new
    /// memory; all of it in one transaction.
    pub async fn resolve_conflict(
        &self,
        id: &str,
        resolution: ConflictResolution,
        actor: &str,
    ) -> Result<Conflict> {
        let _decision = self.decision_lock().await?;
        let record = self.open_conflict(id).await?;
        let now = Timestamp::now();
        let settlement = match resolution.action {
            ResolutionAction::Keep => {
                let keep = resolution.memory_id.ok_or_else(|| Error::Invalid {
                    field: "memoryId",
                    reason: "is required with `keep`: name a memory of the side to keep".to_owned(),
                })?;
                if !record.memory_ids().any(|id| *id == keep) {
                    return Err(Error::Invalid {
                        field: "memoryId",
                        reason: format!("`{keep}` is not one of this conflict's memories"),
                    });
                }
                keep_side(&record, &keep, None, now)
            }
            ResolutionAction::KeepBoth => Settlement {
                resolution: "keepBoth".to_owned(),
                insert: None,
                changes: record.memory_ids().map(|id| (id.clone(), activate())).collect(),
                at: now,
            },
            ResolutionAction::Merge => {
                let ids: Vec<String> = record.memory_ids().cloned().collect();
                let memories = self.store.get_memories(&ids).await?;
                let first =
                    memories.first().ok_or_else(|| Error::MemoryNotFound(ids[0].clone()))?;
                let content = match resolution.content {
                    Some(content) => content,
                    None if ids.len() == 2 => memories
                        .iter()
                        .map(|memory| memory.content.trim())
                        .collect::<Vec<_>>()
                        .join("\n"),
                    None => {
                        return Err(Error::Invalid {
                            field: "content",
                            reason: format!(
                                "is required to merge a conflict of {} memories: write the one \
                                 that replaces them",
                                ids.len()
                            ),
                        });
                    }
                };
                let content = validate::required_text(
                    "content",
                    Some(content),
                    cairn_types::MAX_CONTENT_BYTES,
                )?;
                let mut metadata = cairn_types::JsonObject::new();
                metadata.insert("mergedFrom".to_owned(), json!(ids));
                let merged = crate::new_memory(
                    cairn_types::NewMemory {
                        content,
                        scope: first.scope,
                        repo: first.repo.clone(),
                        tags: first.tags.clone(),
                        source: Some(format!("conflict {id}")),
                        metadata,
                    },
                    now,
                )?;
                Settlement {
                    resolution: format!("merge {}", merged.id),
                    insert: Some(merged),
                    changes: ids.into_iter().map(|id| (id, archive(now))).collect(),
                    at: now,
                }
            }
        };
        let inserted = settlement.insert.is_some();
        self.settle(&record.id, &settlement, actor).await?;
        if inserted {
            self.wake_embedder(1);
        }
        let record = self
            .store
            .get_conflict(id)
            .await?
            .ok_or_else(|| Error::ConflictNotFound(id.to_owned()))?;
        self.conflict_view(record).await
    }

    async fn open_conflict(&self, id: &str) -> Result<ConflictRecord> {
        let record = self
            .store
            .get_conflict(id)
            .await?
            .ok_or_else(|| Error::ConflictNotFound(id.to_owned()))?;
        match record.status {
            ConflictStatus::Open => Ok(record),
            ConflictStatus::Resolved => Err(Error::ConflictResolved(id.to_owned())),
        }
    }

    async fn settle(&self, id: &str, settlement: &Settlement, actor: &str) -> Result<()> {
        let audit = Audit { actor, action: "resolve" };
        match self.store.settle_conflict(id, settlement, &audit).await? {
            true => Ok(()),
            // The decisions lock keeps others from settling it meanwhile; a conflict erased
            // meanwhile is gone.
            false => Err(Error::ConflictResolved(id.to_owned())),
        }
    }

    /// A review decision on `memory`, applied with the settling of the open conflicts it
    /// is in: approving it keeps its side; rejecting it keeps the other side once no memory
    /// of its own is left (in a conflict of two sides). The caller holds the decisions lock.
    pub(crate) async fn decide_in_conflicts(
        &self,
        memory: &Memory,
        change: MemoryChange,
        approved: bool,
        actor: &str,
        action: &str,
    ) -> Result<()> {
        let now = Timestamp::now();
        let open = self.store.list_conflicts(Some(ConflictStatus::Open)).await?;
        let mut own_change = Some(change);
        for record in open.iter().filter(|record| record.memory_ids().any(|id| *id == memory.id)) {
            let settlement = if approved {
                Some(keep_side(record, &memory.id, own_change.clone(), now))
            } else {
                self.rejected_side(record, &memory.id, now).await?
            };
            if let Some(mut settlement) = settlement {
                if let Some(change) = own_change.take() {
                    settlement.changes.retain(|(id, _)| *id != memory.id);
                    settlement.changes.push((memory.id.clone(), change));
                }
                self.settle(&record.id, &settlement, actor).await?;
            }
        }
        if let Some(change) = own_change {
            self.store
                .update_memory(&memory.id, &change, now, &Audit { actor, action })
                .await?
                .ok_or_else(|| Error::MemoryNotFound(memory.id.clone()))?;
        }
        Ok(())
    }

    /// When rejecting `rejected` leaves its side of a two-sided conflict with no live memory,
    /// the settlement keeping the other side.
    async fn rejected_side(
        &self,
        record: &ConflictRecord,
        rejected: &str,
        now: Timestamp,
    ) -> Result<Option<Settlement>> {
        let [own, other] = &record.sides[..] else { return Ok(None) };
        let (own, other) = if own.memory_ids.iter().any(|id| id == rejected) {
            (own, other)
        } else {
            (other, own)
        };
        let rest: Vec<String> =
            own.memory_ids.iter().filter(|id| *id != rejected).cloned().collect();
        let live = self.store.get_memories(&rest).await?;
        if live.iter().any(|memory| memory.archived_at.is_none()) {
            return Ok(None);
        }
        Ok(other.memory_ids.first().map(|keep| keep_side(record, keep, None, now)))
    }
}

/// What the cycle does, decided from the memories alone (CPU work for a blocking thread).
fn plan(memories: &[Memory], similarity: f64, cutoff: Timestamp) -> Plan {
    // Near-duplicates: keep the most recalled (then the oldest) of each group.
    let candidates: Vec<Candidate<'_>> = memories.iter().map(candidate).collect();
    let mut merges = dream::near_duplicate_groups(&candidates, similarity);
    for group in &mut merges {
        group.sort_by(|&a, &b| {
            let (a, b) = (&memories[a], &memories[b]);
            b.recall_count.cmp(&a.recall_count).then(a.created_at.cmp(&b.created_at))
        });
    }
    let merged_away: HashSet<usize> =
        merges.iter().flat_map(|group| group[1..].iter().copied()).collect();

    // Stale: active, and neither changed nor recalled within the window.
    let stale = (0..memories.len())
        .filter(|i| !merged_away.contains(i))
        .filter(|&i| {
            let memory = &memories[i];
            let touched =
                memory.last_recalled_at.map_or(memory.updated_at, |at| at.max(memory.updated_at));
            memory.status == Status::Active && touched < cutoff
        })
        .collect();

    // Conflicts among what remains.
    let remaining: Vec<usize> = (0..memories.len()).filter(|i| !merged_away.contains(i)).collect();
    let candidates: Vec<Candidate<'_>> =
        remaining.iter().map(|&i| candidate(&memories[i])).collect();
    let conflicts = dream::conflicts(&candidates)
        .into_iter()
        .map(|set| FoundConflict {
            subject: set.subject,
            repo: set.repo.map(str::to_owned),
            sides: set
                .sides
                .into_iter()
                .map(|side| (side.label, side.items.into_iter().map(|i| remaining[i]).collect()))
                .collect(),
            reason: set.reason,
        })
        .collect();
    Plan { merges, stale, conflicts }
}

/// The changes merging `group` (kept first) makes: the others archived into the kept one,
/// which gains their tags and a `mergedFrom` entry for each; every one guarded by the version
/// the cycle read.
fn merge_changes(memories: &[Memory], group: &[usize]) -> Vec<GuardedChange> {
    let kept = &memories[group[0]];
    let mut metadata = kept.metadata.clone();
    let mut provenance = match metadata.remove("mergedFrom") {
        Some(Value::Array(items)) => items,
        _ => Vec::new(),
    };
    let mut tags = kept.tags.clone();
    let mut changes = Vec::with_capacity(group.len());
    for other in group[1..].iter().map(|&i| &memories[i]) {
        provenance
            .push(json!({"id": other.id, "source": other.source, "createdAt": other.created_at}));
        for tag in &other.tags {
            if !tags.contains(tag) {
                tags.push(tag.clone());
            }
        }
        let mut other_metadata = other.metadata.clone();
        other_metadata.insert("mergedInto".to_owned(), Value::String(kept.id.clone()));
        changes.push(GuardedChange {
            id: other.id.clone(),
            change: MemoryChange {
                archived_at: Some(Some(Timestamp::now())),
                metadata: Some(other_metadata),
                ..MemoryChange::default()
            },
            expected: Version::of(other),
        });
    }
    metadata.insert("mergedFrom".to_owned(), Value::Array(provenance));
    changes.push(GuardedChange {
        id: kept.id.clone(),
        change: MemoryChange {
            metadata: Some(metadata),
            tags: Some(tags),
            ..MemoryChange::default()
        },
        expected: Version::of(kept),
    });
    changes
}

/// Keeping the side of `keep`: its memories active, the others archived. `own` replaces the
/// change of `keep` itself.
fn keep_side(
    record: &ConflictRecord,
    keep: &str,
    own: Option<MemoryChange>,
    now: Timestamp,
) -> Settlement {
    let side = record.sides.iter().find(|side| side.memory_ids.iter().any(|id| id == keep));
    let kept: HashSet<&String> =
        side.map(|side| side.memory_ids.iter().collect()).unwrap_or_default();
    let mut changes: Vec<(String, MemoryChange)> = record
        .memory_ids()
        .map(|id| (id.clone(), if kept.contains(id) { activate() } else { archive(now) }))
        .collect();
    if let Some(own) = own {
        changes.retain(|(id, _)| id != keep);
        changes.push((keep.to_owned(), own));
    }
    Settlement { resolution: format!("keep {keep}"), insert: None, changes, at: now }
}

fn activate() -> MemoryChange {
    MemoryChange {
        status: Some(Status::Active),
        archived_at: Some(None),
        ..MemoryChange::default()
    }
}

/// A memory a settlement decided against: archived, and `stale` (as a rejection leaves it),
/// so it does not come back as a memory in review should it be restored.
fn archive(now: Timestamp) -> MemoryChange {
    MemoryChange {
        status: Some(Status::Stale),
        archived_at: Some(Some(now)),
        ..MemoryChange::default()
    }
}

fn candidate(memory: &Memory) -> Candidate<'_> {
    Candidate { content: &memory.content, repo: memory.repo.as_deref() }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicI64, Ordering};

    use cairn_types::{MemoryPatch, NewMemory, Scope};

    use super::*;

    const DAY: i64 = DAY_MILLIS;

    /// An engine on a fresh SQLite file whose clock the test moves.
    fn engine(directory: &tempfile::TempDir) -> (Engine, Arc<AtomicI64>) {
        let store = cairn_store_sqlite::SqliteStore::open(&directory.path().join("cairn.db"));
        let now = Arc::new(AtomicI64::new(Timestamp::now().as_millis()));
        let clock = now.clone();
        let engine = Engine::new(Arc::new(store.unwrap()))
            .with_clock(Arc::new(move || Timestamp::from_millis(clock.load(Ordering::SeqCst))));
        (engine, now)
    }

    fn remember(content: &str) -> NewMemory {
        NewMemory {
            content: content.to_owned(),
            scope: Scope::Repo,
            repo: Some("shop".to_owned()),
            tags: Vec::new(),
            source: None,
            metadata: Default::default(),
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn memories_nobody_touched_within_the_window_go_stale() {
        let directory = tempfile::tempdir().unwrap();
        let (engine, now) = engine(&directory);
        let old = engine.create_memory(remember("The build uses make."), "t").await.unwrap();
        now.fetch_add(2 * DAY, Ordering::SeqCst);
        let fresh = engine.create_memory(remember("Releases are tagged."), "t").await.unwrap();
        let request = DreamRequest { stale_after_days: Some(1.0), ..DreamRequest::default() };
        let report = engine.dream(request, "t").await.unwrap();
        assert_eq!(report.staled, std::slice::from_ref(&old.id));
        assert_eq!(engine.get_memory(&old.id).await.unwrap().status, Status::Stale);
        assert_eq!(engine.get_memory(&fresh.id).await.unwrap().status, Status::Active);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn what_changes_while_the_cycle_runs_is_left_alone() {
        let directory = tempfile::tempdir().unwrap();
        let (engine, now) = engine(&directory);
        let kept = engine.create_memory(remember("Run make test before pushing."), "t").await;
        let kept = kept.unwrap();
        now.fetch_add(1, Ordering::SeqCst);
        let twin = engine.create_memory(remember("Run make test before pushing!"), "t").await;
        let twin = twin.unwrap();
        let other = engine.create_memory(remember("Staging lives at stage.shop.test."), "t").await;
        let other = other.unwrap();
        let edited = engine.create_memory(remember("The API answers on port 8080."), "t").await;
        let edited = edited.unwrap();
        now.fetch_add(100 * DAY, Ordering::SeqCst);

        // The cycle reads: the twins are to merge, the kept one and the others to go stale.
        let read = engine.read_for_dream(90.0, 0.8).await.unwrap();
        assert_eq!(read.plan.merges.len(), 1);
        assert_eq!(read.plan.stale.len(), 3);

        // Meanwhile a user tags the memory to keep, edits another, and one is recalled.
        let tag = MemoryPatch { tags: Some(vec!["ci".to_owned()]), ..MemoryPatch::default() };
        engine.update_memory(&kept.id, tag, "user").await.unwrap();
        let edit = MemoryPatch {
            content: Some("The API answers on port 9090.".to_owned()),
            ..MemoryPatch::default()
        };
        engine.update_memory(&edited.id, edit, "user").await.unwrap();
        engine
            .store
            .record_recall(std::slice::from_ref(&other.id), "task", Timestamp::now())
            .await
            .unwrap();

        let report = engine.apply_dream(read, false, "dream").await.unwrap();
        assert!(report.merged.is_empty(), "a merge from an old copy would lose the tag");
        assert!(report.staled.is_empty(), "an edited or recalled memory is not stale");
        assert_eq!(engine.get_memory(&kept.id).await.unwrap().tags, ["ci"]);
        assert!(engine.get_memory(&twin.id).await.unwrap().archived_at.is_none());
        assert_eq!(engine.get_memory(&edited.id).await.unwrap().status, Status::Active);
        assert_eq!(engine.get_memory(&other.id).await.unwrap().status, Status::Active);

        // The next cycle sees them afresh.
        let report = engine.dream(DreamRequest::default(), "dream").await.unwrap();
        assert_eq!(report.merged.len(), 1);
        let kept_now = engine.get_memory(&report.merged[0].kept_id).await.unwrap();
        assert!(kept_now.tags.contains(&"ci".to_owned()), "{kept_now:?}");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn many_memories_preferring_rivals_make_one_conflict() {
        let directory = tempfile::tempdir().unwrap();
        let (engine, _) = engine(&directory);
        let inputs: Vec<NewMemory> = (0..1_400)
            .map(|i| match i % 2 {
                0 => remember(&format!("Use pnpm in this repo. Note {i}.")),
                _ => remember(&format!("Use npm in this repo. Note {i}.")),
            })
            .collect();
        engine.create_memories(inputs, "t").await.unwrap();
        let request = DreamRequest { dry_run: true, ..DreamRequest::default() };
        let report = engine.dream(request, "t").await.unwrap();
        assert_eq!(report.conflicts.len(), 1);
        let conflict = &report.conflicts[0];
        // Sides in the order their memories were listed: newest first.
        assert_eq!(
            conflict.reason,
            "package manager in `shop`: npm (700 memories) against pnpm (700 memories)"
        );
        assert_eq!(conflict.memories.len(), 1_400);

        let report = engine.dream(DreamRequest::default(), "t").await.unwrap();
        assert_eq!(report.conflicts.len(), 1);
        let id = report.conflicts[0].id.clone();
        let pnpm = report.conflicts[0].sides[1].memory_ids[0].clone();
        assert_eq!(engine.review_queue(None, None).await.unwrap().total, 1_400);

        // Keeping one memory's side keeps all of it, in one step.
        let keep = ConflictResolution {
            action: ResolutionAction::Keep,
            memory_id: Some(pnpm),
            content: None,
        };
        let settled = engine.resolve_conflict(&id, keep, "t").await.unwrap();
        assert_eq!(settled.status, ConflictStatus::Resolved);
        assert_eq!(engine.memory_count().await.unwrap(), 700);
        let merge =
            ConflictResolution { action: ResolutionAction::Merge, memory_id: None, content: None };
        assert!(matches!(
            engine.resolve_conflict(&id, merge, "t").await,
            Err(Error::ConflictResolved(_))
        ));
    }
}
