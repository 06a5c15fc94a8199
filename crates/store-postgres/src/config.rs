//! The connection settings: the URL, TLS (rustls, optional) and the session options every
//! connection starts with.

use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use cairn_store::{Result, StoreError};
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
use tokio_postgres_rustls::MakeRustlsConnect;

use crate::PgOptions;

/// What a connection of a given kind is for; each starts with its own session settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Purpose {
    /// Statements: bounded statement and lock waits.
    Statements,
    /// Held shared locks: waits for a lock up to 30 s, no statement timeout.
    Locks,
    /// Migrations and the listener: no timeouts (a migration may take long).
    Admin,
}

fn config_error(message: impl Into<String>) -> StoreError {
    StoreError::Backend(message.into().into())
}

/// Whether `schema` is a plain identifier we can put in channel names and `search_path`.
pub(crate) fn valid_schema(schema: &str) -> bool {
    let mut chars = schema.chars();
    chars.next().is_some_and(|c| c.is_ascii_lowercase() || c == '_')
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        && schema.len() <= 40
}

/// libpq's `sslmode` values tokio-postgres does not parse, mapped to what it does: with TLS,
/// the certificate and host name are always verified, so `verify-ca` and `verify-full` are
/// `require`, and `allow` is `prefer`.
fn normalise_url(url: &str) -> String {
    let Some((base, query)) = url.split_once('?') else {
        return url.to_owned();
    };
    let parameters: Vec<String> = query
        .split('&')
        .map(|parameter| match parameter {
            "sslmode=verify-full" | "sslmode=verify-ca" => "sslmode=require".to_owned(),
            "sslmode=allow" => "sslmode=prefer".to_owned(),
            other => other.to_owned(),
        })
        .collect();
    format!("{base}?{}", parameters.join("&"))
}

/// The connection configuration of `options` for `purpose`.
pub(crate) fn pg_config(options: &PgOptions, purpose: Purpose) -> Result<tokio_postgres::Config> {
    if !valid_schema(&options.schema) {
        return Err(config_error(format!(
            "database schema `{}` must be a lower-case identifier ([a-z_][a-z0-9_]*, at most 40)",
            options.schema
        )));
    }
    let mut config = tokio_postgres::Config::from_str(&normalise_url(&options.url))
        .map_err(|error| config_error(format!("database URL: {error}")))?;
    let session = match purpose {
        Purpose::Statements => {
            "-c statement_timeout=30s -c lock_timeout=10s -c idle_in_transaction_session_timeout=60s"
        }
        Purpose::Locks => "-c lock_timeout=30s -c idle_in_transaction_session_timeout=60s",
        Purpose::Admin => "",
    };
    // The schema is created by the migrations; until then the search path names nothing.
    config.options(format!("-c search_path={} {session}", options.schema));
    config.application_name(&options.application_name);
    if config.get_connect_timeout().is_none() {
        config.connect_timeout(Duration::from_secs(5));
    }
    config.keepalives_idle(Duration::from_secs(5));
    Ok(config)
}

/// The TLS connector: certificates verified against `ca_file`'s roots, else the platform's.
pub(crate) fn tls(options: &PgOptions) -> Result<MakeRustlsConnect> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|error| config_error(format!("TLS: {error}")))?;
    let config = match &options.ca_file {
        Some(path) => {
            let mut roots = rustls::RootCertStore::empty();
            let certificates = CertificateDer::pem_file_iter(path)
                .map_err(|error| config_error(format!("{}: {error}", path.display())))?;
            for certificate in certificates {
                let certificate = certificate
                    .map_err(|error| config_error(format!("{}: {error}", path.display())))?;
                roots
                    .add(certificate)
                    .map_err(|error| config_error(format!("{}: {error}", path.display())))?;
            }
            if roots.is_empty() {
                return Err(config_error(format!("{}: no certificate in it", path.display())));
            }
            builder.with_root_certificates(roots).with_no_client_auth()
        }
        None => {
            let verifier = rustls_platform_verifier::Verifier::new(provider)
                .map_err(|error| config_error(format!("TLS: {error}")))?;
            builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(verifier))
                .with_no_client_auth()
        }
    };
    Ok(MakeRustlsConnect::new(config))
}

/// The URL with its password replaced by `***`, for logs.
pub fn redact_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let (authority, tail) = match rest.find(['/', '?']) {
        Some(at) => rest.split_at(at),
        None => (rest, ""),
    };
    match authority.rsplit_once('@') {
        Some((user_info, host)) => match user_info.split_once(':') {
            Some((user, _)) => format!("{scheme}://{user}:***@{host}{tail}"),
            None => url.to_owned(),
        },
        None => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use tokio_postgres::config::SslMode;

    use super::*;

    #[test]
    fn libpq_ssl_modes_are_accepted() {
        for (mode, expected) in [
            ("disable", SslMode::Disable),
            ("prefer", SslMode::Prefer),
            ("require", SslMode::Require),
            ("verify-ca", SslMode::Require),
            ("verify-full", SslMode::Require),
        ] {
            let options =
                PgOptions::new(&format!("postgres://u:p@db.example:5433/cairn?sslmode={mode}"));
            let config = pg_config(&options, Purpose::Statements).unwrap();
            assert_eq!(config.get_ssl_mode(), expected, "{mode}");
            assert_eq!(config.get_dbname(), Some("cairn"));
        }
    }

    #[test]
    fn schemas_are_plain_identifiers() {
        assert!(valid_schema("public"));
        assert!(valid_schema("c_12"));
        for bad in ["", "Public", "a-b", "1a", "a;drop", &"a".repeat(41)] {
            assert!(!valid_schema(bad), "{bad}");
            let options = PgOptions { schema: bad.to_owned(), ..PgOptions::new("postgres://x/y") };
            assert!(pg_config(&options, Purpose::Statements).is_err());
        }
    }

    #[test]
    fn passwords_stay_out_of_logs() {
        assert_eq!(
            redact_url("postgres://cairn:s3cr@t@db:5432/cairn?sslmode=require"),
            "postgres://cairn:***@db:5432/cairn?sslmode=require"
        );
        assert_eq!(redact_url("postgres://cairn@db/cairn"), "postgres://cairn@db/cairn");
    }

    #[test]
    fn a_ca_file_without_certificates_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ca.pem");
        std::fs::write(&path, "not a certificate\n").unwrap();
        let options = PgOptions { ca_file: Some(path), ..PgOptions::new("postgres://x/y") };
        assert!(tls(&options).is_err());
        assert!(tls(&PgOptions::new("postgres://x/y")).is_ok(), "the platform's roots");
    }
}
