//! The memory API from the command line: `cairn memories`, `search`, `context`,
//! `coding-context`, `guard`, `outcome`, `evidence`, `review`, `conflicts` and `dream`.
//! Human-readable by default; `--json` prints the API's result as it is.

use std::process::ExitCode;

use cairn_client::types::{
    CodingContextRequest, ConflictQuery, ConflictResolution, ContextRequest, DreamRequest,
    EvidencePackRequest, GuardFinding, GuardRequest, GuardResult, Memory, MemoryListQuery,
    MemoryPatch, NewMemory, OutcomeRequest, PatchEvidenceRequest, ResolutionAction, Scope,
    SearchQuery, Status,
};

use crate::client::{ClientArgs, Paint, print_json};

#[derive(Debug, clap::Subcommand)]
pub(crate) enum MemoriesCommand {
    /// Stores a memory.
    Add {
        /// What to remember.
        text: String,
        /// repo, user, global or task [default: repo with --repo, else global].
        #[arg(long)]
        scope: Option<Scope>,
        /// The repository it belongs to.
        #[arg(long)]
        repo: Option<String>,
        /// A tag (repeat for more).
        #[arg(long = "tag")]
        tags: Vec<String>,
        /// Where it came from.
        #[arg(long)]
        source: Option<String>,
        #[command(flatten)]
        output: Output,
    },
    /// Imports memories from a JSON Lines file (`-` for standard input): one memory a line,
    /// as `POST /api/memories` takes it (`{"content": …, "scope": …}`), sent in batches of
    /// up to 1,000 (`POST /api/memories/batch`). Each batch is stored whole or not at all;
    /// a bad line stops the import, naming it, after the batches before its own. A file
    /// `cairn memories export` wrote (lines with an `id`) is restored as it was (ids,
    /// statuses, times, archived ones; `POST /api/memories/import`, admin), skipping ids
    /// already stored. Over the write rate, it waits as the daemon says and goes on.
    Import {
        /// The file; `-` reads standard input.
        file: std::path::PathBuf,
        /// Memories a request (1 to 1,000).
        #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u16).range(1..=1000))]
        batch_size: u16,
        #[command(flatten)]
        output: Output,
    },
    /// Writes every memory as JSON Lines, every field (`-` or no file: standard output), for
    /// `cairn memories import` to restore into another daemon as it was.
    Export {
        /// The file [default: standard output].
        file: Option<std::path::PathBuf>,
        /// Archived memories too.
        #[arg(long)]
        include_archived: bool,
        #[command(flatten)]
        output: Output,
    },
    /// Lists memories, newest first.
    List {
        #[arg(long)]
        scope: Option<Scope>,
        /// active, stale or review.
        #[arg(long)]
        status: Option<Status>,
        #[arg(long)]
        repo: Option<String>,
        /// Page size (default 50, at most 500).
        #[arg(long)]
        limit: Option<u32>,
        #[arg(long)]
        offset: Option<u64>,
        /// Include archived memories.
        #[arg(long)]
        archived: bool,
        #[command(flatten)]
        output: Output,
    },
    /// Shows one memory.
    Get {
        id: String,
        #[command(flatten)]
        output: Output,
    },
    /// Changes a memory's text, scope, status or tags.
    Edit {
        id: String,
        /// The new text.
        #[arg(long)]
        content: Option<String>,
        #[arg(long)]
        scope: Option<Scope>,
        #[arg(long)]
        status: Option<Status>,
        /// Replaces the tags (repeat for more).
        #[arg(long = "tag")]
        tags: Option<Vec<String>>,
        #[command(flatten)]
        output: Output,
    },
    /// Archives a memory (restorable).
    Archive {
        id: String,
        #[command(flatten)]
        output: Output,
    },
    /// Restores an archived memory.
    Restore {
        id: String,
        #[command(flatten)]
        output: Output,
    },
}

/// `--json` and the daemon's address, which every command here takes.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct Output {
    /// Print the API's result as JSON.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub client: ClientArgs,
}

pub(crate) async fn memories(command: MemoriesCommand) -> anyhow::Result<ExitCode> {
    match command {
        MemoriesCommand::Add { text, scope, repo, tags, source, output } => {
            let scope = scope.unwrap_or(if repo.is_some() { Scope::Repo } else { Scope::Global });
            let memory = NewMemory {
                content: text,
                scope,
                repo,
                tags,
                source,
                metadata: Default::default(),
            };
            let created = output.client.connect()?.create_memory(&memory).await?;
            if output.json {
                print_json(&created)?;
            } else {
                println!("stored {} ({})", created.id, created.scope);
            }
        }
        MemoriesCommand::Import { file, batch_size, output } => {
            let imported = import(&file, usize::from(batch_size), &output).await?;
            if output.json {
                print_json(&serde_json::json!({ "imported": imported }))?;
            } else {
                println!("imported {imported} memories");
            }
        }
        MemoriesCommand::Export { file, include_archived, output } => {
            let exported = export(file.as_deref(), include_archived, &output).await?;
            eprintln!("exported {exported} memories");
        }
        MemoriesCommand::List { scope, status, repo, limit, offset, archived, output } => {
            let filter = MemoryListQuery {
                scope,
                status,
                repo,
                limit,
                offset,
                include_archived: archived.then_some(true),
            };
            let list = output.client.connect()?.list_memories(&filter).await?;
            if output.json {
                print_json(&list)?;
            } else {
                let paint = Paint::stdout();
                for memory in &list.memories {
                    print_memory_line(&paint, memory);
                }
                let shown = list.memories.len() as u64;
                let first = if shown == 0 { 0 } else { list.offset + 1 };
                println!(
                    "{}",
                    paint.dim(&format!("{first}–{} of {}", list.offset + shown, list.total))
                );
            }
        }
        MemoriesCommand::Get { id, output } => {
            let memory = output.client.connect()?.get_memory(&id).await?;
            show_memory(&output, &memory)?;
        }
        MemoriesCommand::Edit { id, content, scope, status, tags, output } => {
            let patch = MemoryPatch { content, scope, status, tags, ..MemoryPatch::default() };
            if patch.is_empty() {
                anyhow::bail!("say what to change: --content, --scope, --status or --tag");
            }
            let memory = output.client.connect()?.update_memory(&id, &patch).await?;
            show_memory(&output, &memory)?;
        }
        MemoriesCommand::Archive { id, output } => {
            let memory = output.client.connect()?.archive_memory(&id).await?;
            if output.json {
                print_json(&memory)?;
            } else {
                println!("archived {id}; `cairn memories restore {id}` brings it back");
            }
        }
        MemoriesCommand::Restore { id, output } => {
            let memory = output.client.connect()?.restore_memory(&id).await?;
            if output.json {
                print_json(&memory)?;
            } else {
                println!("restored {id}");
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn show_memory(output: &Output, memory: &Memory) -> anyhow::Result<()> {
    if output.json {
        return print_json(memory);
    }
    let paint = Paint::stdout();
    println!("{}", paint.bold(&memory.id));
    println!("{}", memory.content);
    let mut facts = vec![format!("scope {}", memory.scope), format!("status {}", memory.status)];
    facts.extend(memory.repo.as_ref().map(|repo| format!("repo {repo}")));
    if !memory.tags.is_empty() {
        facts.push(format!("tags {}", memory.tags.join(", ")));
    }
    facts.extend(memory.source.as_ref().map(|source| format!("source {source}")));
    facts.push(format!("created {}", memory.created_at));
    facts.extend(memory.archived_at.map(|at| format!("archived {at}")));
    println!("{}", paint.dim(&facts.join(" · ")));
    Ok(())
}

/// One line of a list: id, scope, status, repo and the first line of the text.
fn print_memory_line(paint: &Paint, memory: &Memory) {
    let first_line = memory.content.lines().next().unwrap_or_default();
    let text: String = first_line.chars().take(90).collect();
    let repo = memory.repo.as_deref().map(|repo| format!(" {repo}")).unwrap_or_default();
    let facts = format!("{} {}{repo}", memory.scope, memory.status);
    println!("{}  {}  {text}", paint.bold(&memory.id), paint.dim(&facts));
}

#[derive(Debug, clap::Args)]
pub(crate) struct SearchArgs {
    /// The words to look for.
    query: String,
    #[arg(long)]
    repo: Option<String>,
    #[arg(long)]
    scope: Option<Scope>,
    /// How many hits (default 20).
    #[arg(long)]
    limit: Option<u32>,
    #[command(flatten)]
    output: Output,
}

pub(crate) async fn search(args: SearchArgs) -> anyhow::Result<ExitCode> {
    let query = SearchQuery {
        q: Some(args.query),
        repo: args.repo,
        scope: args.scope,
        limit: args.limit,
        ..SearchQuery::default()
    };
    let result = args.output.client.connect()?.search(&query).await?;
    if args.output.json {
        print_json(&result)?;
    } else {
        let paint = Paint::stdout();
        if result.hits.is_empty() {
            println!("{}", paint.dim("no memory matches"));
        }
        for hit in &result.hits {
            print!("{} ", paint.dim(&format!("{:.2}", hit.score)));
            print_memory_line(&paint, &hit.memory);
        }
    }
    Ok(ExitCode::SUCCESS)
}

#[derive(Debug, clap::Args)]
pub(crate) struct ContextArgs {
    /// What you are about to do.
    task: String,
    #[arg(long)]
    repo: Option<String>,
    /// The most tokens the context may take (default 2000).
    #[arg(long)]
    budget: Option<u32>,
    #[command(flatten)]
    output: Output,
}

/// Prints the context text itself (with `--json`, the whole pack).
pub(crate) async fn context(args: ContextArgs) -> anyhow::Result<ExitCode> {
    let request = ContextRequest { task: args.task, repo: args.repo, token_budget: args.budget };
    let pack = args.output.client.connect()?.context(&request).await?;
    if args.output.json {
        print_json(&pack)?;
    } else if !pack.context.is_empty() {
        println!("{}", pack.context);
    }
    Ok(ExitCode::SUCCESS)
}

#[derive(Debug, clap::Args)]
pub(crate) struct CodingContextArgs {
    /// What you are about to do.
    task: String,
    /// The files the change touches, relative to the repository root.
    files: Vec<String>,
    #[arg(long)]
    repo: Option<String>,
    /// The most tokens the context may take (default 2000).
    #[arg(long)]
    budget: Option<u32>,
    #[command(flatten)]
    output: Output,
}

pub(crate) async fn coding_context(args: CodingContextArgs) -> anyhow::Result<ExitCode> {
    let request = CodingContextRequest {
        task: args.task,
        files: args.files,
        repo: args.repo,
        token_budget: args.budget,
    };
    let context = args.output.client.connect()?.coding_context(&request).await?;
    if args.output.json {
        print_json(&context)?;
        return Ok(ExitCode::SUCCESS);
    }
    if !context.pack.context.is_empty() {
        println!("{}", context.pack.context);
    }
    let paint = Paint::stdout();
    for file in context.files.iter().filter(|file| !file.memory_ids.is_empty()) {
        println!("{}", paint.dim(&format!("{}: {}", file.path, file.memory_ids.join(", "))));
    }
    Ok(ExitCode::SUCCESS)
}

#[derive(Debug, clap::Args)]
pub(crate) struct GuardArgs {
    /// The action about to run, e.g. a shell command.
    action: String,
    #[arg(long)]
    repo: Option<String>,
    /// How long to wait for the daemon; past it (or with the daemon down) the built-in rules
    /// are checked here, without the daemon, and still block what they block.
    #[arg(long, default_value = "2s", value_parser = humantime::parse_duration)]
    timeout: std::time::Duration,
    #[command(flatten)]
    output: Output,
}

/// Exit 0 when the action is allowed (warnings on stderr), 2 when it is blocked (blockers
/// on stderr). A daemon that cannot answer in time leaves the built-in rules, checked here.
pub(crate) async fn guard(args: GuardArgs) -> anyhow::Result<ExitCode> {
    let request = GuardRequest { action: args.action, repo: args.repo };
    let (result, unconsulted) = verdict(&args.output.client, args.timeout, &request).await;
    if let Some(note) = &unconsulted {
        eprintln!("cairn: {note}");
    }
    if args.output.json {
        print_json(&result)?;
    }
    let paint = Paint::stderr();
    for finding in &result.blockers {
        eprintln!("{} {}", paint.red("blocked:"), describe(finding));
    }
    for finding in &result.warnings {
        eprintln!("{} {}", paint.yellow("warning:"), describe(finding));
    }
    Ok(if result.allowed { ExitCode::SUCCESS } else { ExitCode::from(2) })
}

/// The daemon's verdict on `request`; when it is down, failing or slower than `timeout`, the
/// built-in rules' (which live in this binary too, so a guard never fails open), with a
/// sentence saying what was not consulted.
pub(crate) async fn verdict(
    client: &ClientArgs,
    timeout: std::time::Duration,
    request: &GuardRequest,
) -> (GuardResult, Option<String>) {
    let asked = match client.connect_within(timeout) {
        Ok(client) => client.guard(request).await.map_err(|error| error.to_string()),
        Err(error) => Err(format!("{error:#}")),
    };
    match asked {
        Ok(verdict) => (verdict, None),
        Err(reason) => (
            cairn_memory::built_in_verdict(&request.action),
            Some(format!(
                "the Cairn daemon could not answer ({reason}); only the built-in rules were \
                 checked, not the rules learned from memories and outcomes"
            )),
        ),
    }
}

/// A finding as one line: its message, code and the memory or outcome it rests on.
pub(crate) fn describe(finding: &GuardFinding) -> String {
    let source = [&finding.memory_id, &finding.outcome_id]
        .into_iter()
        .flatten()
        .map(|id| format!(", {id}"))
        .collect::<String>();
    format!("{} ({}{source})", finding.message, finding.code)
}

#[derive(Debug, clap::Args)]
pub(crate) struct OutcomeArgs {
    /// The command that ran.
    command: String,
    /// Its exit code.
    #[arg(long, allow_negative_numbers = true)]
    exit_code: i32,
    /// The task it served.
    #[arg(long)]
    task: Option<String>,
    #[arg(long)]
    repo: Option<String>,
    #[command(flatten)]
    output: Output,
}

pub(crate) async fn outcome(args: OutcomeArgs) -> anyhow::Result<ExitCode> {
    let request = OutcomeRequest {
        command: args.command,
        exit_code: args.exit_code,
        task: args.task,
        repo: args.repo,
    };
    let outcome = args.output.client.connect()?.record_outcome(&request).await?;
    if args.output.json {
        print_json(&outcome)?;
    } else {
        println!("recorded {}", outcome.outcome_id);
    }
    Ok(ExitCode::SUCCESS)
}

#[derive(Debug, clap::Subcommand)]
pub(crate) enum EvidenceCommand {
    /// Records the evidence behind a patch: the task, the files and the commands that
    /// checked it.
    Record {
        task: String,
        #[arg(long = "file")]
        files: Vec<String>,
        #[arg(long = "command")]
        commands: Vec<String>,
        #[command(flatten)]
        output: Output,
    },
    /// Shows one evidence record.
    Get {
        id: String,
        #[command(flatten)]
        output: Output,
    },
    /// The evidence of a task: its records, the memories they used, its outcomes (Markdown
    /// unless `--json`).
    Pack {
        task: String,
        #[command(flatten)]
        output: Output,
    },
}

pub(crate) async fn evidence(command: EvidenceCommand) -> anyhow::Result<ExitCode> {
    match command {
        EvidenceCommand::Record { task, files, commands, output } => {
            let request = PatchEvidenceRequest { task, files, commands };
            let evidence = output.client.connect()?.record_patch_evidence(&request).await?;
            if output.json {
                print_json(&evidence)?;
            } else {
                println!("recorded {}", evidence.evidence_id);
            }
        }
        EvidenceCommand::Get { id, output } => {
            print_json(&output.client.connect()?.get_evidence(&id).await?)?;
        }
        EvidenceCommand::Pack { task, output } => {
            let request = EvidencePackRequest { task, format: None };
            let client = output.client.connect()?;
            if output.json {
                print_json(&client.evidence_pack(&request).await?)?;
            } else {
                print!("{}", client.evidence_pack_markdown(&request).await?);
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

#[derive(Debug, clap::Subcommand)]
pub(crate) enum ReviewCommand {
    /// Memories awaiting a decision.
    List {
        #[arg(long)]
        limit: Option<u32>,
        #[command(flatten)]
        output: Output,
    },
    /// Approves a memory in review: it becomes active.
    Approve {
        id: String,
        #[command(flatten)]
        output: Output,
    },
    /// Rejects a memory in review: it is archived.
    Reject {
        id: String,
        #[command(flatten)]
        output: Output,
    },
}

pub(crate) async fn review(command: ReviewCommand) -> anyhow::Result<ExitCode> {
    match command {
        ReviewCommand::List { limit, output } => {
            let queue = output.client.connect()?.review_queue(limit, None).await?;
            if output.json {
                print_json(&queue)?;
            } else {
                let paint = Paint::stdout();
                if queue.memories.is_empty() {
                    println!("{}", paint.dim("nothing to review"));
                }
                for memory in &queue.memories {
                    print_memory_line(&paint, memory);
                }
            }
        }
        ReviewCommand::Approve { id, output } => {
            let memory = output.client.connect()?.approve(&id).await?;
            decided(&output, &memory, "approved")?;
        }
        ReviewCommand::Reject { id, output } => {
            let memory = output.client.connect()?.reject(&id).await?;
            decided(&output, &memory, "rejected (archived)")?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn decided(output: &Output, memory: &Memory, what: &str) -> anyhow::Result<()> {
    if output.json {
        print_json(memory)
    } else {
        println!("{} {what}", memory.id);
        Ok(())
    }
}

#[derive(Debug, clap::Subcommand)]
pub(crate) enum ConflictsCommand {
    /// Lists conflicts (open ones by default).
    List {
        /// open, resolved or all.
        #[arg(long)]
        status: Option<String>,
        #[command(flatten)]
        output: Output,
    },
    /// Resolves a conflict: keep one memory, keep both, or merge them.
    Resolve {
        id: String,
        /// keep (with --keep ID), keep-both, or merge (with --content, optional).
        #[arg(long, value_parser = ["keep", "keep-both", "merge"])]
        action: String,
        /// With `keep`: the memory to keep.
        #[arg(long)]
        keep: Option<String>,
        /// With `merge`: the merged text.
        #[arg(long)]
        content: Option<String>,
        #[command(flatten)]
        output: Output,
    },
}

pub(crate) async fn conflicts(command: ConflictsCommand) -> anyhow::Result<ExitCode> {
    match command {
        ConflictsCommand::List { status, output } => {
            let list = output.client.connect()?.list_conflicts(&ConflictQuery { status }).await?;
            if output.json {
                print_json(&list)?;
                return Ok(ExitCode::SUCCESS);
            }
            let paint = Paint::stdout();
            if list.conflicts.is_empty() {
                println!("{}", paint.dim("no conflicts"));
            }
            for conflict in &list.conflicts {
                println!("{}  {}  {}", paint.bold(&conflict.id), conflict.status, conflict.subject);
                println!("  {}", paint.dim(&conflict.reason));
                for memory in &conflict.memories {
                    print!("  ");
                    print_memory_line(&paint, memory);
                }
            }
        }
        ConflictsCommand::Resolve { id, action, keep, content, output } => {
            let action = match action.as_str() {
                "keep" => ResolutionAction::Keep,
                "keep-both" => ResolutionAction::KeepBoth,
                _ => ResolutionAction::Merge,
            };
            let resolution = ConflictResolution { action, memory_id: keep, content };
            let conflict = output.client.connect()?.resolve_conflict(&id, &resolution).await?;
            if output.json {
                print_json(&conflict)?;
            } else {
                println!("{id} resolved: {}", conflict.resolution.unwrap_or_default());
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

#[derive(Debug, clap::Args)]
pub(crate) struct DreamArgs {
    /// Report what would change, and change nothing.
    #[arg(long)]
    dry_run: bool,
    #[command(flatten)]
    output: Output,
}

pub(crate) async fn dream(args: DreamArgs) -> anyhow::Result<ExitCode> {
    let request = DreamRequest { dry_run: args.dry_run, ..DreamRequest::default() };
    let client = args.output.client.connect_with(std::time::Duration::from_secs(3600))?;
    let report = client.dream_cycle(&request).await?;
    if args.output.json {
        print_json(&report)?;
    } else {
        let verb = if report.dry_run { "would merge" } else { "merged" };
        println!(
            "examined {} memories; {verb} {} groups, {} stale, {} conflicts",
            report.examined,
            report.merged.len(),
            report.staled.len(),
            report.conflicts.len()
        );
        for conflict in &report.conflicts {
            // A dry run stores nothing: its conflicts have no ids `conflicts resolve` knows.
            match report.dry_run {
                true => println!("  {}", conflict.subject),
                false => println!("  {} {}", conflict.id, conflict.subject),
            }
        }
        if report.dry_run && !report.conflicts.is_empty() {
            println!("(a dry run records nothing: run `cairn dream` to record the conflicts)");
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Writes every memory, page by page (oldest last, as lists go), one JSON object a line.
async fn export(
    file: Option<&std::path::Path>,
    include_archived: bool,
    output: &Output,
) -> anyhow::Result<usize> {
    use std::io::Write as _;
    let mut writer: Box<dyn std::io::Write> = match file.filter(|file| file.as_os_str() != "-") {
        Some(file) => Box::new(std::io::BufWriter::new(
            std::fs::File::create(file)
                .map_err(|error| anyhow::anyhow!("cannot create {}: {error}", file.display()))?,
        )),
        None => Box::new(std::io::BufWriter::new(std::io::stdout().lock())),
    };
    let client = output.client.connect()?;
    let (mut offset, mut written) = (0u64, 0usize);
    loop {
        let filter = MemoryListQuery {
            limit: Some(500),
            offset: Some(offset),
            include_archived: Some(include_archived),
            ..MemoryListQuery::default()
        };
        let page = client.list_memories(&filter).await?;
        for memory in &page.memories {
            writeln!(writer, "{}", serde_json::to_string(memory)?)?;
        }
        written += page.memories.len();
        offset += page.memories.len() as u64;
        if page.memories.is_empty() || offset >= page.total {
            break;
        }
    }
    writer.flush()?;
    Ok(written)
}

/// Sends a batch with `send` until it is not refused for its rate: over the rate, it waits
/// as long as the daemon says and sends it again, rather than stop half way (the rest of the
/// import waits its turn). A batch larger than the whole limit never fits: its error says
/// so, and is answered.
async fn waiting_out_rate<T, Send, Sent>(
    imported: usize,
    send: Send,
) -> Result<T, cairn_client::Error>
where
    Send: Fn() -> Sent,
    Sent: std::future::Future<Output = Result<T, cairn_client::Error>>,
{
    loop {
        let sent = send().await;
        let wait = match &sent {
            Err(error) => error
                .api()
                .filter(|api| api.code == "RATE_LIMITED")
                .filter(|api| !api.message.contains("send smaller batches"))
                .map(|api| api.retry_after.unwrap_or(std::time::Duration::from_secs(1))),
            Ok(_) => None,
        };
        let Some(wait) = wait else { return sent };
        eprintln!(
            "{imported} memories imported; the write rate is spent, waiting {} s",
            wait.as_secs().max(1)
        );
        tokio::time::sleep(wait).await;
    }
}

/// Restores exported memories (lines with an `id`) in batches; how many were stored.
async fn restore(
    lines: Vec<(usize, String)>,
    batch_size: usize,
    client: &cairn_client::Client,
) -> anyhow::Result<usize> {
    let mut imported = 0;
    for chunk in lines.chunks(batch_size) {
        let mut memories = Vec::with_capacity(chunk.len());
        for (number, line) in chunk {
            let memory: cairn_client::types::Memory =
                serde_json::from_str(line).map_err(|error| {
                    anyhow::anyhow!("line {number}: not an exported memory: {error}")
                })?;
            memories.push(memory);
        }
        let request = cairn_client::types::MemoryImport { memories };
        let sent = waiting_out_rate(imported, || client.import_memories(&request)).await;
        let done = sent.map_err(|error| {
            anyhow::anyhow!(
                "{error}; {imported} memories were imported before this batch (lines {}–{})",
                chunk[0].0,
                chunk[chunk.len() - 1].0
            )
        })?;
        imported += done.imported.len();
    }
    Ok(imported)
}

/// Sends the memories of a JSON Lines file in batches; how many were stored. A line that is
/// not a memory, or one the service refuses, stops the import with its line number.
async fn import(
    file: &std::path::Path,
    batch_size: usize,
    output: &Output,
) -> anyhow::Result<usize> {
    use std::io::BufRead as _;
    let reader: Box<dyn std::io::BufRead> = if file.as_os_str() == "-" {
        Box::new(std::io::stdin().lock())
    } else {
        let opened = std::fs::File::open(file)
            .map_err(|error| anyhow::anyhow!("cannot open {}: {error}", file.display()))?;
        Box::new(std::io::BufReader::new(opened))
    };
    let client = output.client.connect()?;
    let mut reader = reader.lines().enumerate().peekable();
    // An export (its lines carry ids) is restored as it was; anything else is created anew.
    while reader
        .peek()
        .is_some_and(|(_, line)| line.as_ref().is_ok_and(|line| line.trim().is_empty()))
    {
        reader.next();
    }
    let exported = reader.peek().is_some_and(|(_, line)| {
        line.as_ref().is_ok_and(|line| {
            serde_json::from_str::<serde_json::Value>(line)
                .is_ok_and(|value| value.get("id").is_some())
        })
    });
    if exported {
        let mut lines = Vec::new();
        for (index, line) in reader {
            let line = line?;
            if !line.trim().is_empty() {
                lines.push((index + 1, line));
            }
        }
        return restore(lines, batch_size, &client).await;
    }
    let (mut imported, mut batch, mut lines) = (0, Vec::with_capacity(batch_size), Vec::new());
    for (index, line) in reader {
        let number = index + 1;
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        let memory: NewMemory = serde_json::from_str(&line)
            .map_err(|error| anyhow::anyhow!("line {number}: not a memory: {error}"))?;
        batch.push(memory);
        lines.push(number);
        if batch.len() == batch_size {
            imported += send_batch(&client, &mut batch, &mut lines, imported).await?;
        }
    }
    if !batch.is_empty() {
        imported += send_batch(&client, &mut batch, &mut lines, imported).await?;
    }
    Ok(imported)
}

async fn send_batch(
    client: &cairn_client::Client,
    batch: &mut Vec<NewMemory>,
    lines: &mut Vec<usize>,
    imported: usize,
) -> anyhow::Result<usize> {
    let request = cairn_client::types::NewMemoryBatch { memories: std::mem::take(batch) };
    let sent = waiting_out_rate(imported, || client.create_memories(&request)).await;
    match sent {
        Ok(created) => {
            lines.clear();
            Ok(created.memories.len())
        }
        Err(error) => {
            // `memories[3].content: …` names the item; say which line it came from.
            let message = error.api().map_or_else(|| error.to_string(), |api| api.message.clone());
            let line = message
                .split_once("memories[")
                .and_then(|(_, rest)| rest.split_once(']'))
                .and_then(|(index, _)| index.parse::<usize>().ok())
                .and_then(|index| lines.get(index));
            match line {
                Some(line) => anyhow::bail!(
                    "line {line}: {message}; {imported} memories were imported before its batch"
                ),
                None => {
                    anyhow::bail!("{message}; {imported} memories were imported before this batch")
                }
            }
        }
    }
}
