//! The OpenAPI 3.1 document, generated from the handlers' attributes and the wire types.

use std::sync::LazyLock;

use bytes::Bytes;
use http::Method;
use utoipa::openapi::security::{
    ApiKey, ApiKeyValue, HttpAuthScheme, HttpBuilder, SecurityRequirement, SecurityScheme,
};
use utoipa::openapi::{ContentBuilder, Ref, ResponseBuilder};
use utoipa::{Modify, OpenApi};

use crate::handlers::*;
use cairn_types::Role;

use crate::limits::RateClass;
use crate::routes::ENDPOINTS;

#[derive(OpenApi)]
#[openapi(
    modifiers(&Access),
    info(
        title = "Cairn memory API",
        description = "Memories, context packs, guards, outcomes and evidence for AI agents. \
            Every error is `{\"error\": {\"code\", \"message\", \"status\"}}`.",
    ),
    paths(
        list_memories, create_memory, create_memories, import_memories, get_memory, update_memory, archive_memory, search, context,
        coding_context, guard, outcome, patch_evidence, get_evidence, evidence_pack, review_queue,
        approve, reject, audit_log, list_connectors, add_connector, get_connector, remove_connector,
        sync_connector, connector_health, dream_cycle, list_conflicts, resolve_conflict, erase, create_conversation_token, revoke_conversation_token, health,
        health_live, health_ready, openapi,
    ),
    // Query parameters refer to it, and utoipa registers only what bodies refer to.
    components(schemas(cairn_types::RetrievalMode)),
    tags(
        (name = "memories", description = "Store, read, change and archive memories"),
        (name = "retrieval", description = "Search and context packs"),
        (name = "guards", description = "Check an action before running it"),
        (name = "evidence", description = "Outcomes, patch evidence and evidence packs"),
        (name = "connectors", description = "Folders and git repositories imported as memories"),
        (name = "dream", description = "The dream cycle and conflicts"),
        (name = "governance", description = "The review queue, the audit log and erasure"),
        (name = "system", description = "Health and this document"),
    )
)]
struct ApiDoc;

/// Adds what every route shares, from the route table: the credentials it takes, the role
/// it needs, and its 401, 403 and 429 answers.
struct Access;

impl Modify for Access {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        for endpoint in ENDPOINTS {
            let (path, method) = (endpoint.path, &endpoint.method);
            document_access(openapi, path, method, endpoint.role, endpoint.rate);
        }
    }
}

/// Marks one documented operation as the memory API's authentication guards it: the
/// credentials it takes (an API key or a bearer token; none in the solo profile), the role
/// it needs and its rate-limit class in its description, and its 401, 403 and (when it has
/// a rate limit) 429 answers (and 408 when it takes a body).
/// The daemon calls it for the routes of the handlers it mounts beside this API.
pub fn document_access(
    openapi: &mut utoipa::openapi::OpenApi,
    path: &str,
    method: &Method,
    role: Role,
    class: Option<RateClass>,
) {
    add_access_components(openapi);
    let Some(item) = openapi.paths.paths.get_mut(path) else { return };
    let documented = match *method {
        Method::GET => item.get.as_mut(),
        Method::POST => item.post.as_mut(),
        Method::PATCH => item.patch.as_mut(),
        Method::DELETE => item.delete.as_mut(),
        _ => None,
    };
    let Some(documented) = documented else { return };
    let class = class.map(RateClass::as_str);
    let note = match class {
        Some(class) => format!("Role: `{role}`. Rate-limit class: `{class}`."),
        None => format!("Role: `{role}`. Not rate limited."),
    };
    documented.description = Some(match documented.description.take() {
        Some(description) => format!("{description}\n\n{note}"),
        None => note,
    });
    let limited = class.map(|_| ("429", "RateLimited"));
    for (status, name) in [("401", "Unauthorized"), ("403", "Forbidden")].into_iter().chain(limited)
    {
        documented
            .responses
            .responses
            .insert(status.to_owned(), Ref::from_response_name(name).into());
    }
    if documented.request_body.is_some() {
        let timeout = Ref::from_response_name("RequestTimeout").into();
        documented.responses.responses.insert("408".to_owned(), timeout);
    }
    documented.security = Some(vec![
        SecurityRequirement::new("apiKey", Vec::<String>::new()),
        SecurityRequirement::new("bearer", Vec::<String>::new()),
        SecurityRequirement::default(),
    ]);
}

/// The security schemes and the shared 401, 403, 408 and 429 responses, once.
fn add_access_components(openapi: &mut utoipa::openapi::OpenApi) {
    let components = openapi.components.get_or_insert_with(Default::default);
    if components.security_schemes.contains_key("apiKey") {
        return;
    }
    components.add_security_scheme(
        "apiKey",
        SecurityScheme::ApiKey(ApiKey::Header(ApiKeyValue::with_description(
            "X-API-Key",
            "A key from `cairn keys create`.",
        ))),
    );
    components.add_security_scheme(
        "bearer",
        SecurityScheme::Http(
            HttpBuilder::new()
                .scheme(HttpAuthScheme::Bearer)
                .bearer_format("JWT")
                .description(Some("HS256 or RS256; `exp`, `sub` and `role` claims required."))
                .build(),
        ),
    );
    let error = |description: &str| {
        let content =
            ContentBuilder::new().schema(Some(Ref::from_schema_name("ErrorEnvelope"))).build();
        ResponseBuilder::new().description(description).content("application/json", content).build()
    };
    components.responses.insert(
        "Unauthorized".to_owned(),
        error("Missing or invalid credentials (`UNAUTHORIZED`); the solo profile needs none")
            .into(),
    );
    components.responses.insert(
        "Forbidden".to_owned(),
        error("The caller's role is too small (`FORBIDDEN`)").into(),
    );
    components.responses.insert(
        "RequestTimeout".to_owned(),
        error("The body did not arrive in time (`REQUEST_TIMEOUT`)").into(),
    );
    components.responses.insert(
        "RateLimited".to_owned(),
        error("Too many requests of this class (`RATE_LIMITED`); see `Retry-After`").into(),
    );
}

/// The memory API's OpenAPI document, each route marked with its access.
pub fn document() -> utoipa::openapi::OpenApi {
    ApiDoc::openapi()
}

/// A document as served and committed: pretty JSON with a final newline.
pub fn to_json(document: &utoipa::openapi::OpenApi) -> Bytes {
    let mut text = document.to_pretty_json().expect("the OpenAPI document serializes");
    text.push('\n');
    Bytes::from(text)
}

static DOCUMENT: LazyLock<Bytes> = LazyLock::new(|| to_json(&document()));

/// The memory API's document alone, served at `GET /openapi.json` unless the handler is
/// given another ([`ApiConfig::openapi`](crate::ApiConfig)).
pub fn openapi_json() -> Bytes {
    DOCUMENT.clone()
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

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
        let routed: BTreeSet<String> = ENDPOINTS
            .iter()
            .map(|endpoint| format!("{} {}", endpoint.method, endpoint.path))
            .chain(
                [crate::routes::LIVE_PATH, crate::routes::READY_PATH]
                    .map(|probe| format!("GET {probe}")),
            )
            .collect();
        assert_eq!(documented, routed);
    }
}
