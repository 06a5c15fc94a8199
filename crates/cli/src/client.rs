//! A small JSON client of the daemon's HTTP API, for the CLI's client subcommands.

use anyhow::{Context as _, bail};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::Method;
use hyper_util::client::legacy::Client as HyperClient;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde_json::Value;

/// Where the daemon is and how to authenticate, shared by every client subcommand.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct ClientArgs {
    /// The daemon's address.
    #[arg(long, env = "CAIRN_URL", default_value = "http://127.0.0.1:8787")]
    url: String,
    /// An API key (not needed by a solo daemon).
    #[arg(long, env = "CAIRN_API_KEY", hide_env_values = true)]
    api_key: Option<String>,
}

#[derive(Clone)]
pub(crate) struct Client {
    base_url: String,
    api_key: Option<String>,
    http: HyperClient<HttpConnector, Full<Bytes>>,
}

impl Client {
    pub(crate) fn new(args: &ClientArgs) -> Client {
        let http = HyperClient::builder(TokioExecutor::new()).build_http();
        Client {
            base_url: args.url.trim_end_matches('/').to_owned(),
            api_key: args.api_key.clone(),
            http,
        }
    }

    pub(crate) async fn get(&self, path: &str) -> anyhow::Result<Value> {
        self.send(Method::GET, path, None).await
    }

    pub(crate) async fn post(&self, path: &str, body: Option<Value>) -> anyhow::Result<Value> {
        self.send(Method::POST, path, body).await
    }

    pub(crate) async fn delete(&self, path: &str) -> anyhow::Result<Value> {
        self.send(Method::DELETE, path, None).await
    }

    /// Sends a request; a non-2xx answer becomes an error carrying the envelope's message.
    async fn send(&self, method: Method, path: &str, body: Option<Value>) -> anyhow::Result<Value> {
        let url = format!("{}{path}", self.base_url);
        let mut request = hyper::Request::builder()
            .method(method.clone())
            .uri(&url)
            .header("content-type", "application/json");
        if let Some(key) = &self.api_key {
            request = request.header("x-api-key", key);
        }
        let body = body.map(|value| Bytes::from(value.to_string())).unwrap_or_default();
        let response =
            self.http.request(request.body(Full::new(body))?).await.with_context(|| {
                format!("cannot reach the daemon at {}; is `cairn serve` running?", self.base_url)
            })?;
        let status = response.status();
        let bytes = response.into_body().collect().await?.to_bytes();
        let value: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        if !status.is_success() {
            let code = value["error"]["code"].as_str().unwrap_or("ERROR");
            let message = value["error"]["message"].as_str().unwrap_or("no message");
            bail!("{method} {path} failed with {status}: {code}: {message}");
        }
        Ok(value)
    }
}
