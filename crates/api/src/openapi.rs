//! The OpenAPI 3.1 document, generated from the handlers' attributes and the wire types.

use std::sync::LazyLock;

use bytes::Bytes;
use utoipa::OpenApi;

use crate::handlers::*;

#[derive(OpenApi)]
#[openapi(
    info(
        title = "Cairn memory API",
        description = "Memories, context packs, guards, outcomes and evidence for AI agents. \
            Every error is `{\"error\": {\"code\", \"message\", \"status\"}}`.",
    ),
    paths(
        list_memories, create_memory, get_memory, update_memory, archive_memory, search, context,
        coding_context, guard, outcome, patch_evidence, get_evidence, health, openapi,
    ),
    tags(
        (name = "memories", description = "Store, read, change and archive memories"),
        (name = "retrieval", description = "Search and context packs"),
        (name = "guards", description = "Check an action before running it"),
        (name = "evidence", description = "Outcomes and patch evidence"),
        (name = "system", description = "Health and this document"),
    )
)]
struct ApiDoc;

static DOCUMENT: LazyLock<Bytes> = LazyLock::new(|| {
    let mut text = ApiDoc::openapi().to_pretty_json().expect("the OpenAPI document serializes");
    text.push('\n');
    Bytes::from(text)
});

/// The OpenAPI document as served at `GET /openapi.json` and committed as `docs/openapi.json`.
pub fn openapi_json() -> Bytes {
    DOCUMENT.clone()
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;
    use std::path::Path;

    use super::*;
    use crate::routes::ROUTES;

    /// `UPDATE_OPENAPI=1 cargo test -p cairn-api` (or `cargo xtask openapi`) rewrites the file.
    #[test]
    fn committed_document_matches_the_code() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/openapi.json");
        let generated = String::from_utf8(openapi_json().to_vec()).unwrap();
        if std::env::var_os("UPDATE_OPENAPI").is_some() {
            std::fs::write(&path, &generated).unwrap();
            return;
        }
        let committed = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            committed == generated,
            "docs/openapi.json is out of date with the code; run `cargo xtask openapi` and commit it"
        );
    }

    #[test]
    fn every_route_is_documented_and_nothing_else() {
        let document: serde_json::Value = serde_json::from_slice(&openapi_json()).unwrap();
        assert_eq!(document["openapi"].as_str().unwrap().get(..3), Some("3.1"));
        let mut documented = BTreeSet::new();
        for (path, item) in document["paths"].as_object().unwrap() {
            for method in item.as_object().unwrap().keys() {
                documented.insert(format!("{} {path}", method.to_uppercase()));
            }
        }
        let routed: BTreeSet<String> = ROUTES
            .iter()
            .flat_map(|route| {
                route.operations.iter().map(move |(method, _)| format!("{method} {}", route.path))
            })
            .collect();
        assert_eq!(documented, routed);
    }
}
