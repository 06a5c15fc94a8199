//! The tools: their inputs (JSON Schemas from schemars), annotations, and how each one's
//! result reads as text.

use cairn_client::types::{
    CodingContextRequest, ConflictQuery, ConflictResolution, ContextRequest, DreamRequest,
    EvidencePackRequest, GuardFinding, GuardRequest, MemoryListQuery, MemoryPatch, NewMemory,
    OutcomeRequest, PatchEvidenceRequest, ResolutionAction, SearchQuery,
};
use cairn_client::{Client, Error};
use http::HeaderMap;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolResult, ContentBlock};
use rmcp::schemars::{self, JsonSchema};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, tool, tool_handler, tool_router};
use serde::{Deserialize, Serialize};
use serde_json::json;

/// Every tool's name, in the order they are listed.
pub const TOOL_NAMES: [&str; 20] = [
    "memory_store",
    "memory_get",
    "memory_update",
    "memory_archive",
    "memory_list",
    "memory_search",
    "context_pack",
    "coding_context",
    "guard_check",
    "outcome_record",
    "patch_evidence",
    "evidence_pack",
    "review_queue",
    "review_decide",
    "conflicts_list",
    "conflict_resolve",
    "dream_cycle",
    "connectors_list",
    "connector_sync",
    "health",
];

/// The tools, answering through a client of the daemon.
#[derive(Clone)]
pub struct CairnTools {
    client: Client,
}

impl std::fmt::Debug for CairnTools {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CairnTools").field("client", &self.client).finish()
    }
}

/// A memory's scope.
#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
enum Scope {
    Repo,
    User,
    Global,
    Task,
}

/// A memory's status.
#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
enum Status {
    Active,
    Stale,
    Review,
}

impl From<Scope> for cairn_client::types::Scope {
    fn from(scope: Scope) -> Self {
        match scope {
            Scope::Repo => Self::Repo,
            Scope::User => Self::User,
            Scope::Global => Self::Global,
            Scope::Task => Self::Task,
        }
    }
}

impl From<Status> for cairn_client::types::Status {
    fn from(status: Status) -> Self {
        match status {
            Status::Active => Self::Active,
            Status::Stale => Self::Stale,
            Status::Review => Self::Review,
        }
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct StoreArgs {
    /// What to remember: a fact, a rule, a lesson (at most 64 KiB).
    content: String,
    /// `repo` (default with a repo), `user`, `global` (default otherwise) or `task`.
    scope: Option<Scope>,
    /// The repository it belongs to, e.g. `shop`.
    repo: Option<String>,
    /// Labels to find it by (at most 32).
    tags: Option<Vec<String>>,
    /// Where it came from (a file, a URL, a tool).
    source: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct IdArgs {
    /// The id (`mem_…`, `cfl_…`, `conn_…`).
    id: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct UpdateArgs {
    /// The memory's id (`mem_…`).
    id: String,
    /// The new text.
    content: Option<String>,
    /// The new scope: `repo`, `user`, `global` or `task`.
    scope: Option<Scope>,
    /// The new status: `active`, `stale` or `review`.
    status: Option<Status>,
    /// Replaces the tags.
    tags: Option<Vec<String>>,
}

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ListArgs {
    /// Only memories of this scope: `repo`, `user`, `global` or `task`.
    scope: Option<Scope>,
    /// Only memories of this status: `active`, `stale` or `review`.
    status: Option<Status>,
    /// Only this repository's memories, e.g. `shop`.
    repo: Option<String>,
    /// Page size (default 50, at most 500).
    limit: Option<u32>,
    /// How many to skip, for the next page.
    offset: Option<u64>,
    /// Include archived memories.
    include_archived: Option<bool>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct SearchArgs {
    /// The words to look for.
    query: String,
    /// The repository the search is for: its memories rank higher, other repositories'
    /// are left out.
    repo: Option<String>,
    /// Only memories of this scope: `repo`, `user`, `global` or `task`.
    scope: Option<Scope>,
    /// How many hits (default 20, at most 100).
    limit: Option<u32>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ContextArgs {
    /// What you are about to do.
    task: String,
    /// The repository the task is in.
    repo: Option<String>,
    /// The most tokens the context may take (default 2000, from 1 to 1,000,000).
    #[schemars(range(min = 1, max = 1_000_000))]
    token_budget: Option<u32>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct CodingContextArgs {
    /// What you are about to do.
    task: String,
    /// The files the change touches, relative to the repository root.
    files: Vec<String>,
    /// The repository the task is in.
    repo: Option<String>,
    /// The most tokens the context may take (default 2000, from 1 to 1,000,000).
    #[schemars(range(min = 1, max = 1_000_000))]
    token_budget: Option<u32>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct GuardArgs {
    /// The action about to run: a shell command, an SQL statement, …
    action: String,
    /// The repository it runs in: its rules and its earlier failures apply.
    repo: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct OutcomeArgs {
    /// The command that ran.
    command: String,
    /// Its exit code (0 for success).
    exit_code: i32,
    /// The task it served.
    task: Option<String>,
    /// The repository it ran in.
    repo: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct EvidenceArgs {
    /// The task the patch served.
    task: String,
    /// The files it changed.
    files: Option<Vec<String>>,
    /// The commands that checked it (tests, builds).
    commands: Option<Vec<String>>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct TaskArgs {
    /// The task.
    task: String,
}

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct LimitArgs {
    /// How many (default 50).
    limit: Option<u32>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
enum Decision {
    Approve,
    Reject,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct DecideArgs {
    /// The memory in review (`mem_…`).
    id: String,
    /// `approve` (it becomes active) or `reject` (it is archived).
    decision: Decision,
}

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ConflictsArgs {
    /// `open` (default), `resolved` or `all`.
    status: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
enum Resolution {
    Keep,
    KeepBoth,
    Merge,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ResolveArgs {
    /// The conflict (`cfl_…`).
    id: String,
    /// `keep` one memory (`memoryId`), `keepBoth`, or `merge` them (into `content`).
    action: Resolution,
    /// With `keep`: the memory to keep.
    memory_id: Option<String>,
    /// With `merge`: the merged text (default: both texts).
    content: Option<String>,
}

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct DreamArgs {
    /// Report what would change, and change nothing.
    dry_run: Option<bool>,
}

/// What a tool answers at most, in bytes: a model's context is not the place for more.
const MOST_TEXT: usize = 16 * 1024;

/// `text` within [`MOST_TEXT`], cut at a line, saying how much was left out.
fn bounded(text: String) -> String {
    if text.len() <= MOST_TEXT {
        return text;
    }
    let mut cut = MOST_TEXT;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    let cut = text[..cut].rfind('\n').unwrap_or(cut);
    format!("{}\n… ({} more bytes left out)", &text[..cut], text.len() - cut)
}

#[tool_router]
impl CairnTools {
    pub fn new(client: Client) -> CairnTools {
        CairnTools { client }
    }

    /// The client for this call: over HTTP, with the caller's own credentials.
    fn client(&self, context: &RequestContext<RoleServer>) -> Client {
        let Some(parts) = context.extensions.get::<http::request::Parts>() else {
            return self.client.clone();
        };
        let mut headers = HeaderMap::new();
        for name in [http::header::AUTHORIZATION, http::HeaderName::from_static("x-api-key")] {
            if let Some(value) = parts.headers.get(&name) {
                headers.insert(name, value.clone());
            }
        }
        self.client.with_headers(headers)
    }

    /// Stores a memory: a fact, rule or lesson worth keeping for later tasks.
    #[tool(annotations(
        title = "Store a memory",
        read_only_hint = false,
        destructive_hint = false,
        idempotent_hint = false,
        open_world_hint = false
    ))]
    async fn memory_store(
        &self,
        Parameters(args): Parameters<StoreArgs>,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let scope = args.scope.map_or(
            if args.repo.is_some() {
                cairn_client::types::Scope::Repo
            } else {
                cairn_client::types::Scope::Global
            },
            Into::into,
        );
        let memory = NewMemory {
            content: args.content,
            scope,
            repo: args.repo,
            tags: args.tags.unwrap_or_default(),
            source: args.source,
            metadata: Default::default(),
        };
        let created = self.client(&context).create_memory(&memory).await;
        answer(created, |memory| format!("Stored {} ({}).", memory.id, memory.scope))
    }

    /// Reads one memory by id, archived or not.
    #[tool(annotations(title = "Read a memory", read_only_hint = true, open_world_hint = false))]
    async fn memory_get(
        &self,
        Parameters(args): Parameters<IdArgs>,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let memory = self.client(&context).get_memory(&args.id).await;
        answer(memory, |memory| {
            format!("{} [{} {}]: {}", memory.id, memory.scope, memory.status, memory.content)
        })
    }

    /// Changes a memory's text, scope, status or tags.
    #[tool(annotations(
        title = "Change a memory",
        read_only_hint = false,
        destructive_hint = true,
        idempotent_hint = true,
        open_world_hint = false
    ))]
    async fn memory_update(
        &self,
        Parameters(args): Parameters<UpdateArgs>,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let patch = MemoryPatch {
            content: args.content,
            scope: args.scope.map(Into::into),
            status: args.status.map(Into::into),
            tags: args.tags,
            ..MemoryPatch::default()
        };
        let memory = self.client(&context).update_memory(&args.id, &patch).await;
        answer(memory, |memory| format!("Updated {}: {}", memory.id, memory.content))
    }

    /// Archives a memory: it leaves lists, retrieval and guards, and can be restored.
    #[tool(annotations(
        title = "Archive a memory",
        read_only_hint = false,
        destructive_hint = true,
        idempotent_hint = true,
        open_world_hint = false
    ))]
    async fn memory_archive(
        &self,
        Parameters(args): Parameters<IdArgs>,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let memory = self.client(&context).archive_memory(&args.id).await;
        answer(memory, |memory| format!("Archived {}.", memory.id))
    }

    /// Lists memories, newest first, with filters.
    #[tool(annotations(title = "List memories", read_only_hint = true, open_world_hint = false))]
    async fn memory_list(
        &self,
        Parameters(args): Parameters<ListArgs>,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let filter = MemoryListQuery {
            scope: args.scope.map(Into::into),
            status: args.status.map(Into::into),
            repo: args.repo,
            limit: args.limit,
            offset: args.offset,
            include_archived: args.include_archived,
        };
        let list = self.client(&context).list_memories(&filter).await;
        answer(list, |list| {
            let mut text = format!("{} of {} memories:", list.memories.len(), list.total);
            for memory in &list.memories {
                text.push_str(&format!(
                    "\n- {} [{} {}] {}",
                    memory.id, memory.scope, memory.status, memory.content
                ));
            }
            text
        })
    }

    /// Searches memories by their words (and meaning, when the daemon has a model).
    #[tool(annotations(title = "Search memories", read_only_hint = true, open_world_hint = false))]
    async fn memory_search(
        &self,
        Parameters(args): Parameters<SearchArgs>,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let query = SearchQuery {
            q: Some(args.query),
            repo: args.repo,
            scope: args.scope.map(Into::into),
            limit: args.limit,
            ..SearchQuery::default()
        };
        let result = self.client(&context).search(&query).await;
        answer(result, |result| {
            if result.hits.is_empty() {
                return "No memory matches.".to_owned();
            }
            let hits = result.hits.iter().map(|hit| {
                format!("- {} ({:.2}) {}", hit.memory.id, hit.score, hit.memory.content)
            });
            hits.collect::<Vec<_>>().join("\n")
        })
    }

    /// The memories that matter for a task, packed within a token budget. Ask before you
    /// start a task.
    #[tool(annotations(
        title = "Context pack for a task",
        read_only_hint = true,
        open_world_hint = false
    ))]
    async fn context_pack(
        &self,
        Parameters(args): Parameters<ContextArgs>,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let request =
            ContextRequest { task: args.task, repo: args.repo, token_budget: args.token_budget };
        let pack = self.client(&context).context(&request).await;
        answer(pack, |pack| {
            if pack.context.is_empty() {
                "No memories bear on this task.".to_owned()
            } else {
                pack.context.clone()
            }
        })
    }

    /// Context for a task and the files it touches, with the memories that name each file.
    #[tool(annotations(
        title = "Context for a code change",
        read_only_hint = true,
        open_world_hint = false
    ))]
    async fn coding_context(
        &self,
        Parameters(args): Parameters<CodingContextArgs>,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let request = CodingContextRequest {
            task: args.task,
            files: args.files,
            repo: args.repo,
            token_budget: args.token_budget,
        };
        let result = self.client(&context).coding_context(&request).await;
        answer(result, |result| {
            let mut text = result.pack.context.clone();
            for file in result.files.iter().filter(|file| !file.memory_ids.is_empty()) {
                text.push_str(&format!("\n{}: {}", file.path, file.memory_ids.join(", ")));
            }
            if text.is_empty() { "No memories bear on this change.".to_owned() } else { text }
        })
    }

    /// Checks an action (a shell command, an SQL statement) before running it: built-in
    /// rules for destructive actions, rules learned from memories, earlier failures.
    #[tool(annotations(title = "Check an action", read_only_hint = true, open_world_hint = false))]
    async fn guard_check(
        &self,
        Parameters(args): Parameters<GuardArgs>,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let verdict = self
            .client(&context)
            .guard(&GuardRequest { action: args.action, repo: args.repo })
            .await;
        answer(verdict, |verdict| {
            let mut lines =
                vec![if verdict.allowed { "Allowed.".to_owned() } else { "Blocked.".to_owned() }];
            lines.extend(
                verdict
                    .blockers
                    .iter()
                    .map(|finding| format!("Blocker: {}", finding_text(finding))),
            );
            lines.extend(
                verdict
                    .warnings
                    .iter()
                    .map(|finding| format!("Warning: {}", finding_text(finding))),
            );
            lines.join("\n")
        })
    }

    /// Records how a command went, so a command that failed warns the next time.
    #[tool(annotations(
        title = "Record an outcome",
        read_only_hint = false,
        destructive_hint = false,
        idempotent_hint = false,
        open_world_hint = false
    ))]
    async fn outcome_record(
        &self,
        Parameters(args): Parameters<OutcomeArgs>,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let outcome = OutcomeRequest {
            command: args.command,
            exit_code: args.exit_code,
            task: args.task,
            repo: args.repo,
        };
        let recorded = self.client(&context).record_outcome(&outcome).await;
        answer(recorded, |outcome| format!("Recorded {}.", outcome.outcome_id))
    }

    /// Records the evidence behind a patch: its task, the files it changed and the
    /// commands that checked it.
    #[tool(annotations(
        title = "Record patch evidence",
        read_only_hint = false,
        destructive_hint = false,
        idempotent_hint = false,
        open_world_hint = false
    ))]
    async fn patch_evidence(
        &self,
        Parameters(args): Parameters<EvidenceArgs>,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let evidence = PatchEvidenceRequest {
            task: args.task,
            files: args.files.unwrap_or_default(),
            commands: args.commands.unwrap_or_default(),
        };
        let recorded = self.client(&context).record_patch_evidence(&evidence).await;
        answer(recorded, |evidence| format!("Recorded {}.", evidence.evidence_id))
    }

    /// Everything recorded for a task: its patch evidence, the memories used, its outcomes.
    #[tool(annotations(
        title = "Evidence pack for a task",
        read_only_hint = true,
        open_world_hint = false
    ))]
    async fn evidence_pack(
        &self,
        Parameters(args): Parameters<TaskArgs>,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let pack = self
            .client(&context)
            .evidence_pack(&EvidencePackRequest { task: args.task, format: None })
            .await;
        // The model reads the records themselves, not their count.
        answer(pack, |pack| bounded(pack.to_markdown()))
    }

    /// Memories awaiting a decision (status `review`), e.g. both sides of a conflict.
    #[tool(annotations(title = "Review queue", read_only_hint = true, open_world_hint = false))]
    async fn review_queue(
        &self,
        Parameters(args): Parameters<LimitArgs>,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let queue = self.client(&context).review_queue(args.limit, None).await;
        answer(queue, |queue| {
            let mut text = format!("{} memories await review.", queue.total);
            for memory in &queue.memories {
                text.push_str(&format!("\n- {} {}", memory.id, memory.content));
            }
            text
        })
    }

    /// Approves (it becomes active) or rejects (it is archived) a memory in review.
    #[tool(annotations(
        title = "Decide on a memory in review",
        read_only_hint = false,
        destructive_hint = true,
        idempotent_hint = false,
        open_world_hint = false
    ))]
    async fn review_decide(
        &self,
        Parameters(args): Parameters<DecideArgs>,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let client = self.client(&context);
        let (memory, verb) = match args.decision {
            Decision::Approve => (client.approve(&args.id).await, "Approved"),
            Decision::Reject => (client.reject(&args.id).await, "Rejected"),
        };
        answer(memory, |memory| format!("{verb} {}.", memory.id))
    }

    /// Conflicting memories the dream cycle found.
    #[tool(annotations(title = "List conflicts", read_only_hint = true, open_world_hint = false))]
    async fn conflicts_list(
        &self,
        Parameters(args): Parameters<ConflictsArgs>,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let list =
            self.client(&context).list_conflicts(&ConflictQuery { status: args.status }).await;
        answer(list, |list| {
            if list.conflicts.is_empty() {
                return "No conflicts.".to_owned();
            }
            // Each side with what its memories say: what the model needs to settle it.
            let mut text = String::new();
            for conflict in &list.conflicts {
                let repo =
                    conflict.repo.as_deref().map(|repo| format!(" in {repo}")).unwrap_or_default();
                text.push_str(&format!(
                    "- {} ({}) {}{repo}: {}\n",
                    conflict.id,
                    conflict.status.as_str(),
                    conflict.subject,
                    conflict.reason
                ));
                for side in &conflict.sides {
                    text.push_str(&format!("  - {}:\n", side.label));
                    for id in &side.memory_ids {
                        let content = conflict
                            .memories
                            .iter()
                            .find(|memory| memory.id == *id)
                            .map_or("(no longer stored)", |memory| memory.content.as_str());
                        text.push_str(&format!("    - {id}: {content}\n"));
                    }
                }
            }
            bounded(text)
        })
    }

    /// Resolves a conflict: keep one memory, keep both, or merge them into one.
    #[tool(annotations(
        title = "Resolve a conflict",
        read_only_hint = false,
        destructive_hint = true,
        idempotent_hint = false,
        open_world_hint = false
    ))]
    async fn conflict_resolve(
        &self,
        Parameters(args): Parameters<ResolveArgs>,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let action = match args.action {
            Resolution::Keep => ResolutionAction::Keep,
            Resolution::KeepBoth => ResolutionAction::KeepBoth,
            Resolution::Merge => ResolutionAction::Merge,
        };
        let resolution =
            ConflictResolution { action, memory_id: args.memory_id, content: args.content };
        let conflict = self.client(&context).resolve_conflict(&args.id, &resolution).await;
        answer(conflict, |conflict| {
            format!(
                "Resolved {}: {}.",
                conflict.id,
                conflict.resolution.clone().unwrap_or_default()
            )
        })
    }

    /// Runs the dream cycle: merges near-duplicates, marks stale memories, finds
    /// conflicts. `dryRun` reports without changing anything.
    #[tool(annotations(
        title = "Dream cycle",
        read_only_hint = false,
        destructive_hint = true,
        idempotent_hint = false,
        open_world_hint = false
    ))]
    async fn dream_cycle(
        &self,
        Parameters(args): Parameters<DreamArgs>,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let request =
            DreamRequest { dry_run: args.dry_run.unwrap_or(false), ..DreamRequest::default() };
        let report = self.client(&context).dream_cycle(&request).await;
        answer(report, |report| {
            format!(
                "Examined {} memories: {} merged groups, {} stale, {} conflicts{}.",
                report.examined,
                report.merged.len(),
                report.staled.len(),
                report.conflicts.len(),
                if report.dry_run { " (dry run: nothing changed)" } else { "" }
            )
        })
    }

    /// The folders and git repositories imported as memories.
    #[tool(annotations(title = "List connectors", read_only_hint = true, open_world_hint = false))]
    async fn connectors_list(
        &self,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let list = self.client(&context).list_connectors().await;
        answer(list, |list| {
            if list.connectors.is_empty() {
                return "No connectors.".to_owned();
            }
            let lines = list
                .connectors
                .iter()
                .map(|c| format!("- {} {} {} ({})", c.id, c.kind.as_str(), c.name, c.path));
            lines.collect::<Vec<_>>().join("\n")
        })
    }

    /// Syncs a connector now: imports what changed in its folder or repository.
    #[tool(annotations(
        title = "Sync a connector",
        read_only_hint = false,
        destructive_hint = false,
        idempotent_hint = true,
        open_world_hint = false
    ))]
    async fn connector_sync(
        &self,
        Parameters(args): Parameters<IdArgs>,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let report = self.client(&context).sync_connector(&args.id).await;
        answer(report, |report| {
            format!(
                "Sync {}: imported {}, updated {}, unchanged {}, archived {}.",
                report.status, report.imported, report.updated, report.unchanged, report.archived
            )
        })
    }

    /// The service's health: version, memories, retrieval mode.
    #[tool(annotations(title = "Health", read_only_hint = true, open_world_hint = false))]
    async fn health(
        &self,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let health = self.client(&context).health().await;
        answer(health, |health| format!("{} with {} memories.", health.status, health.memory_count))
    }
}

#[tool_handler(
    name = "cairn",
    instructions = "Cairn is your long-term memory. Before a task, ask `context_pack` (or \
        `coding_context`) for what is known; before running a shell command, ask \
        `guard_check`; after it runs, `outcome_record` its exit code; store what you learn \
        with `memory_store`."
)]
impl ServerHandler for CairnTools {}

/// A tool's result: the API's JSON as structured content and `text` for the model; an
/// API error becomes a tool error carrying its code and message.
fn answer<T: Serialize>(
    result: Result<T, Error>,
    text: impl FnOnce(&T) -> String,
) -> Result<CallToolResult, ErrorData> {
    match result {
        Ok(value) => {
            let structured = serde_json::to_value(&value)
                .map_err(|error| ErrorData::internal_error(error.to_string(), None))?;
            let mut result = CallToolResult::structured(structured);
            result.content = vec![ContentBlock::text(text(&value))];
            Ok(result)
        }
        Err(Error::Api(error)) => {
            let envelope = json!({"error": {"code": error.code, "message": error.message, "status": error.status}});
            let mut result = CallToolResult::structured_error(envelope);
            result.content = vec![ContentBlock::text(format!("{}: {}", error.code, error.message))];
            Ok(result)
        }
        Err(error) => {
            let envelope = json!({"error": {"code": "UNAVAILABLE", "message": error.to_string()}});
            let mut result = CallToolResult::structured_error(envelope);
            result.content = vec![ContentBlock::text(error.to_string())];
            Ok(result)
        }
    }
}

fn finding_text(finding: &GuardFinding) -> String {
    let source = [&finding.memory_id, &finding.outcome_id]
        .into_iter()
        .flatten()
        .cloned()
        .collect::<Vec<_>>();
    if source.is_empty() {
        format!("{} ({})", finding.message, finding.code)
    } else {
        format!("{} ({}, {})", finding.message, finding.code, source.join(", "))
    }
}
