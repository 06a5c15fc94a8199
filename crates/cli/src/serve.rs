//! `cairn serve`: wires storage, engine, handlers and transport, and runs until a signal.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context as _, bail};
use cairn_api::{ApiConfig, AuthConfig, JwtVerifier, MemoryApi, Profile, RateLimits};
use cairn_memory::Engine;
use cairn_server::{ServerConfig, Services};
use tokio::net::TcpListener;

use crate::StoreArgs;

#[derive(Debug, clap::Args)]
pub(crate) struct ServeArgs {
    /// The port to listen on; 0 picks a free one.
    #[arg(long, env = "SERVICE_PORT", default_value_t = 8787)]
    port: u16,
    /// The address to listen on. The solo profile accepts loopback addresses only.
    #[arg(long, env = "SERVICE_HOST", default_value_t = IpAddr::V4(Ipv4Addr::LOCALHOST))]
    host: IpAddr,
    #[command(flatten)]
    store: StoreArgs,
    /// `solo`: one developer, no credentials needed. `production`: every request authenticates.
    #[arg(long, env = "SERVICE_PROFILE", default_value = "solo", value_parser = ["solo", "production"])]
    profile: String,
    /// Verify bearer tokens signed with this HS256 secret.
    #[arg(long, env = "SERVICE_JWT_SECRET", hide_env_values = true)]
    jwt_secret: Option<String>,
    /// Verify bearer tokens signed RS256 with the key whose public half is in this PEM file.
    #[arg(long, env = "SERVICE_JWT_PUBLIC_KEY")]
    jwt_public_key: Option<PathBuf>,
    /// Accept only bearer tokens whose `aud` claim names this service; repeat (or separate
    /// with commas) to accept several. Required in production with an RS256 key.
    #[arg(long, env = "SERVICE_JWT_AUDIENCE", value_delimiter = ',')]
    jwt_audience: Vec<String>,
    /// Accept only bearer tokens whose `iss` claim is this issuer (such as the identity
    /// provider's URL); repeat (or separate with commas) for several. Required in production
    /// with an RS256 key.
    #[arg(long, env = "SERVICE_JWT_ISSUER", value_delimiter = ',')]
    jwt_issuer: Vec<String>,
    /// Reads a minute per principal (0: unlimited).
    #[arg(long, env = "SERVICE_RATE_LIMIT_READ", default_value_t = 1000)]
    rate_limit_read: u32,
    /// Writes a minute per principal (0: unlimited).
    #[arg(long, env = "SERVICE_RATE_LIMIT_WRITE", default_value_t = 100)]
    rate_limit_write: u32,
    /// Context packs and searches a minute per principal (0: unlimited).
    #[arg(long, env = "SERVICE_RATE_LIMIT_CONTEXT", default_value_t = 200)]
    rate_limit_context: u32,
    /// Memories of batches and imports a minute per principal, in hundreds (0: unlimited):
    /// apart from writes, so a large import leaves the agent's writes alone.
    #[arg(long, env = "SERVICE_RATE_LIMIT_BULK", default_value_t = 1000)]
    rate_limit_bulk: u32,
    /// Visitors started a minute per principal (0: unlimited): conversations created and
    /// conversation tokens minted, apart from writes, so a chat widget's server can start
    /// several hundred visitors a minute.
    #[arg(long, env = "SERVICE_RATE_LIMIT_START", default_value_t = 1000)]
    rate_limit_start: u32,
    /// Semantic retrieval: `local` (the model `cairn model fetch` installs), `openai` (an
    /// OpenAI-compatible embeddings endpoint) or `none` [default: local when the model is
    /// installed, else none].
    #[arg(long, env = "SERVICE_EMBEDDER", value_parser = ["local", "openai", "none"])]
    embedder: Option<String>,
    /// The OpenAI-compatible API's base URL, e.g. http://localhost:11434/v1 for Ollama.
    #[arg(long, env = "SERVICE_EMBEDDING_URL", default_value = "https://api.openai.com/v1")]
    embedding_url: String,
    /// The embedding model to ask the endpoint for.
    #[arg(long, env = "SERVICE_EMBEDDING_MODEL", default_value = "text-embedding-3-small")]
    embedding_model: String,
    /// The endpoint's API key, if it needs one.
    #[arg(long, env = "SERVICE_EMBEDDING_API_KEY", hide_env_values = true)]
    embedding_api_key: Option<String>,
    /// Run the dream cycle on this schedule, e.g. `6h` or `30m` [default: never].
    #[arg(long, env = "SERVICE_DREAM_EVERY", value_parser = humantime::parse_duration)]
    dream_every: Option<std::time::Duration>,
    /// How long a client may take to send a request's body once its headers are in (408
    /// after that).
    #[arg(long, env = "SERVICE_BODY_TIMEOUT", default_value = "30s", value_parser = humantime::parse_duration)]
    body_timeout: std::time::Duration,
    /// How many connections one client address may hold at once (0: no limit; raise it or
    /// turn it off behind a reverse proxy, whose address every connection comes from).
    #[arg(long, env = "SERVICE_MAX_CONNECTIONS_PER_ADDRESS", default_value_t = cairn_server::DEFAULT_MAX_CONNECTIONS_PER_ADDRESS)]
    max_connections_per_address: usize,
    /// How many connections are served at once; more wait in the listen backlog.
    #[arg(long, env = "SERVICE_MAX_CONNECTIONS", default_value_t = cairn_server::DEFAULT_MAX_CONNECTIONS as u32, value_parser = clap::value_parser!(u32).range(1..))]
    max_connections: u32,
    /// How long a connection may take to send a complete request head (its first one, or
    /// the next on a kept-alive HTTP/1 connection) before it is closed, whatever it sent.
    #[arg(long, env = "SERVICE_HEADER_TIMEOUT", default_value = "10s", value_parser = humantime::parse_duration)]
    header_timeout: std::time::Duration,
    /// How long an HTTP/2 connection may stay open with no request in flight before it is
    /// asked to close (GOAWAY).
    #[arg(long, env = "SERVICE_HTTP2_IDLE_TIMEOUT", default_value = "60s", value_parser = humantime::parse_duration)]
    http2_idle_timeout: std::time::Duration,
    /// Bytes of request bodies read and handled at once, daemon-wide; past it a request
    /// waits up to 2 s, then gets 503 `SERVER_BUSY` with `Retry-After`.
    #[arg(long, env = "SERVICE_MAX_BODY_BYTES_IN_FLIGHT", default_value_t = cairn_server::DEFAULT_MAX_BODY_BYTES_IN_FLIGHT, value_parser = clap::value_parser!(u64).range(1_048_576..))]
    max_body_bytes_in_flight: u64,
    /// A folder connectors may read, with everything under it; repeat (or separate with
    /// commas) for more [default: the home directory of the account running the daemon].
    #[arg(long = "connector-root", env = "SERVICE_CONNECTOR_ROOTS", value_delimiter = ',')]
    connector_roots: Vec<PathBuf>,
    /// How many requests one client address may be sending bodies for at once; more wait
    /// up to 2 s for one to finish, then get 429 (raise it behind a reverse proxy that
    /// does not buffer uploads, or use --trusted-proxy).
    #[arg(long, env = "SERVICE_MAX_BODY_READS_PER_ADDRESS", default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..))]
    max_body_reads_per_address: u32,
    /// Serve the metrics (`GET /metrics`) on this address of their own, without
    /// credentials, for a scraper inside the network, instead of beside the API (where the
    /// production profile asks a key with the `read` role for them).
    #[arg(long, env = "SERVICE_METRICS_ADDR")]
    metrics_addr: Option<SocketAddr>,
    /// Reverse proxies (addresses or CIDR ranges, repeat or separate with commas) whose
    /// `Forwarded` / `X-Forwarded-For` headers name the client: requests through them count
    /// as the client's for the per-address body limit, the rate limits and the logs.
    #[arg(long = "trusted-proxy", env = "SERVICE_TRUSTED_PROXIES", value_delimiter = ',', value_parser = proxy_range)]
    trusted_proxies: Vec<ipnet::IpNet>,
    /// How the log is written: `text` for people, `json` for one JSON object a line.
    #[arg(long, env = "SERVICE_LOG_FORMAT", default_value = "text", value_parser = ["text", "json"])]
    log_format: String,
    #[command(flatten)]
    runtime: RuntimeArgs,
}

impl ServeArgs {
    /// Whether the log is to be written as JSON lines.
    pub(crate) fn log_json(&self) -> bool {
        self.log_format == "json"
    }
}

/// The conversation runtime's options.
#[derive(Debug, clap::Args)]
pub(crate) struct RuntimeArgs {
    /// A directory of agent definition files (`*.json`); default: the bundled example agent.
    #[arg(long, env = "SERVICE_AGENTS_DIR")]
    agents_dir: Option<PathBuf>,
    /// A JSON file of `customEvents` and `journeyEvents` definitions (name + JSON Schema).
    #[arg(long, env = "SERVICE_EVENTS_FILE")]
    events_file: Option<PathBuf>,
    /// A browser origin allowed to call the runtime (CORS), such as
    /// `https://shop.example`; repeat (or separate with commas) for more.
    #[arg(long = "cors-origin", env = "SERVICE_CORS_ORIGINS", value_delimiter = ',', value_parser = web_origin)]
    cors_origins: Vec<String>,
    /// An OpenAI-compatible chat-completions endpoint (base URL, e.g.
    /// `https://api.openai.com/v1`) that writes the replies; without one, replies come from
    /// the journeys and memory.
    #[arg(long, env = "SERVICE_CHAT_URL")]
    chat_url: Option<String>,
    /// The model named in each chat-completions request.
    #[arg(long, env = "SERVICE_CHAT_MODEL", default_value = "gpt-4o-mini")]
    chat_model: String,
    /// The chat endpoint's API key, sent as a bearer token, if it needs one.
    #[arg(long, env = "SERVICE_CHAT_API_KEY", hide_env_values = true)]
    chat_api_key: Option<String>,
    /// How often event streams read the log when no append notification came.
    #[arg(long, env = "SERVICE_SSE_POLL_INTERVAL_MS", default_value_t = 1000)]
    sse_poll_interval_ms: u64,
    /// Show the cause of internal errors in 500 responses (for development).
    #[arg(long, env = "SERVICE_EXPOSE_INTERNAL_ERRORS")]
    expose_internal_errors: bool,
    #[command(flatten)]
    voice: crate::voice::VoiceArgs,
}

/// Raises the soft limit on open files to the hard one (as Go's runtime does): a daemon
/// that may serve `connections` at once needs a descriptor each, and many systems start
/// processes at 1,024. Says so when the limit stays below what the connections need.
fn raise_file_limit(connections: u64) {
    let wanted = connections + 256; // the database, the log, the model files, the listener
    match rlimit::increase_nofile_limit(u64::MAX) {
        Ok(limit) if limit < wanted => tracing::warn!(
            limit,
            connections,
            "the open-file limit is below what --max-connections needs; raise it (ulimit -n, \
             LimitNOFILE=) or lower --max-connections"
        ),
        Ok(_) => {}
        Err(error) => tracing::warn!(%error, "cannot raise the open-file limit"),
    }
}

pub(crate) async fn run(args: ServeArgs) -> anyhow::Result<()> {
    let profile = if args.profile == "production" { Profile::Production } else { Profile::Solo };
    if profile == Profile::Solo && !args.host.is_loopback() {
        bail!(
            "the solo profile listens on loopback only, and {} is not a loopback address; \
             use --profile production (with API keys or a JWT key) to serve other machines",
            args.host
        );
    }
    let jwt = jwt_verifier(&args, profile)?;
    raise_file_limit(args.max_connections as u64);
    // A SQLite daemon says it serves its database, so that a restore or a migration of it
    // refuses to run meanwhile (held for the daemon's life).
    let _serving = match &args.store.database.database_url {
        None => Some(cairn_store_sqlite::serve_lock(&args.store.data_dir.database()?)?),
        Some(_) => None,
    };
    let opened = args.store.open_store(true).await?;
    let (store, data_dir) = (opened.store.clone(), opened.data_dir.clone());
    if profile == Profile::Production && jwt.is_none() {
        let keys = store.list_keys().await?;
        if keys.iter().all(|key| key.revoked_at.is_some()) {
            bail!(
                "the production profile needs credentials, and none are configured: create an API key \
                 with `cairn keys create --role admin {}`, or set SERVICE_JWT_SECRET or \
                 SERVICE_JWT_PUBLIC_KEY",
                opened.location_flags
            );
        }
    }

    let roots = connector_roots(&args.connector_roots)?;
    let engine = Engine::new(store.clone()).with_connector_roots(roots);
    let engine = with_embedder(engine, &args, &data_dir).await?;
    let config = ApiConfig {
        auth: AuthConfig { profile, jwt },
        rate_limits: RateLimits {
            read: args.rate_limit_read,
            write: args.rate_limit_write,
            context: args.rate_limit_context,
            bulk: args.rate_limit_bulk,
            start: args.rate_limit_start,
        },
        openapi: cairn_server::openapi_json(),
        build: build(),
        ..ApiConfig::default()
    };
    let memory = MemoryApi::new(engine.clone(), config);
    let runtime = runtime_handler(&args.runtime, store, engine.clone(), memory.clone(), &data_dir)?;
    let address = SocketAddr::new(args.host, args.port);
    let listener =
        TcpListener::bind(address).await.with_context(|| format!("cannot listen on {address}"))?;
    let local = listener.local_addr()?;
    let telemetry = cairn_server::Telemetry::install().map_err(anyhow::Error::msg)?;
    let mut services = Services {
        memory,
        runtime: Some(runtime),
        mcp: Some(mcp_http(local)?),
        metrics: Some(telemetry.clone()),
    };
    let metrics_server = match args.metrics_addr {
        Some(address) => {
            let listener = TcpListener::bind(address)
                .await
                .with_context(|| format!("cannot listen on {address} for metrics"))?;
            let local = listener.local_addr()?;
            services.metrics = None;
            let served = cairn_server::serve_metrics(
                listener,
                services.clone(),
                telemetry,
                std::future::pending(),
            );
            tracing::info!("metrics at http://{local}{}", cairn_server::METRICS_PATH);
            Some(tokio::spawn(served))
        }
        None => None,
    };
    tracing::info!(database = %opened.label, profile = %args.profile, "storage ready");
    println!("cairn listening on http://{local}");
    let dreams =
        args.dream_every.map(|every| tokio::spawn(dream_on_schedule(engine.clone(), every)));
    let config = ServerConfig {
        body_read_timeout: args.body_timeout,
        max_connections_per_address: args.max_connections_per_address,
        max_connections: args.max_connections as usize,
        header_read_timeout: args.header_timeout,
        http2_idle_timeout: args.http2_idle_timeout,
        max_body_bytes_in_flight: args.max_body_bytes_in_flight,
        identify_local_accounts: profile == Profile::Solo,
        max_body_reads_per_address: args.max_body_reads_per_address as usize,
        trusted_proxies: args.trusted_proxies.clone(),
        ..ServerConfig::default()
    };
    cairn_server::serve(listener, services, config, shutdown_signal()).await?;
    if let Some(metrics_server) = metrics_server {
        metrics_server.abort();
    }
    if let Some(dreams) = dreams {
        dreams.abort();
    }
    engine.settled().await;
    Ok(())
}

/// A proxy's address or range: `10.0.0.5`, `10.0.0.0/8`, `fd00::/8`.
fn proxy_range(text: &str) -> Result<ipnet::IpNet, String> {
    let text = text.trim();
    text.parse::<ipnet::IpNet>()
        .or_else(|_| text.parse::<IpAddr>().map(ipnet::IpNet::from))
        .map_err(|_| format!("`{text}` is not an address or a CIDR range (such as 10.0.0.0/8)"))
}

/// The build, as health's `build` gives it: the version and the git commit it was built
/// from, when built in a checkout (`0.1.0+3f2a1bc4d5e6`).
fn build() -> String {
    match env!("CAIRN_GIT_COMMIT") {
        "" => env!("CARGO_PKG_VERSION").to_owned(),
        commit => format!("{}+{commit}", env!("CARGO_PKG_VERSION")),
    }
}

/// The MCP tools at `/mcp`: a client of this very daemon, on loopback, which carries each
/// caller's credentials to the API.
fn mcp_http(local: SocketAddr) -> anyhow::Result<cairn_mcp::McpHttp> {
    let loopback = match local.ip() {
        ip if ip.is_unspecified() && ip.is_ipv6() => std::net::Ipv6Addr::LOCALHOST.into(),
        ip if ip.is_unspecified() => std::net::Ipv4Addr::LOCALHOST.into(),
        ip => ip,
    };
    let own = SocketAddr::new(loopback, local.port());
    let options = cairn_client::ClientOptions::new(format!("http://{own}"))
        .timeout(std::time::Duration::from_secs(600));
    Ok(cairn_mcp::McpHttp::new(cairn_client::Client::new(options)?))
}

/// Turns on semantic retrieval as configured, and says in the log which mode is active.
/// The conversation runtime over the same store and engine, mounted at `/api/runtime` with
/// the memory API's authentication.
fn runtime_handler(
    args: &RuntimeArgs,
    store: Arc<dyn cairn_store::Store>,
    engine: Engine,
    memory: MemoryApi,
    data_dir: &std::path::Path,
) -> anyhow::Result<cairn_runtime::RuntimeHandler> {
    use cairn_agents::journey::Definitions;
    use cairn_agents::{DefaultRuntime, RuntimeConfig};
    use cairn_runtime::{Cors, CorsOptions, HandlerOptions};

    let definitions = match &args.agents_dir {
        Some(dir) => Definitions::load_dir(dir)
            .map_err(|error| anyhow::anyhow!("agent definitions: {error}"))?,
        None => Definitions::bundled(),
    };
    let events = match &args.events_file {
        Some(path) => {
            let text = std::fs::read(path)
                .with_context(|| format!("cannot read the events file {}", path.display()))?;
            serde_json::from_slice(&text)
                .with_context(|| format!("the events file {}", path.display()))?
        }
        None => cairn_agents::bundled_events(),
    };
    let journey_events = cairn_agents::journey_events_for(&events, &definitions);
    let chat = args.chat_url.as_ref().map(|url| cairn_agents::llm::ChatConfig {
        url: url.clone(),
        model: args.chat_model.clone(),
        api_key: args.chat_api_key.clone(),
        timeout: std::time::Duration::from_secs(60),
    });
    tracing::info!(
        agents = %definitions.agent_ids().collect::<Vec<_>>().join(", "),
        replies = if chat.is_some() { "language model" } else { "journeys and memory" },
        "conversation runtime ready at {}",
        cairn_server::RUNTIME_BASE_PATH
    );
    let config = RuntimeConfig {
        definitions: Arc::new(definitions),
        chat,
        voice: args.voice.config(data_dir)?,
        ..RuntimeConfig::default()
    };
    let runtime = DefaultRuntime::new(store.clone(), Some(engine.clone()), config);
    listen_to_other_daemons(store.as_ref(), &runtime, &engine);
    let mut options = HandlerOptions::new(Arc::new(runtime))
        .base_path(cairn_server::RUNTIME_BASE_PATH)
        .authorize(cairn_server::MemoryAuthorize {
            memory,
            trusted_origins: args.cors_origins.clone(),
        })
        .custom_events(events.custom_events)
        .journey_events(journey_events)
        .expose_internal_errors(args.expose_internal_errors)
        .sse_poll_interval(std::time::Duration::from_millis(args.sse_poll_interval_ms));
    let mut handshake = cairn_runtime::VoiceHandshake::new();
    if let Some(url) = &args.voice.voice_public_url {
        handshake = handshake.public_url(url.clone());
    }
    options = options.voice(handshake);
    if !args.cors_origins.is_empty() {
        options = options.cors(Cors::Explicit(CorsOptions::new(args.cors_origins.clone())));
    }
    options.build().map_err(|error| anyhow::anyhow!(error))
}

/// What other daemons on the same database change reaches this one's event streams and
/// caches (a store no other process uses reports nothing).
fn listen_to_other_daemons(
    store: &dyn cairn_store::Store,
    runtime: &cairn_agents::DefaultRuntime,
    engine: &Engine,
) {
    let (runtime, engine) = (runtime.clone(), engine.clone());
    store.listen(Arc::new(move |change: &cairn_store::ExternalChange| {
        runtime.external_change(change);
        engine.external_change(change);
    }));
}

async fn with_embedder(
    engine: Engine,
    args: &ServeArgs,
    data_dir: &std::path::Path,
) -> anyhow::Result<Engine> {
    let model_dir = cairn_embed::model_dir(data_dir);
    let choice = args.embedder.clone().unwrap_or_else(|| {
        if cairn_embed::model_installed(&model_dir) {
            "local".to_owned()
        } else {
            "none".to_owned()
        }
    });
    match choice.as_str() {
        "openai" => {
            let key = args.embedding_api_key.clone();
            match cairn_embed::OpenAiEmbedder::connect(
                &args.embedding_url,
                &args.embedding_model,
                key,
            )
            .await
            {
                Ok(embedder) => {
                    tracing::info!(
                        url = %args.embedding_url,
                        model = %args.embedding_model,
                        dimensions = cairn_memory::embed::Embedder::dimensions(&embedder),
                        "retrieval: hybrid (full text fused with an OpenAI-compatible embeddings endpoint)"
                    );
                    Ok(engine.with_embedder(Arc::new(embedder)))
                }
                Err(error) => {
                    tracing::error!(%error, "retrieval: fulltext (the embeddings endpoint failed; semantic retrieval is off)");
                    Ok(engine)
                }
            }
        }
        "local" => {
            let embedder = cairn_embed::LocalModel::load(&model_dir).map_err(|error| {
                anyhow::anyhow!(
                    "the local model in {} cannot be loaded: {error}; run `cairn model fetch`",
                    model_dir.display()
                )
            })?;
            tracing::info!(model = %model_dir.display(), "retrieval: hybrid (full text fused with the local all-MiniLM-L6-v2 model)");
            Ok(engine.with_embedder(Arc::new(embedder)))
        }
        _ => {
            tracing::info!(
                "retrieval: fulltext (no embedder; `cairn model fetch` installs the local model)"
            );
            Ok(engine)
        }
    }
}

/// Runs the dream cycle every `every`, as `system:dream`, until the daemon stops.
async fn dream_on_schedule(engine: Engine, every: std::time::Duration) {
    let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    loop {
        ticks.tick().await;
        match engine.dream(cairn_types::DreamRequest::default(), "system:dream").await {
            Ok(report) => tracing::info!(
                merged = report.merged.len(),
                staled = report.staled.len(),
                conflicts = report.conflicts.len(),
                "dream cycle done"
            ),
            Err(error) => tracing::error!(%error, "dream cycle failed"),
        }
    }
}

fn jwt_verifier(args: &ServeArgs, profile: Profile) -> anyhow::Result<Option<JwtVerifier>> {
    let verifier = match (&args.jwt_secret, &args.jwt_public_key) {
        (Some(_), Some(_)) => bail!("set SERVICE_JWT_SECRET or SERVICE_JWT_PUBLIC_KEY, not both"),
        (Some(secret), None) => {
            if secret.len() < 32 {
                bail!("the JWT secret is {} bytes; use at least 32", secret.len());
            }
            JwtVerifier::hs256(secret.as_bytes())
        }
        (None, Some(path)) => {
            let pem = std::fs::read(path)
                .with_context(|| format!("cannot read the JWT public key {}", path.display()))?;
            JwtVerifier::rs256_pem(&pem).map_err(|error| {
                anyhow::anyhow!("the JWT public key {}: {error}", path.display())
            })?
        }
        (None, None) => {
            if !args.jwt_audience.is_empty() || !args.jwt_issuer.is_empty() {
                bail!(
                    "SERVICE_JWT_AUDIENCE and SERVICE_JWT_ISSUER check bearer tokens, and no JWT key \
                     is configured: set SERVICE_JWT_SECRET or SERVICE_JWT_PUBLIC_KEY too"
                );
            }
            return Ok(None);
        }
    };
    let (audiences, issuers) = (trimmed(&args.jwt_audience), trimmed(&args.jwt_issuer));
    // An identity provider's key signs tokens for every service it serves: without `aud`
    // and `iss` checks, a token minted for another service would work here.
    if profile == Profile::Production
        && verifier.is_public_key()
        && (audiences.is_empty() || issuers.is_empty())
    {
        bail!(
            "the production profile with an RS256 key (SERVICE_JWT_PUBLIC_KEY) needs \
             SERVICE_JWT_AUDIENCE and SERVICE_JWT_ISSUER (--jwt-audience, --jwt-issuer), so \
             tokens the identity provider issued for other services are refused"
        );
    }
    Ok(Some(verifier.audiences(&audiences).issuers(&issuers)))
}

/// The non-blank values of a repeatable option, trimmed.
fn trimmed(values: &[String]) -> Vec<String> {
    values
        .iter()
        .map(|value| value.trim())
        .filter(|value| !value.is_empty())
        .map(str::to_owned)
        .collect()
}

/// The folders connectors may read, canonical (so a symbolic link cannot widen them): the
/// ones given, or the home directory of the account running the daemon.
fn connector_roots(given: &[PathBuf]) -> anyhow::Result<Vec<PathBuf>> {
    let roots = if given.is_empty() {
        let home = dirs::home_dir().context(
            "no home directory is known for this account; name the folders connectors may read \
             with --connector-root (SERVICE_CONNECTOR_ROOTS)",
        )?;
        vec![home]
    } else {
        given.to_vec()
    };
    let roots = roots
        .iter()
        .map(|root| {
            if !root.is_absolute() {
                bail!("the connector root `{}` is not an absolute path", root.display());
            }
            std::fs::canonicalize(root).with_context(|| {
                format!("the connector root `{}` cannot be opened", root.display())
            })
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let shown: Vec<String> = roots.iter().map(|root| root.display().to_string()).collect();
    tracing::info!(roots = %shown.join(", "), "connectors may read these folders");
    Ok(roots)
}

/// Completes on SIGINT (Ctrl-C) or SIGTERM.
async fn shutdown_signal() {
    let interrupt = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = interrupt => tracing::info!("interrupted"),
        () = terminate => tracing::info!("terminated"),
    }
}

/// A browser origin as CORS compares it: `scheme://host[:port]`, nothing after.
fn web_origin(text: &str) -> Result<String, String> {
    let text = text.trim();
    let invalid = || {
        format!(
            "`{text}` is not a web origin; give the scheme and host, e.g. `https://shop.example`"
        )
    };
    let (scheme, rest) = text.split_once("://").ok_or_else(invalid)?;
    let host = rest.split(':').next().unwrap_or_default();
    let port_ok = rest.split_once(':').is_none_or(|(_, port)| port.parse::<u16>().is_ok());
    let host_ok = !host.is_empty()
        && host.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '[' | ']'));
    if !matches!(scheme, "http" | "https") || !host_ok || !port_ok || rest.contains('/') {
        return Err(invalid());
    }
    Ok(text.to_owned())
}

#[cfg(test)]
pub(crate) mod tests {
    use std::time::Duration;

    use cairn_agents::{DefaultRuntime, RuntimeConfig};
    use cairn_runtime::{CreateConversationInput, CustomEventInput, Runtime};
    use cairn_test_support::postgres::TestCluster;

    use super::*;
    use crate::{DataDirArg, DatabaseArgs};

    /// The options of a daemon on `url` (SQLite in `dir` when `None`).
    pub(crate) fn store_args(dir: &std::path::Path, url: Option<&str>) -> StoreArgs {
        StoreArgs {
            data_dir: DataDirArg { data_dir: Some(dir.to_owned()) },
            database: DatabaseArgs {
                database_url: url.map(str::to_owned),
                database_schema: "public".to_owned(),
                database_pool_size: 4,
                database_lock_connections: 4,
                database_ca_file: None,
            },
        }
    }

    /// A daemon's runtime over `args`'s store, hearing the other daemons as `serve` wires it.
    async fn daemon(args: &StoreArgs) -> (DefaultRuntime, Arc<dyn cairn_store::Store>) {
        let store = args.open_store(true).await.unwrap().store;
        let engine = Engine::new(store.clone());
        let runtime =
            DefaultRuntime::new(store.clone(), Some(engine.clone()), RuntimeConfig::default());
        listen_to_other_daemons(store.as_ref(), &runtime, &engine);
        (runtime, store)
    }

    fn ping(conversation_id: &str) -> CustomEventInput {
        CustomEventInput {
            conversation_id: conversation_id.to_owned(),
            event: "ping".to_owned(),
            payload: serde_json::json!({}),
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn daemons_on_one_database_wake_each_others_streams_and_share_step_locks() {
        let (cluster, url) = TestCluster::with_database();
        let dir = tempfile::tempdir().unwrap();
        let args = store_args(dir.path(), Some(&url));
        let ((a, _), (b, b_store)) = (daemon(&args).await, daemon(&args).await);

        let conversation = a.create_conversation(CreateConversationInput::default()).await.unwrap();
        let id = conversation.id;
        let mut stream = a.subscribe(&id).unwrap();
        stream.borrow_and_update();
        b.emit_custom_event(ping(&id)).await.unwrap();
        // (The store's notice of the creation, offset 1, may come first.)
        tokio::time::timeout(Duration::from_secs(2), stream.wait_for(|next| *next >= 2))
            .await
            .expect("an append through B wakes A's stream within 2 s")
            .unwrap();
        assert_eq!(*stream.borrow_and_update(), 2, "the offset after B's event");

        // A step on A waits while another daemon holds the conversation's lock.
        let held = b_store.lock(&id).await.unwrap().expect("a shared store has shared locks");
        let step = tokio::spawn({
            let (a, id) = (a.clone(), id.clone());
            async move { a.emit_custom_event(ping(&id)).await }
        });
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert!(!step.is_finished(), "A's step waits for the lock B holds");
        drop(held);
        let event = tokio::time::timeout(Duration::from_secs(5), step)
            .await
            .expect("A's step runs once B lets go")
            .unwrap()
            .unwrap()
            .event;
        assert_eq!(event.offset, 2);
        stream.borrow_and_update();

        // Every database session of both daemons ends (a restart, a network cut): both
        // recover by themselves, and A's stream hears B's appends again.
        assert!(cluster.terminate_sessions("cairn/%") > 0);
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        let offset = loop {
            match b.emit_custom_event(ping(&id)).await {
                Ok(result) => break result.event.offset,
                Err(error) if tokio::time::Instant::now() < deadline => {
                    tracing::debug!(%error, "not yet");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Err(error) => panic!("B did not recover within 5 s: {error}"),
            }
        };
        let woken = tokio::time::timeout(Duration::from_secs(5), async {
            loop {
                stream.changed().await.unwrap();
                let events = a.list_events(&id, Some(2), 10).await.unwrap();
                if events.iter().any(|event| event.offset == offset) {
                    return events.len();
                }
            }
        })
        .await
        .expect("A's stream is told to read again and finds B's append after the drop");
        assert!(woken >= 1);
    }

    /// An engine over `args`'s store that embeds with a hashing stand-in for a model, and
    /// hears the other daemons as `serve` wires it.
    async fn engine(args: &StoreArgs) -> (Engine, Arc<dyn cairn_store::Store>) {
        let store = args.open_store(true).await.unwrap().store;
        let embedder = Arc::new(cairn_memory::embed::HashingEmbedder::new(64));
        let engine = Engine::new(store.clone()).with_embedder(embedder);
        let runtime =
            DefaultRuntime::new(store.clone(), Some(engine.clone()), RuntimeConfig::default());
        listen_to_other_daemons(store.as_ref(), &runtime, &engine);
        (engine, store)
    }

    /// Waits up to `seconds` for `check` to come true.
    async fn eventually<F: std::future::Future<Output = bool>>(
        seconds: u64,
        check: impl Fn() -> F,
    ) -> bool {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(seconds);
        while tokio::time::Instant::now() < deadline {
            if check().await {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        check().await
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn engines_on_one_database_decide_one_at_a_time_and_share_one_embedder() {
        let (cluster, url) = TestCluster::with_database();
        let dir = tempfile::tempdir().unwrap();
        let args = store_args(dir.path(), Some(&url));
        let ((a, _), (b, b_store)) = (engine(&args).await, engine(&args).await);

        // A memory written through A is found by meaning through B: one of them embeds,
        // and the other takes the vectors in when the store announces them.
        let new = |content: &str| cairn_types::NewMemory {
            content: content.to_owned(),
            scope: cairn_types::Scope::User,
            repo: None,
            tags: vec![],
            source: None,
            metadata: Default::default(),
        };
        let memory = a.create_memory(new("the staging cluster restarts nightly"), "t").await;
        let memory = memory.unwrap();
        let by_meaning = || cairn_types::SearchQuery {
            q: Some("staging cluster restarts nightly".to_owned()),
            mode: Some(cairn_types::RetrievalMode::Semantic),
            ..cairn_types::SearchQuery::default()
        };
        for (name, engine) in [("A", &a), ("B", &b)] {
            let found = eventually(10, || async {
                let hits = engine.search(by_meaning()).await.unwrap().hits;
                hits.first().is_some_and(|hit| hit.memory.id == memory.id)
            });
            assert!(found.await, "{name} finds the memory by meaning");
        }
        let embedders = cluster.psql(
            url.rsplit('/').next().unwrap(),
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted",
        );
        assert_eq!(embedders, "1", "one daemon holds the embedder lock, the other waits");

        // A decision on A waits while B decides.
        let held = b_store.lock("memory/decisions").await.unwrap().unwrap();
        let archive = tokio::spawn({
            let (a, id) = (a.clone(), memory.id.clone());
            async move { a.archive_memory(&id, "t").await }
        });
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert!(!archive.is_finished(), "A's decision waits for B's");
        drop(held);
        let archived = tokio::time::timeout(Duration::from_secs(5), archive).await.unwrap();
        assert!(archived.unwrap().unwrap().archived_at.is_some());

        // A sync of a connector another daemon is syncing is refused, as a local one is.
        let folder = tempfile::tempdir().unwrap();
        std::fs::write(folder.path().join("notes.md"), "deploys run from main").unwrap();
        let connector = cairn_types::NewConnector {
            kind: cairn_types::ConnectorKind::Folder,
            path: folder.path().display().to_string(),
            name: None,
            scope: None,
            repo: None,
            max_commits: None,
        };
        let connector = a.add_connector(connector).await.unwrap();
        let claim = b_store.try_lock(&format!("connector/{}", connector.id)).await.unwrap();
        assert!(matches!(claim, cairn_store::LockAttempt::Held(_)));
        let busy = a.sync_connector(&connector.id, "t").await.unwrap_err();
        assert!(matches!(busy, cairn_memory::Error::SyncRunning(_)), "{busy}");
        drop(claim);
        let synced = eventually(5, || async { a.sync_connector(&connector.id, "t").await.is_ok() });
        assert!(synced.await, "the sync runs once B lets go");
    }
}
