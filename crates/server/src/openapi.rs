//! The daemon's OpenAPI document: the memory API's, with the conversation runtime's routes
//! nested under [`RUNTIME_BASE_PATH`], each marked with the access the daemon's
//! [`MemoryAuthorize`](crate::MemoryAuthorize) hook gives it (all but the voice socket, which
//! its token authorizes). Served at `GET /openapi.json`
//! and committed as `docs/openapi.json`.

use std::sync::LazyLock;

use bytes::Bytes;
use http::Method;
use utoipa::openapi::{InfoBuilder, OpenApi};

use crate::{RUNTIME_BASE_PATH, runtime_access};

/// The whole document.
pub fn document() -> OpenApi {
    let mut document =
        cairn_api::openapi::document().nest(RUNTIME_BASE_PATH, cairn_runtime::openapi::document());
    document.info = InfoBuilder::new()
        .title("Cairn")
        .version(env!("CARGO_PKG_VERSION"))
        .description(Some(
            "The memory API (memories, context packs, guards, outcomes and evidence for AI \
             agents) and, under `/api/runtime`, the conversation runtime. Every error is \
             `{\"error\": {\"code\", \"message\", \"status\"}}`.",
        ))
        .build();
    // The voice socket is authorized by its token alone, not by `MemoryAuthorize`.
    let socket = format!("{RUNTIME_BASE_PATH}/voice/socket");
    let runtime_routes: Vec<(String, Vec<Method>)> = document
        .paths
        .paths
        .iter()
        .filter(|(path, _)| path.starts_with(RUNTIME_BASE_PATH) && **path != socket)
        .map(|(path, item)| {
            let methods = [(Method::GET, item.get.is_some()), (Method::POST, item.post.is_some())];
            let methods = methods.into_iter().filter(|(_, has)| *has).map(|(method, _)| method);
            (path.clone(), methods.collect())
        })
        .collect();
    for (path, methods) in runtime_routes {
        for method in methods {
            let relative = path.strip_prefix(RUNTIME_BASE_PATH).unwrap_or(&path);
            let operation = cairn_runtime::handler::route(&method, relative)
                .ok()
                .map(|(operation, _)| operation);
            let (role, class) = runtime_access(&method, operation);
            cairn_api::openapi::document_access(&mut document, &path, &method, role, Some(class));
        }
    }
    document
}

static DOCUMENT: LazyLock<Bytes> =
    LazyLock::new(|| Bytes::from(cairn_runtime::openapi::to_json(&document())));

/// The whole document as JSON, as served and committed.
pub fn openapi_json() -> Bytes {
    DOCUMENT.clone()
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    /// `UPDATE_OPENAPI=1 cargo test -p cairn-server` (or `cargo xtask openapi`) rewrites the file.
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
    fn runtime_routes_are_nested_and_carry_the_daemons_access() {
        let document: serde_json::Value = serde_json::from_slice(&openapi_json()).unwrap();
        let paths = document["paths"].as_object().unwrap();
        let runtime: Vec<&String> =
            paths.keys().filter(|path| path.starts_with("/api/runtime/")).collect();
        assert_eq!(runtime.len(), 20, "{runtime:?}");
        let send = &paths["/api/runtime/conversations/{id}/messages"]["post"];
        assert!(send["description"].as_str().unwrap().contains("Role: `write`"));
        assert_eq!(send["responses"]["403"]["$ref"], "#/components/responses/Forbidden");
        let stream = &paths["/api/runtime/conversations/{id}/events/stream"]["get"];
        assert!(stream["description"].as_str().unwrap().contains("Role: `read`"));
        assert!(stream["responses"]["200"]["content"]["text/event-stream"].is_object());
        assert!(paths.contains_key("/api/memories"));
        let socket = &paths["/api/runtime/voice/socket"]["get"];
        assert!(socket["security"].is_null(), "the socket's token is its credential");
        assert!(socket["responses"]["101"].is_object());
    }
}
