//! Cairn's web console, as the daemon serves it at `/`: the files `npm run build` writes
//! from `clients/console` into `crates/console/assets` (committed, so building the daemon
//! needs no Node; `cargo xtask ci` rebuilds them and fails when they drifted), embedded in
//! the binary, with their content types, caching and security headers.
//!
//! This crate knows files and headers, nothing about HTTP servers: `cairn-server` decides
//! which requests are the console's ([`is_console_path`]) and builds the responses.

/// The embedded files: path (from `/`), bytes, ETag (quoted).
const FILES: &[(&str, &[u8], &str)] = include!(concat!(env!("OUT_DIR"), "/assets.rs"));

/// One embedded file, ready to serve.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Asset {
    pub path: &'static str,
    pub content_type: &'static str,
    pub bytes: &'static [u8],
    /// A strong validator, quoted as the `ETag` header wants it.
    pub etag: &'static str,
    /// File names are fixed (no content hashes), so every file is revalidated: `no-cache`
    /// lets the browser keep it and ask with `If-None-Match` (a 304 costs a round trip).
    pub cache_control: &'static str,
}

/// The file at `path` (`/assets/console.js`; `/` is `/index.html`), if the console has it.
pub fn asset(path: &str) -> Option<Asset> {
    let path = if path == "/" { "/index.html" } else { path };
    FILES.iter().find(|(file, _, _)| *file == path).map(|(path, bytes, etag)| Asset {
        path,
        content_type: content_type(path),
        bytes,
        etag,
        cache_control: "no-cache",
    })
}

/// The console app's pages (`clients/console/src/App.tsx`): the first segment of a path the
/// app routes in the browser.
pub const PAGES: &[&str] =
    &["memories", "review", "conflicts", "audit", "connectors", "dream", "guards", "conversations"];

/// What the console answers for `path`: the file, or for one of the app's pages ([`PAGES`]:
/// `/memories`, `/conversations/conv_1`) its `index.html`, which routes in the browser.
/// `None` for anything else, so that `/metrics` or `/healthz` is a 404, not a page that
/// "passes" a misconfigured probe.
pub fn page_or_asset(path: &str) -> Option<Asset> {
    if let Some(asset) = asset(path) {
        return Some(asset);
    }
    let page = path.strip_prefix('/')?.split('/').next().unwrap_or_default();
    PAGES.contains(&page).then(|| asset("/index.html")).flatten()
}

/// Whether a path may be the console's: everything but the API (`/api`, `/api/…`), the MCP
/// endpoint and the OpenAPI document, which keep their own answers, 404s included.
pub fn is_console_path(path: &str) -> bool {
    // No allocation: this runs on every request the daemon answers.
    let api = |prefix: &str| {
        path.strip_prefix(prefix).is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
    };
    path.starts_with('/') && !api("/api") && !api("/mcp") && path != "/openapi.json"
}

/// The hashes (`sha256-…`, one a line) of the inline `<style>` elements the console renders:
/// the chat widget's stylesheet. The console's build writes them beside the files.
const STYLE_HASHES: &str = include_str!("../assets/csp-style-hashes.txt");

/// The `Content-Security-Policy` of the console's pages: its own scripts and styles only
/// (and the chat widget's one inline stylesheet, by hash), no inline script, no framing,
/// API calls and the voice socket to this origin. `blob:` scripts are the voice hook's
/// audio worklet, which it loads from a Blob URL (worklets count as scripts); only script
/// already running on the page can make one. `host` is the request's `Host` (for `ws:` and
/// `wss:`, which older browsers do not count as `'self'`) when it is a plain host name or
/// address with an optional port.
pub fn content_security_policy(host: Option<&str>) -> String {
    let mut connect = String::from("'self'");
    if let Some(host) = host.filter(|host| is_plain_host(host)) {
        connect.push_str(&format!(" ws://{host} wss://{host}"));
    }
    let styles: String = STYLE_HASHES
        .lines()
        .map(str::trim)
        .filter(|hash| hash.starts_with("sha256-"))
        .map(|hash| format!(" '{hash}'"))
        .collect();
    format!(
        "default-src 'none'; script-src 'self' blob:; style-src 'self'{styles}; \
         img-src 'self' data:; font-src 'self'; connect-src {connect}; media-src 'self'; \
         manifest-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
    )
}

/// The other security headers of every console response.
pub const SECURITY_HEADERS: &[(&str, &str)] = &[
    ("x-content-type-options", "nosniff"),
    ("x-frame-options", "DENY"),
    ("referrer-policy", "no-referrer"),
    ("cross-origin-opener-policy", "same-origin"),
    ("cross-origin-resource-policy", "same-origin"),
    // The chat panel's voice uses the microphone; nothing else is needed.
    ("permissions-policy", "microphone=(self), camera=(), geolocation=(), payment=(), usb=()"),
];

fn is_plain_host(host: &str) -> bool {
    !host.is_empty()
        && host.len() <= 255
        && host.bytes().all(|byte| byte.is_ascii_alphanumeric() || b".-:[]".contains(&byte))
}

fn content_type(path: &str) -> &'static str {
    match path.rsplit('.').next().unwrap_or_default() {
        "html" => "text/html; charset=utf-8",
        "js" | "mjs" => "text/javascript; charset=utf-8",
        "css" => "text/css; charset=utf-8",
        "json" | "map" => "application/json",
        "svg" => "image/svg+xml",
        "png" => "image/png",
        "ico" => "image/x-icon",
        "woff2" => "font/woff2",
        "txt" => "text/plain; charset=utf-8",
        _ => "application/octet-stream",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_built_console_is_embedded() {
        let index = asset("/").expect("index.html is embedded");
        assert_eq!(index.content_type, "text/html; charset=utf-8");
        let html = std::str::from_utf8(index.bytes).unwrap();
        assert!(html.contains("/assets/console.js"), "{html}");
        let script = asset("/assets/console.js").expect("the script is embedded");
        assert_eq!(script.content_type, "text/javascript; charset=utf-8");
        assert!(asset("/assets/console.css").is_some());
        assert!(index.etag.starts_with('"') && index.etag.ends_with('"'));
        assert_ne!(index.etag, script.etag);
    }

    #[test]
    fn console_routes_get_the_app_and_missing_files_nothing() {
        assert_eq!(page_or_asset("/memories").unwrap().path, "/index.html");
        assert_eq!(page_or_asset("/conversations/conv_1").unwrap().path, "/index.html");
        assert_eq!(page_or_asset("/assets/console.js").unwrap().path, "/assets/console.js");
        assert_eq!(page_or_asset("/assets/missing.js"), None);
        assert_eq!(page_or_asset("/favicon.ico"), None);
        assert_eq!(page_or_asset("/assets/nothing"), None);
    }

    #[test]
    fn the_api_is_never_the_console() {
        for path in
            ["/api", "/api/", "/api/memories", "/api/runtime/x", "/mcp", "/mcp/x", "/openapi.json"]
        {
            assert!(!is_console_path(path), "{path}");
        }
        for path in ["/", "/memories", "/apis", "/mcpx", "/openapi.json.bak", "/assets/console.js"]
        {
            assert!(is_console_path(path), "{path}");
        }
    }

    #[test]
    fn the_policy_allows_the_voice_socket_of_this_host_only() {
        let policy = content_security_policy(Some("127.0.0.1:8787"));
        assert!(policy.contains("connect-src 'self' ws://127.0.0.1:8787 wss://127.0.0.1:8787;"));
        assert!(policy.contains("script-src 'self' blob:;"));
        assert!(policy.contains("style-src 'self' 'sha256-"), "{policy}");
        assert!(asset("/csp-style-hashes.txt").is_none());
        assert!(policy.contains("frame-ancestors 'none'"));
        let hostile = content_security_policy(Some("a.example; script-src *"));
        assert!(hostile.contains("connect-src 'self';"), "{hostile}");
    }
}
