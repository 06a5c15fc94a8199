//! Authentication: API keys (`X-API-Key`) and bearer JWTs, under the `solo` and `production`
//! profiles, and the keys themselves (generated here, stored only as SHA-256 hashes).

use std::net::IpAddr;
use std::sync::Arc;

use cairn_store::KeyStore;
use cairn_types::{ApiKey, ErrorCode, IdPrefix, Role, Timestamp, new_id};
use http::HeaderMap;
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde::Deserialize;
use sha2::{Digest, Sha256};

use cairn_http::ApiError;

/// How much a deployment trusts its callers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Profile {
    /// One developer on loopback: no credentials needed; any presented are still checked.
    #[default]
    Solo,
    /// A shared service: every request must authenticate.
    Production,
}

/// The local account a connection comes from, as the transport found it in the operating
/// system's socket table, in the request's extensions. The solo profile serves requests
/// without credentials to the daemon's own account alone; without this extension (a server
/// that cannot tell) it serves every local caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PeerAccount {
    /// The account the daemon runs as.
    Owner,
    /// Another account of the machine: its uid.
    Other(u32),
    /// The connection is not in the socket table (not from this machine, or gone).
    Unknown,
}

/// How often an open stream's credential is looked up again: a revoked or expired one ends
/// its streams within this long.
pub const CREDENTIAL_CHECK: std::time::Duration = std::time::Duration::from_millis(500);

pub use cairn_http::CredentialEnds;

/// Verifies bearer tokens: HS256 with a shared secret or RS256 with a public key.
#[derive(Clone)]
pub struct JwtVerifier {
    key: DecodingKey,
    validation: Validation,
}

impl std::fmt::Debug for JwtVerifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JwtVerifier").field("algorithms", &self.validation.algorithms).finish()
    }
}

impl JwtVerifier {
    pub fn hs256(secret: &[u8]) -> JwtVerifier {
        JwtVerifier::new(DecodingKey::from_secret(secret), Algorithm::HS256)
    }

    /// An RS256 verifier from a PEM-encoded RSA public key.
    pub fn rs256_pem(pem: &[u8]) -> Result<JwtVerifier, String> {
        let key = DecodingKey::from_rsa_pem(pem)
            .map_err(|error| format!("not an RSA public key in PEM form: {error}"))?;
        Ok(JwtVerifier::new(key, Algorithm::RS256))
    }

    fn new(key: DecodingKey, algorithm: Algorithm) -> JwtVerifier {
        // `exp` is required and enforced, and `nbf` enforced when present, both with
        // jsonwebtoken's default 60 s of leeway. `aud` and `iss` are checked once configured.
        let mut validation = Validation::new(algorithm);
        validation.set_required_spec_claims(&["exp"]);
        validation.validate_nbf = true;
        validation.validate_aud = false;
        JwtVerifier { key, validation }
    }

    /// Accepts only tokens whose `aud` claim names one of `audiences`; a token without
    /// `aud` is refused. Without this, `aud` is not checked.
    pub fn audiences(mut self, audiences: &[String]) -> JwtVerifier {
        if audiences.is_empty() {
            return self;
        }
        self.validation.set_audience(audiences);
        self.validation.validate_aud = true;
        self.validation.required_spec_claims.insert("aud".to_owned());
        self
    }

    /// Accepts only tokens whose `iss` claim is one of `issuers`; a token without `iss` is
    /// refused. Without this, `iss` is not checked.
    pub fn issuers(mut self, issuers: &[String]) -> JwtVerifier {
        if issuers.is_empty() {
            return self;
        }
        self.validation.set_issuer(issuers);
        self.validation.required_spec_claims.insert("iss".to_owned());
        self
    }

    /// Whether tokens are signed with a public-key algorithm (RS256), as identity
    /// providers that serve several services sign them.
    pub fn is_public_key(&self) -> bool {
        self.validation.algorithms.contains(&Algorithm::RS256)
    }
}

/// Authentication settings of the API.
#[derive(Debug, Clone, Default)]
pub struct AuthConfig {
    pub profile: Profile,
    pub jwt: Option<JwtVerifier>,
}

/// Who is calling, and what they may do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    /// `key:<id>` for API keys, `jwt:<sub>` for tokens, `token:<id>` for conversation tokens,
    /// `local:<address>` for solo callers.
    pub id: String,
    pub role: Role,
    /// The one conversation a conversation token opens.
    pub conversation: Option<String>,
}

#[derive(Deserialize)]
struct Claims {
    sub: Option<String>,
    role: Option<String>,
}

/// A request's credentials, as [`Authenticator::authenticate`] reads them.
enum Credentials<'h> {
    /// No lookup needed: the principal, or why there is none.
    Known(Result<Principal, ApiError>),
    /// The solo profile's caller from the account that runs the daemon, at this address.
    Local(Option<IpAddr>),
    ApiKey(&'h str),
    ConversationToken(&'h str),
}

/// A constant, so that each request's lookup does not parse the name again.
const X_API_KEY: http::HeaderName = http::HeaderName::from_static("x-api-key");

pub(crate) struct Authenticator {
    config: AuthConfig,
    keys: Arc<dyn KeyStore>,
    /// When each key's use was last noted in the store: a key's uses are written at most
    /// once a minute (`cairn keys list` shows the last one).
    noted_uses: std::sync::Mutex<std::collections::HashMap<String, std::time::Instant>>,
}

/// How often a key's last use is written to the store, at most.
const NOTE_USE_EVERY: std::time::Duration = std::time::Duration::from_secs(60);

impl Authenticator {
    pub(crate) fn new(config: AuthConfig, keys: Arc<dyn KeyStore>) -> Authenticator {
        Authenticator { config, keys, noted_uses: Default::default() }
    }

    /// Notes `key`'s use in the store, unless it was noted within the last minute; in the
    /// background (bookkeeping never delays a request).
    fn note_use(&self, key: &ApiKey) {
        {
            let mut noted = self.noted_uses.lock().expect("never poisoned");
            if noted.get(&key.id).is_some_and(|at| at.elapsed() < NOTE_USE_EVERY) {
                return;
            }
            if noted.len() > 10_000 {
                noted.retain(|_, at| at.elapsed() < NOTE_USE_EVERY);
            }
            noted.insert(key.id.clone(), std::time::Instant::now());
        }
        let (keys, id) = (self.keys.clone(), key.id.clone());
        tokio::spawn(async move {
            if let Err(error) = keys.mark_key_used(&id, Timestamp::now()).await {
                tracing::warn!(%error, key = %id, "cannot note a key's use");
            }
        });
    }

    /// In the solo profile, refuses requests a web page could have made: addressed to another
    /// host name (DNS rebinding) or sent from a page that is not on this machine (cross-site
    /// requests carry an `Origin`). Agents, curl and local tools pass.
    /// `trusted_origins` are web origins allowed anyway (a runtime's CORS origins).
    pub(crate) fn check_local(
        &self,
        headers: &HeaderMap,
        uri: &http::Uri,
        trusted_origins: &[String],
    ) -> Result<(), ApiError> {
        if self.config.profile != Profile::Solo {
            return Ok(());
        }
        let host = headers
            .get(http::header::HOST)
            .and_then(|host| host.to_str().ok())
            .or(uri.authority().map(|a| a.as_str()));
        if let Some(host) = host.filter(|host| !is_loopback_authority(host)) {
            return Err(ApiError::new(
                ErrorCode::Forbidden,
                format!("the solo profile answers requests to localhost only, not to `{host}`"),
            ));
        }
        let origin =
            headers.get(http::header::ORIGIN).map(|origin| origin.to_str().unwrap_or("invalid"));
        if let Some(origin) = origin {
            let local = origin
                .strip_prefix("http://")
                .or_else(|| origin.strip_prefix("https://"))
                .is_some_and(is_loopback_authority);
            if !local && !trusted_origins.iter().any(|trusted| trusted == origin) {
                return Err(ApiError::new(
                    ErrorCode::Forbidden,
                    format!(
                        "the solo profile refuses requests from web pages of other sites (Origin `{origin}`)"
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Who is calling, from the request's credentials: an API key or a conversation token
    /// (looked up in the store), a JWT, or none (the solo profile's local caller).
    pub(crate) async fn authenticate(
        &self,
        headers: &HeaderMap,
        client: Option<IpAddr>,
        account: Option<PeerAccount>,
    ) -> Result<Principal, ApiError> {
        match self.credentials(headers, client, account) {
            Credentials::Known(principal) => principal,
            Credentials::Local(client) => Ok(local_principal(client)),
            Credentials::ApiKey(key) => self.api_key(key).await,
            Credentials::ConversationToken(token) => self.conversation_token(token).await,
        }
    }

    /// The role [`authenticate`](Authenticator::authenticate)'s principal has, when it
    /// needs no lookup (no API key or conversation token); `None` when it does. For what
    /// spends no rate limit, which needs the caller's role and not its name.
    pub(crate) fn role_now(
        &self,
        headers: &HeaderMap,
        client: Option<IpAddr>,
        account: Option<PeerAccount>,
    ) -> Option<Result<Role, ApiError>> {
        match self.credentials(headers, client, account) {
            Credentials::Known(principal) => Some(principal.map(|principal| principal.role)),
            Credentials::Local(_) => Some(Ok(LOCAL_ROLE)),
            Credentials::ApiKey(_) | Credentials::ConversationToken(_) => None,
        }
    }

    /// A future that completes once the API key or conversation token in `headers` is no
    /// longer valid (revoked, expired, or gone with its conversation), looked up every
    /// [`CREDENTIAL_CHECK`]; `None` for credentials nothing revokes (the solo profile's
    /// local caller, a JWT). What a stream opened with the credential ends on.
    pub(crate) fn credential_ends(&self, headers: &HeaderMap) -> Option<CredentialEnds> {
        let (hash, token) = match self.credentials(headers, None, None) {
            Credentials::ApiKey(key) => (hash_key(key), false),
            Credentials::ConversationToken(token) => (hash_key(token), true),
            _ => return None,
        };
        let keys = self.keys.clone();
        Some(Box::pin(async move {
            loop {
                tokio::time::sleep(CREDENTIAL_CHECK).await;
                let valid = match token {
                    true => keys
                        .find_conversation_token(&hash, Timestamp::now())
                        .await
                        .map(|found| found.is_some()),
                    false => keys
                        .find_active_key(&hash)
                        .await
                        .map(|found| found.is_some_and(|key| !key.expired(Timestamp::now()))),
                };
                match valid {
                    Ok(true) => {}
                    Ok(false) => return,
                    // A failed lookup is no proof of revocation; the next one decides.
                    Err(error) => tracing::warn!(%error, "credential lookup failed"),
                }
            }
        }))
    }

    /// What the request's credentials are; what they say, when that needs no lookup.
    fn credentials<'h>(
        &self,
        headers: &'h HeaderMap,
        client: Option<IpAddr>,
        account: Option<PeerAccount>,
    ) -> Credentials<'h> {
        if let Some(key) = headers.get(&X_API_KEY) {
            return match key.to_str() {
                Ok(key) => Credentials::ApiKey(key.trim()),
                Err(_) => {
                    Credentials::Known(Err(unauthorized("the X-API-Key header is not valid text")))
                }
            };
        }
        if let Some(authorization) = headers.get(http::header::AUTHORIZATION) {
            let Ok(authorization) = authorization.to_str() else {
                return Credentials::Known(Err(unauthorized(
                    "the Authorization header is not valid text",
                )));
            };
            let Some(token) = authorization
                .strip_prefix("Bearer ")
                .or_else(|| authorization.strip_prefix("bearer "))
            else {
                return Credentials::Known(Err(unauthorized(
                    "the Authorization header must be `Bearer <token>`",
                )));
            };
            let token = token.trim();
            if token.starts_with(CONVERSATION_TOKEN_PREFIX) {
                return Credentials::ConversationToken(token);
            }
            return Credentials::Known(self.verify_token(token));
        }
        match self.config.profile {
            Profile::Solo => match solo_account(account) {
                Ok(()) => Credentials::Local(client),
                Err(error) => Credentials::Known(Err(error)),
            },
            Profile::Production => Credentials::Known(Err(unauthorized(
                "credentials are required: send X-API-Key or Authorization: Bearer",
            ))),
        }
    }

    /// An API key: the role it was created with.
    async fn api_key(&self, key: &str) -> Result<Principal, ApiError> {
        let found = self.keys.find_active_key(&hash_key(key)).await.map_err(|error| {
            tracing::error!(%error, "key lookup failed");
            ApiError::new(ErrorCode::InternalError, "internal error")
        })?;
        let key =
            found.ok_or_else(|| unauthorized("the API key is not valid (unknown or revoked)"))?;
        if let Some(expires_at) = key.expires_at.filter(|_| key.expired(Timestamp::now())) {
            return Err(unauthorized(format!(
                "the API key expired at {expires_at}; create a new one with `cairn keys create`"
            )));
        }
        self.note_use(&key);
        Ok(Principal { id: format!("key:{}", key.id), role: key.role, conversation: None })
    }

    /// A conversation token: the runtime role, for its conversation alone.
    async fn conversation_token(&self, token: &str) -> Result<Principal, ApiError> {
        let found =
            self.keys.find_conversation_token(&hash_key(token), Timestamp::now()).await.map_err(
                |error| {
                    tracing::error!(%error, "token lookup failed");
                    ApiError::new(ErrorCode::InternalError, "internal error")
                },
            )?;
        let record = found.ok_or_else(|| {
            unauthorized("the conversation token is not valid (unknown, expired or revoked)")
        })?;
        Ok(Principal {
            id: format!("token:{}", record.id),
            role: Role::Runtime,
            conversation: Some(record.conversation_id),
        })
    }

    fn verify_token(&self, token: &str) -> Result<Principal, ApiError> {
        let verifier = self.config.jwt.as_ref().ok_or_else(|| {
            unauthorized("bearer tokens are not accepted: no JWT key is configured")
        })?;
        let data = jsonwebtoken::decode::<Claims>(token, &verifier.key, &verifier.validation)
            .map_err(|error| unauthorized(format!("the bearer token {}", token_problem(&error))))?;
        let role = data
            .claims
            .role
            .as_deref()
            .ok_or_else(|| unauthorized("the bearer token has no `role` claim"))?;
        let role: Role = role
            .parse()
            .map_err(|error| unauthorized(format!("the bearer token's role claim: {error}")))?;
        let subject =
            data.claims.sub.ok_or_else(|| unauthorized("the bearer token has no `sub` claim"))?;
        Ok(Principal { id: format!("jwt:{subject}"), role, conversation: None })
    }
}

/// The solo profile needs no credentials from the account that runs the daemon, and refuses
/// every other account of the machine: without this, any local user could read the owner's
/// memories, or have a connector import files only the owner can read.
fn solo_account(account: Option<PeerAccount>) -> Result<(), ApiError> {
    let message = match account {
        None | Some(PeerAccount::Owner) => return Ok(()),
        Some(PeerAccount::Other(uid)) => format!(
            "the solo profile serves the account that runs the daemon without credentials, and \
             this connection comes from another local account (uid {uid}); send an API key \
             (X-API-Key) that the daemon's owner created with `cairn keys create`, or run a \
             daemon of your own"
        ),
        // Neither a refusal of the owner nor the owner's rights for a stranger: a retry.
        Some(PeerAccount::Unknown) => {
            let message = "the solo profile serves the account that runs the daemon without \
                 credentials, and it could not tell which local account this connection comes \
                 from just now (the daemon is busy); retry on a new connection, or send an API \
                 key (X-API-Key)";
            return Err(ApiError::new(ErrorCode::ServerBusy, message)
                .with_header(http::header::RETRY_AFTER, http::HeaderValue::from_static("1"))
                .with_header(http::header::CONNECTION, http::HeaderValue::from_static("close")));
        }
    };
    Err(ApiError::new(ErrorCode::Forbidden, message))
}

/// The role of the solo profile's local caller.
const LOCAL_ROLE: Role = Role::Admin;

/// The solo profile's local caller at `client`.
fn local_principal(client: Option<IpAddr>) -> Principal {
    Principal { id: local_principal_id(client), role: LOCAL_ROLE, conversation: None }
}

/// `local:<address>`, the solo profile's principal; written without the formatting
/// machinery, as it is on every request of that profile.
fn local_principal_id(client: Option<IpAddr>) -> String {
    let mut id = String::with_capacity(48);
    id.push_str("local:");
    match client {
        Some(IpAddr::V4(address)) => {
            for (index, octet) in address.octets().into_iter().enumerate() {
                if index > 0 {
                    id.push('.');
                }
                if octet >= 100 {
                    id.push(char::from(b'0' + octet / 100));
                }
                if octet >= 10 {
                    id.push(char::from(b'0' + octet / 10 % 10));
                }
                id.push(char::from(b'0' + octet % 10));
            }
        }
        Some(address) => {
            use std::fmt::Write as _;
            let _ = write!(id, "{address}");
        }
        None => id.push_str("unknown"),
    }
    id
}

/// What is wrong with a bearer token, in the caller's terms.
fn token_problem(error: &jsonwebtoken::errors::Error) -> String {
    use jsonwebtoken::errors::ErrorKind;
    match error.kind() {
        ErrorKind::ExpiredSignature => "has expired (its `exp` is past)".to_owned(),
        ErrorKind::ImmatureSignature => "is not valid yet (its `nbf` is in the future)".to_owned(),
        ErrorKind::InvalidSignature => "is not signed with this daemon's key".to_owned(),
        ErrorKind::InvalidAlgorithm | ErrorKind::InvalidAlgorithmName => {
            "is signed with an algorithm this daemon does not accept".to_owned()
        }
        ErrorKind::MissingRequiredClaim(claim) => format!("has no `{claim}` claim"),
        ErrorKind::InvalidAudience => {
            "was issued for another service: its `aud` claim does not name this one".to_owned()
        }
        ErrorKind::InvalidIssuer => {
            "comes from an issuer this daemon does not trust (its `iss` claim)".to_owned()
        }
        ErrorKind::InvalidClaimFormat(claim) => format!("has a `{claim}` claim of the wrong type"),
        ErrorKind::InvalidToken
        | ErrorKind::Base64(_)
        | ErrorKind::Json(_)
        | ErrorKind::Utf8(_) => {
            "is not a JWT (three base64url parts: header, claims, signature)".to_owned()
        }
        _ => format!("is not valid ({error})"),
    }
}

/// `localhost`, `127.0.0.1`, `[::1]` (any 127.x address), with or without a port.
fn is_loopback_authority(authority: &str) -> bool {
    // The usual answers first, without parsing an address: this runs on every request.
    for usual in ["127.0.0.1", "localhost"] {
        let port = authority
            .get(..usual.len())
            .filter(|host| host.eq_ignore_ascii_case(usual))
            .map(|_| &authority[usual.len()..]);
        if port.is_some_and(|port| {
            port.is_empty()
                || port
                    .strip_prefix(':')
                    .is_some_and(|port| port.bytes().all(|b| b.is_ascii_digit()))
        }) {
            return true;
        }
    }
    let host = match authority.strip_prefix('[') {
        Some(rest) => rest.split(']').next().unwrap_or_default(),
        None => authority.rsplit_once(':').map_or(authority, |(host, _)| host),
    };
    host.eq_ignore_ascii_case("localhost")
        || host.parse::<std::net::IpAddr>().is_ok_and(|address| address.is_loopback())
}

fn unauthorized(message: impl Into<String>) -> ApiError {
    ApiError::new(ErrorCode::Unauthorized, message)
}

/// Lower-case hex SHA-256 of a key: what is stored and looked up.
pub fn hash_key(key: &str) -> String {
    hex::encode(Sha256::digest(key.as_bytes()))
}

/// A new API key: the secret, shown once, and the record to store.
/// How conversation tokens begin, to tell them from JWTs.
pub const CONVERSATION_TOKEN_PREFIX: &str = "cvt_";

/// A new conversation token for `conversation_id`, lasting `ttl`: the secret (shown once)
/// and the record to store.
pub fn new_conversation_token(
    conversation_id: &str,
    ttl: std::time::Duration,
) -> (String, cairn_types::ConversationTokenRecord) {
    let mut random = [0u8; 32];
    getrandom::fill(&mut random).expect("the operating system provides randomness");
    let secret = format!("{CONVERSATION_TOKEN_PREFIX}{}", hex::encode(random));
    let created_at = Timestamp::now();
    let record = cairn_types::ConversationTokenRecord {
        id: new_id(IdPrefix::ConversationToken),
        conversation_id: conversation_id.to_owned(),
        hash: hash_key(&secret),
        created_at,
        expires_at: Timestamp::from_millis(created_at.as_millis() + ttl.as_millis() as i64),
        revoked_at: None,
    };
    (secret, record)
}

/// A new API key: the secret (shown once) and its record, which stops working at
/// `expires_at` when there is one.
pub fn new_api_key(
    role: Role,
    name: Option<String>,
    expires_at: Option<Timestamp>,
) -> (String, ApiKey) {
    let mut random = [0u8; 32];
    getrandom::fill(&mut random).expect("the operating system provides randomness");
    let secret = format!("cairn_{}", hex::encode(random));
    let record = ApiKey {
        id: new_id(IdPrefix::ApiKey),
        name,
        role,
        prefix: secret[..12].to_owned(),
        hash: hash_key(&secret),
        created_at: Timestamp::now(),
        revoked_at: None,
        expires_at,
        last_used_at: None,
    };
    (secret, record)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_principals_name_their_address() {
        for address in ["127.0.0.1", "10.0.200.9", "255.255.255.255", "0.0.0.0", "::1", "fe80::1"] {
            let ip: IpAddr = address.parse().unwrap();
            assert_eq!(local_principal_id(Some(ip)), format!("local:{ip}"));
        }
        assert_eq!(local_principal_id(None), "local:unknown");
    }

    #[test]
    fn loopback_authorities_are_recognised() {
        for local in [
            "localhost",
            "localhost:8787",
            "127.0.0.1",
            "127.0.0.1:80",
            "[::1]:8787",
            "[::1]",
            "127.3.4.5:1",
            "LocalHost:8787",
            "127.0.0.1:",
        ] {
            assert!(is_loopback_authority(local), "{local}");
        }
        for remote in [
            "example.com",
            "attacker.example:8787",
            "10.0.0.1:8787",
            "localhost.evil.com",
            "127.0.0.1.evil.com",
            "127.0.0.1:80:90",
            "localhostx:80",
            "[::2]:80",
        ] {
            assert!(!is_loopback_authority(remote), "{remote}");
        }
    }

    #[test]
    fn keys_are_random_and_stored_hashed() {
        let (secret, record) = new_api_key(Role::Read, None, None);
        let (other, _) = new_api_key(Role::Read, None, None);
        assert_ne!(secret, other);
        assert!(secret.starts_with("cairn_") && secret.len() == 70);
        assert_eq!(record.hash, hash_key(&secret));
        assert!(!record.hash.contains(&secret[6..]));
        assert_eq!(record.prefix, &secret[..12]);
    }
}
