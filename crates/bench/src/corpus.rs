//! A deterministic synthetic corpus of agent memories, and tasks and queries to match it.
//!
//! Memories are sentences about builds, tests, repositories, commands, preferences and file
//! paths, built from templates over word pools. Words are drawn with a Zipf-like law (rank
//! `r` with weight `1 / r`), so a few words (`test`, `build`, `cargo`) appear in a large part
//! of the corpus and most (type names such as `RetryBudget`, file names) in very little of
//! it, the way real notes are. Everything comes from one small xorshift generator: the same
//! seed gives the same corpus on every machine.

use cairn_types::{JsonObject, NewMemory, Scope};

pub use cairn_test_support::rng::Rng;

/// Words drawn by rank: the first is the most frequent, weight `1 / rank`.
#[derive(Debug)]
struct Pool {
    words: Vec<String>,
    cumulative: Vec<f64>,
}

impl Pool {
    fn new(words: Vec<String>) -> Pool {
        let mut total = 0.0;
        let cumulative = (1..=words.len())
            .map(|rank| {
                total += 1.0 / rank as f64;
                total
            })
            .collect();
        Pool { words, cumulative }
    }

    fn of(words: &[&str]) -> Pool {
        Pool::new(words.iter().map(|word| (*word).to_owned()).collect())
    }

    fn pick(&self, rng: &mut Rng) -> &str {
        let target = rng.unit() * self.cumulative.last().copied().unwrap_or(0.0);
        let index = self.cumulative.partition_point(|&c| c <= target);
        &self.words[index.min(self.words.len() - 1)]
    }

    /// A word other than `other`, when the pool has one.
    fn pick_other(&self, rng: &mut Rng, other: &str) -> String {
        for _ in 0..8 {
            let word = self.pick(rng);
            if word != other {
                return word.to_owned();
            }
        }
        self.words.iter().find(|word| *word != other).unwrap_or(&self.words[0]).clone()
    }
}

// Word pools, most frequent first.

pub const REPOS: &[&str] = &[
    "cairn",
    "web-frontend",
    "billing-service",
    "infra",
    "ml-pipeline",
    "mobile-app",
    "docs-site",
    "auth-gateway",
];

const TOOLS: &[&str] = &[
    "cargo",
    "pnpm",
    "npm",
    "pytest",
    "docker",
    "make",
    "poetry",
    "yarn",
    "uv",
    "go",
    "bazel",
    "gradle",
    "terraform",
    "bun",
    "nix",
    "maven",
    "just",
    "tox",
    "vite",
    "webpack",
];

const COMMANDS: &[&str] = &[
    "cargo test --workspace",
    "pnpm install --frozen-lockfile",
    "make lint",
    "pytest -x tests/unit",
    "docker compose up -d db",
    "cargo clippy --all-targets -- -D warnings",
    "npm run build",
    "go test ./...",
    "pnpm test --filter web",
    "terraform plan -out plan.tfplan",
    "alembic upgrade head",
    "git rebase -i origin/main",
    "uv sync --frozen",
    "just check",
    "bazel build //...",
    "cargo fmt --check",
    "poetry run mypy src",
    "yarn storybook",
    "gradle assembleDebug",
    "docker build -t api:dev .",
    "cargo nextest run --retries 2",
    "pnpm exec playwright test",
    "kubectl rollout status deploy/api",
    "sqlx migrate run",
    "npx prisma generate",
];

const DANGEROUS: &[&str] = &[
    "git push --force origin main",
    "terraform apply -auto-approve",
    "DROP TABLE users",
    "rm -rf node_modules/.cache",
    "kubectl delete namespace staging",
    "docker system prune -a",
    "git reset --hard origin/main",
];

const COMPONENTS: &[&str] = &[
    "api",
    "auth",
    "build",
    "cache",
    "database",
    "parser",
    "scheduler",
    "billing",
    "storage",
    "search",
    "router",
    "session",
    "worker",
    "migrations",
    "payments",
    "config",
    "indexer",
    "notifications",
    "tokenizer",
    "renderer",
    "exporter",
    "ingest",
    "webhook",
    "sync",
    "upload",
    "checkout",
    "telemetry",
    "feature-flags",
    "permissions",
    "audit",
    "queue",
    "retry",
    "backup",
    "thumbnail",
    "invoice",
    "onboarding",
    "localization",
    "sitemap",
    "rate-limiter",
    "crawler",
];

const DIRS: &[&str] = &[
    "src",
    "tests",
    "crates",
    "app",
    "lib",
    "internal",
    "pkg",
    "services",
    "scripts",
    "config",
    "migrations",
    "web",
    "cmd",
    "fixtures",
    "deploy",
    "docs",
    "tools",
    "e2e",
];

const FILES: &[&str] = &[
    "lib",
    "main",
    "mod",
    "index",
    "handler",
    "client",
    "server",
    "schema",
    "utils",
    "config",
    "routes",
    "models",
    "store",
    "settings",
    "middleware",
    "conftest",
    "types",
    "errors",
    "api",
    "queries",
    "fixtures",
    "worker",
    "cli",
    "setup",
    "hooks",
    "reducer",
    "service",
    "state",
];

const EXTENSIONS: &[&str] = &["rs", "ts", "py", "go", "tsx", "toml", "yaml", "sql", "json", "sh"];

const ERRORS: &[&str] = &[
    "a timeout",
    "a lockfile mismatch",
    "a linker error",
    "an out-of-memory kill",
    "a missing environment variable",
    "a stale snapshot",
    "a port conflict on 5432",
    "an expired token",
    "a schema drift",
    "a segfault in the native module",
    "a certificate error",
    "a deadlock",
    "an import cycle",
    "a permission denied error",
    "a version conflict",
];

const CONDITIONS: &[&str] = &[
    "run in parallel",
    "the cache is cold",
    "run on CI",
    "the database is empty",
    "TZ is not UTC",
    "the network is slow",
    "run as root",
    "the clock crosses midnight",
    "two workers share a port",
    "the fixtures are regenerated",
    "the locale is not English",
    "the disk is nearly full",
];

const FIXES: &[&str] = &[
    "the build cache is cleared first",
    "the lockfile is regenerated",
    "DATABASE_URL points at the test database",
    "the toolchain is pinned in rust-toolchain.toml",
    "NODE_OPTIONS raises the heap limit",
    "the submodules are initialised",
    "the migrations run before the tests",
    "the docker daemon is running",
    "AWS_PROFILE is set to dev",
    "the generated client is rebuilt",
];

const PREFERENCES: &[&str] = &[
    "small focused commits with imperative subject lines",
    "explicit error types over anyhow in libraries",
    "tests next to the code they test",
    "early returns over nested conditionals",
    "no new dependencies without asking",
    "descriptive variable names over comments",
    "squash merges on feature branches",
    "type hints on every public function",
    "async code without blocking calls",
    "snapshot tests only for rendered output",
    "British spelling in user-facing text",
    "four spaces, never tabs",
    "structured logging with tracing",
    "short pull requests under 400 lines",
];

const VERBS: &[&str] = &[
    "fix", "add", "refactor", "debug", "update", "speed up", "migrate", "remove", "test",
    "document", "rename", "split", "cache", "harden", "review",
];

const MISC: &[&str] = &[
    "flaky",
    "slow",
    "failing",
    "timeout",
    "lockfile",
    "deploy",
    "release",
    "benchmark",
    "pagination",
    "retries",
    "logging",
    "memory leak",
    "race",
    "regression",
    "endpoint",
    "dependency",
    "upgrade",
    "coverage",
    "lint",
    "warnings",
    "panic",
    "crash",
    "schema",
];

const TAGS: &[&str] = &[
    "build",
    "test",
    "ci",
    "preference",
    "style",
    "deps",
    "db",
    "perf",
    "security",
    "git",
    "release",
    "docs",
    "infra",
    "flaky",
    "api",
];

const SOURCES: &[&str] = &["claude-code", "cursor", "cli", "import", "codex", "review-bot"];

const TYPE_PREFIXES: &[&str] = &[
    "Retry",
    "Session",
    "Token",
    "Invoice",
    "Cache",
    "Query",
    "Schema",
    "Upload",
    "Webhook",
    "Render",
    "Route",
    "Index",
    "Job",
    "Batch",
    "Ledger",
    "Tenant",
    "Account",
    "Payment",
    "Metric",
    "Trace",
    "Config",
    "Feature",
    "Audit",
    "Export",
    "Import",
    "Search",
    "Stream",
    "Socket",
    "Pool",
    "Lease",
    "Shard",
    "Snapshot",
    "Manifest",
    "Plugin",
    "Locale",
    "Thumbnail",
    "Crawl",
    "Queue",
    "Budget",
    "Permission",
    "Policy",
    "Quota",
    "Backoff",
    "Merge",
    "Diff",
    "Patch",
    "Blob",
    "Chunk",
    "Cursor",
    "Window",
    "Layout",
    "Theme",
    "Widget",
    "Form",
    "Field",
    "Pipeline",
    "Stage",
    "Worker",
    "Scheduler",
    "Timer",
];

const TYPE_SUFFIXES: &[&str] = &[
    "Manager",
    "Builder",
    "Client",
    "Handler",
    "Service",
    "Store",
    "Loader",
    "Parser",
    "Writer",
    "Reader",
    "Guard",
    "Registry",
    "Factory",
    "Provider",
    "Resolver",
    "Validator",
    "Encoder",
    "Decoder",
    "Tracker",
    "Monitor",
    "Controller",
    "Adapter",
    "Cache",
    "Queue",
    "Pool",
    "Policy",
    "Budget",
    "State",
    "Context",
    "Options",
    "Error",
    "Event",
    "Request",
    "Response",
    "Config",
    "Mapper",
    "Filter",
    "Router",
    "Runner",
    "Spec",
];

/// The word pools, and the memories, tasks and queries drawn from them.
#[derive(Debug)]
pub struct Corpus {
    repos: Pool,
    tools: Pool,
    commands: Pool,
    dangerous: Pool,
    components: Pool,
    dirs: Pool,
    files: Pool,
    extensions: Pool,
    errors: Pool,
    conditions: Pool,
    fixes: Pool,
    preferences: Pool,
    verbs: Pool,
    misc: Pool,
    tags: Pool,
    sources: Pool,
    /// About 2,400 `PrefixSuffix` type names, in a shuffled order: the rare words.
    types: Pool,
}

impl Default for Corpus {
    fn default() -> Corpus {
        Corpus::new()
    }
}

impl Corpus {
    pub fn new() -> Corpus {
        let mut types: Vec<String> = TYPE_PREFIXES
            .iter()
            .flat_map(|prefix| TYPE_SUFFIXES.iter().map(move |suffix| format!("{prefix}{suffix}")))
            .filter(|name| !name.ends_with("CacheCache") && !name.ends_with("QueueQueue"))
            .collect();
        let mut rng = Rng::new(0xCA1E);
        for index in (1..types.len()).rev() {
            let other = rng.below(index + 1);
            types.swap(index, other);
        }
        Corpus {
            repos: Pool::of(REPOS),
            tools: Pool::of(TOOLS),
            commands: Pool::of(COMMANDS),
            dangerous: Pool::of(DANGEROUS),
            components: Pool::of(COMPONENTS),
            dirs: Pool::of(DIRS),
            files: Pool::of(FILES),
            extensions: Pool::of(EXTENSIONS),
            errors: Pool::of(ERRORS),
            conditions: Pool::of(CONDITIONS),
            fixes: Pool::of(FIXES),
            preferences: Pool::of(PREFERENCES),
            verbs: Pool::of(VERBS),
            misc: Pool::of(MISC),
            tags: Pool::of(TAGS),
            sources: Pool::of(SOURCES),
            types: Pool::new(types),
        }
    }

    pub fn repo(&self, rng: &mut Rng) -> String {
        self.repos.pick(rng).to_owned()
    }

    /// A `PrefixSuffix` type name: the rare words.
    pub fn type_name(&self, rng: &mut Rng) -> String {
        self.types.pick(rng).to_owned()
    }

    /// A source path such as `src/billing/handler.rs`.
    pub fn path(&self, rng: &mut Rng) -> String {
        let top = self.dirs.pick(rng);
        let file = self.files.pick(rng);
        let extension = self.extensions.pick(rng);
        if rng.chance(0.6) {
            let component = self.components.pick(rng).replace('-', "_");
            format!("{top}/{component}/{file}.{extension}")
        } else {
            format!("{top}/{file}.{extension}")
        }
    }

    /// One memory, as an agent would have written it.
    pub fn memory(&self, rng: &mut Rng) -> NewMemory {
        let repo = self.repo(rng);
        let tool = self.tools.pick(rng).to_owned();
        let command = self.commands.pick(rng).to_owned();
        let component = self.components.pick(rng).to_owned();
        let path = self.path(rng);
        let type_name = self.types.pick(rng).to_owned();
        let (mut content, scope) = match rng.below(13) {
            0 => {
                let other = self.tools.pick_other(rng, &tool);
                (
                    format!("{repo} uses {tool}, never {other}; run `{command}` before pushing."),
                    Scope::Repo,
                )
            }
            1 => (
                format!(
                    "The {component} tests in {path} are flaky when {}; rerun them with `{command}`.",
                    self.conditions.pick(rng)
                ),
                Scope::Repo,
            ),
            2 => (
                format!(
                    "The build fails with {} unless {}.",
                    self.errors.pick(rng),
                    self.fixes.pick(rng)
                ),
                if rng.chance(0.7) { Scope::Repo } else { Scope::Global },
            ),
            3 => (format!("The user prefers {}.", self.preferences.pick(rng)), Scope::User),
            4 => (
                format!(
                    "`{command}` takes about {} minutes on CI; run it locally only for {component} changes.",
                    rng.range(2, 25)
                ),
                Scope::Repo,
            ),
            5 => {
                let owner = self.types.pick_other(rng, &type_name);
                (
                    format!(
                        "{type_name} in {path} owns the {component} state; do not construct it outside {owner}."
                    ),
                    Scope::Repo,
                )
            }
            6 => (
                format!(
                    "Never run `{}` on {repo}: it wiped the {component} data once.",
                    self.dangerous.pick(rng)
                ),
                if rng.chance(0.5) { Scope::Repo } else { Scope::Global },
            ),
            7 => (
                format!(
                    "The {component} service reads its settings from {path}; restart it with `{command}` after editing."
                ),
                Scope::Repo,
            ),
            8 => (
                format!(
                    "When {type_name} returns {}, check {path} first; usually {}.",
                    self.errors.pick(rng),
                    self.fixes.pick(rng)
                ),
                Scope::Repo,
            ),
            9 => (
                format!(
                    "Task: {} the {component} {} in {path}; {type_name} is done, the tests are next.",
                    self.verbs.pick(rng),
                    self.misc.pick(rng)
                ),
                Scope::Task,
            ),
            10 => (
                format!(
                    "Migrations live in {}/migrations; add new ones with `{command}`, never edit a shipped one.",
                    self.dirs.pick(rng)
                ),
                Scope::Repo,
            ),
            11 => (
                format!(
                    "In code review the user asks for {} and for {tool} over {}.",
                    self.preferences.pick(rng),
                    self.tools.pick_other(rng, &tool)
                ),
                Scope::User,
            ),
            _ => (
                format!(
                    "{tool} caches {component} artifacts under {path}; expect {} when {}.",
                    self.misc.pick(rng),
                    self.conditions.pick(rng)
                ),
                if rng.chance(0.5) { Scope::Global } else { Scope::Task },
            ),
        };
        if rng.chance(0.3) {
            content.push_str(&format!(
                " Seen again while working on {} in {}.",
                self.types.pick(rng),
                self.path(rng)
            ));
        }
        let mut tags: Vec<String> = Vec::new();
        for _ in 0..rng.range(0, 3) {
            let tag = self.tags.pick(rng);
            if !tags.iter().any(|existing| existing == tag) {
                tags.push(tag.to_owned());
            }
        }
        let mut metadata = JsonObject::new();
        if rng.chance(0.2) {
            metadata
                .insert("confidence".into(), serde_json::json!(rng.range(50, 100) as f64 / 100.0));
        }
        NewMemory {
            content,
            scope,
            repo: matches!(scope, Scope::Repo | Scope::Task).then_some(repo),
            tags,
            source: Some(self.sources.pick(rng).to_owned()),
            metadata,
        }
    }

    /// One content word for a task or query.
    fn word(&self, rng: &mut Rng) -> String {
        let roll = rng.unit();
        if roll < 0.40 {
            self.components.pick(rng).to_owned()
        } else if roll < 0.55 {
            self.types.pick(rng).to_owned()
        } else if roll < 0.70 {
            self.misc.pick(rng).to_owned()
        } else if roll < 0.82 {
            self.tools.pick(rng).to_owned()
        } else if roll < 0.92 {
            self.files.pick(rng).to_owned()
        } else {
            self.dirs.pick(rng).to_owned()
        }
    }

    /// A task, 3 to 8 words: a verb, then what it is about.
    pub fn task(&self, rng: &mut Rng) -> String {
        let mut words = vec![self.verbs.pick(rng).to_owned()];
        let wanted = rng.range(3, 8);
        let count = |words: &[String]| words.iter().map(|w| w.split(' ').count()).sum::<usize>();
        while count(&words) < wanted {
            if words.len() == 2 && count(&words) + 2 <= wanted && rng.chance(0.3) {
                words.push("in".to_owned());
            }
            let mut word = self.word(rng);
            if count(&words) + word.split(' ').count() > wanted {
                word = self.components.pick(rng).to_owned();
            }
            words.push(word);
        }
        words.join(" ")
    }

    /// A search query, 1 to 4 words.
    pub fn query(&self, rng: &mut Rng) -> String {
        let count = rng.range(1, 4);
        (0..count).map(|_| self.word(rng)).collect::<Vec<_>>().join(" ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_seed_gives_the_same_corpus() {
        let corpus = Corpus::new();
        let (mut a, mut b) = (Rng::new(7), Rng::new(7));
        for _ in 0..100 {
            assert_eq!(corpus.memory(&mut a), corpus.memory(&mut b));
            assert_eq!(corpus.task(&mut a), corpus.task(&mut b));
        }
    }

    #[test]
    fn tasks_have_three_to_eight_words() {
        let corpus = Corpus::new();
        let mut rng = Rng::new(1);
        for _ in 0..1000 {
            let words = corpus.task(&mut rng).split(' ').count();
            assert!((3..=8).contains(&words), "{words}");
        }
    }
}
