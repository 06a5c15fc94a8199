//! How the client subcommands reach the daemon (through `cairn-client`), and how their
//! failures read: an API error is its code and message, an unreachable daemon one line
//! naming the URL.

use std::process::ExitCode;
use std::time::Duration;

use cairn_client::{Client, ClientOptions, Error};
use serde::Serialize;

/// Where the daemon is and how to authenticate, shared by every client subcommand.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct ClientArgs {
    /// The daemon's address.
    #[arg(long, env = "CAIRN_URL", default_value = "http://127.0.0.1:8787")]
    pub url: String,
    /// An API key (not needed by a solo daemon).
    #[arg(long, env = "CAIRN_API_KEY", hide_env_values = true)]
    pub api_key: Option<String>,
}

impl ClientArgs {
    /// A client of the daemon; calls may take up to `timeout`.
    pub(crate) fn connect_with(&self, timeout: Duration) -> anyhow::Result<Client> {
        let mut options = ClientOptions::new(&self.url).timeout(timeout);
        options.api_key = self.api_key.clone();
        Ok(Client::new(options)?)
    }

    /// A client whose calls are sent once and must answer within `deadline`: for hooks and
    /// the guard, which fall back to the local rules at their deadline instead of retrying.
    pub(crate) fn connect_within(&self, deadline: Duration) -> anyhow::Result<Client> {
        let mut options = ClientOptions::new(&self.url).timeout(deadline).retries(0);
        options.api_key = self.api_key.clone();
        Ok(Client::new(options)?)
    }

    pub(crate) fn connect(&self) -> anyhow::Result<Client> {
        self.connect_with(Duration::from_secs(60))
    }
}

/// Prints a failure on stderr as one line a person can act on, and says how to exit.
pub(crate) fn report(error: &anyhow::Error) -> ExitCode {
    match error.downcast_ref::<Error>() {
        Some(Error::Api(api)) => match api.request_id() {
            Some(id) => eprintln!("error: {}: {} (request {id})", api.code, api.message),
            None => eprintln!("error: {}: {}", api.code, api.message),
        },
        Some(Error::Transport { url, source }) => eprintln!(
            "error: cannot reach the Cairn daemon at {} ({source}); is `cairn serve` running?",
            origin(url)
        ),
        Some(Error::Timeout { url, timeout }) => eprintln!(
            "error: the Cairn daemon at {} did not answer within {timeout:?}",
            origin(url)
        ),
        _ => eprintln!("error: {error:#}"),
    }
    ExitCode::FAILURE
}

/// `http://host:port` of a request URL.
fn origin(url: &str) -> &str {
    let after_scheme = url.find("://").map_or(0, |at| at + 3);
    url[after_scheme..].find('/').map_or(url, |slash| &url[..after_scheme + slash])
}

/// Prints a value as pretty JSON on stdout.
pub(crate) fn print_json(value: &impl Serialize) -> anyhow::Result<()> {
    println!("{}", serde_json::to_string_pretty(value)?);
    Ok(())
}

/// ANSI styles, only when stdout is a terminal and `NO_COLOR` is not set.
pub(crate) struct Paint {
    on: bool,
}

impl Paint {
    pub(crate) fn stdout() -> Paint {
        Paint::when(std::io::IsTerminal::is_terminal(&std::io::stdout()))
    }

    pub(crate) fn stderr() -> Paint {
        Paint::when(std::io::IsTerminal::is_terminal(&std::io::stderr()))
    }

    fn when(terminal: bool) -> Paint {
        Paint { on: terminal && std::env::var_os("NO_COLOR").is_none() }
    }

    fn style(&self, code: &str, text: &str) -> String {
        if self.on { format!("\x1b[{code}m{text}\x1b[0m") } else { text.to_owned() }
    }

    pub(crate) fn dim(&self, text: &str) -> String {
        self.style("2", text)
    }

    pub(crate) fn bold(&self, text: &str) -> String {
        self.style("1", text)
    }

    pub(crate) fn red(&self, text: &str) -> String {
        self.style("31", text)
    }

    pub(crate) fn yellow(&self, text: &str) -> String {
        self.style("33", text)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn origins_of_request_urls() {
        assert_eq!(super::origin("http://127.0.0.1:8787/api/health"), "http://127.0.0.1:8787");
        assert_eq!(super::origin("https://cairn.example"), "https://cairn.example");
    }
}
