//! An embedder backed by an OpenAI-compatible `/v1/embeddings` endpoint.

use cairn_memory::embed::{EmbedError, Embedder, normalize};
use serde_json::{Value, json};

/// Calls `POST {base_url}/embeddings` with `{"model", "input": [...]}`.
#[derive(Clone, Debug)]
pub struct OpenAiEmbedder {
    endpoint: crate::Endpoint,
    model: String,
    dimensions: usize,
}

impl OpenAiEmbedder {
    /// Connects to the endpoint (`base_url` such as `http://localhost:11434/v1`) and learns the
    /// model's dimensions by embedding one probe text.
    pub async fn connect(
        base_url: &str,
        model: &str,
        api_key: Option<String>,
    ) -> Result<OpenAiEmbedder, EmbedError> {
        let url = format!("{}/embeddings", base_url.trim_end_matches('/'));
        let mut embedder = OpenAiEmbedder {
            endpoint: crate::Endpoint::new(url, api_key),
            model: model.to_owned(),
            dimensions: 0,
        };
        let probe = embedder.embed(&["dimension probe".to_owned()]).await?;
        embedder.dimensions = probe.first().map_or(0, Vec::len);
        if embedder.dimensions == 0 {
            return Err(EmbedError(format!(
                "{} returned an empty vector",
                embedder.endpoint.label
            )));
        }
        Ok(embedder)
    }

    fn request(&self, texts: Vec<String>) -> Result<Vec<Vec<f32>>, EmbedError> {
        let failed = |reason: String| EmbedError(format!("{}: {reason}", self.endpoint.label));
        let request = self.endpoint.post();
        let count = texts.len();
        let mut response = request
            .send_json(json!({"model": self.model, "input": texts}))
            .map_err(|error| failed(error.to_string()))?;
        let status = response.status();
        let body: Value = response
            .body_mut()
            .read_json()
            .map_err(|error| failed(format!("not JSON ({status}): {error}")))?;
        if !status.is_success() {
            return Err(failed(format!(
                "{status}: {}",
                body["error"]["message"].as_str().unwrap_or("no message")
            )));
        }
        let mut data = body["data"]
            .as_array()
            .cloned()
            .ok_or_else(|| failed("no `data` in the answer".to_owned()))?;
        data.sort_by_key(|item| item["index"].as_u64().unwrap_or(0));
        let vectors: Vec<Vec<f32>> = data
            .iter()
            .map(|item| {
                let mut vector: Vec<f32> = item["embedding"]
                    .as_array()
                    .map(|values| {
                        values.iter().filter_map(Value::as_f64).map(|value| value as f32).collect()
                    })
                    .unwrap_or_default();
                normalize(&mut vector);
                vector
            })
            .collect();
        if vectors.len() != count || vectors.iter().any(Vec::is_empty) {
            return Err(failed(format!("asked for {count} vectors, got {}", vectors.len())));
        }
        Ok(vectors)
    }
}

/// `url` without user info (`https://user:secret@host/…`) and query (`?api-key=…`), which
/// may hold credentials: what errors and logs may show.
pub(crate) fn without_credentials(url: &str) -> String {
    let url = url.split(['?', '#']).next().unwrap_or_default();
    match url.split_once("://") {
        Some((scheme, rest)) => {
            let (authority, path) = rest.find('/').map_or((rest, ""), |slash| rest.split_at(slash));
            let host = authority.rsplit_once('@').map_or(authority, |(_, host)| host);
            format!("{scheme}://{host}{path}")
        }
        None => url.to_owned(),
    }
}

#[async_trait::async_trait]
impl Embedder for OpenAiEmbedder {
    fn model(&self) -> &str {
        &self.model
    }

    fn dimensions(&self) -> usize {
        self.dimensions
    }

    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let (embedder, texts) = (self.clone(), texts.to_vec());
        tokio::task::spawn_blocking(move || embedder.request(texts))
            .await
            .map_err(|error| EmbedError(error.to_string()))?
    }
}

#[cfg(test)]
mod tests {
    use super::without_credentials;

    #[test]
    fn errors_name_the_endpoint_without_its_credentials() {
        for (url, shown) in [
            ("https://api.openai.com/v1/embeddings", "https://api.openai.com/v1/embeddings"),
            ("https://user:s3cret@llm.example/v1/embeddings", "https://llm.example/v1/embeddings"),
            (
                "http://localhost:11434/v1/embeddings?api-key=s3cret",
                "http://localhost:11434/v1/embeddings",
            ),
            ("https://token@host.example", "https://host.example"),
        ] {
            assert_eq!(without_credentials(url), shown);
        }
    }
}
