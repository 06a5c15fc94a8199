//! The client behind a trusted reverse proxy (`--trusted-proxy`): a request whose connection
//! comes from a trusted proxy is the client's that the proxies name in `Forwarded` (RFC 7239)
//! or, without it, `X-Forwarded-For`. The chain is read from the right, skipping trusted
//! proxies, so a client cannot pass itself off as another by sending the header itself: the
//! first address not a trusted proxy is the one the nearest trusted proxy saw.

use std::net::{IpAddr, SocketAddr};

use http::HeaderMap;
use ipnet::IpNet;

/// The request's client: `peer`, or, when `peer` is a trusted proxy, the address the proxies
/// forwarded (with port 0: proxies do not tell the client's port reliably).
pub(crate) fn client(peer: SocketAddr, headers: &HeaderMap, trusted: &[IpNet]) -> SocketAddr {
    let is_trusted = |ip: IpAddr| trusted.iter().any(|net| net.contains(&ip));
    if trusted.is_empty() || !is_trusted(peer.ip()) {
        return peer;
    }
    let chain = forwarded_for(headers);
    let mut client = None;
    for ip in chain.iter().rev() {
        client = Some(*ip);
        if !is_trusted(*ip) {
            break;
        }
    }
    client.map_or(peer, |ip| SocketAddr::new(ip, 0))
}

/// The addresses the proxies named, from the client outwards: `Forwarded`'s `for=` when the
/// request has that header, else `X-Forwarded-For`. Anything unreadable (an obfuscated
/// identifier, `unknown`, garbage) ends the chain there, so it is never skipped over.
fn forwarded_for(headers: &HeaderMap) -> Vec<IpAddr> {
    let forwarded: Vec<&str> =
        headers.get_all(http::header::FORWARDED).iter().filter_map(|v| v.to_str().ok()).collect();
    let entries: Vec<String> = if forwarded.is_empty() {
        headers
            .get_all("x-forwarded-for")
            .iter()
            .filter_map(|value| value.to_str().ok())
            .flat_map(|value| value.split(','))
            .map(|entry| entry.trim().to_owned())
            .collect()
    } else {
        forwarded
            .iter()
            .flat_map(|value| value.split(','))
            .map(|element| {
                element
                    .split(';')
                    .filter_map(|pair| pair.trim().split_once('='))
                    .find(|(name, _)| name.trim().eq_ignore_ascii_case("for"))
                    .map(|(_, value)| value.trim().trim_matches('"').to_owned())
                    .unwrap_or_default()
            })
            .collect()
    };
    let mut chain = Vec::new();
    for entry in entries {
        match address(&entry) {
            Some(ip) => chain.push(ip),
            // What lies left of an unreadable entry cannot be trusted either.
            None => chain.clear(),
        }
    }
    chain
}

/// An address as proxies write it: `192.0.2.1`, `192.0.2.1:4711`, `[2001:db8::1]:4711`,
/// `2001:db8::1`.
fn address(entry: &str) -> Option<IpAddr> {
    if let Ok(ip) = entry.parse::<IpAddr>() {
        return Some(ip);
    }
    if let Ok(socket) = entry.parse::<SocketAddr>() {
        return Some(socket.ip());
    }
    entry.strip_prefix('[')?.split_once(']')?.0.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for (name, value) in pairs {
            headers.append(
                http::HeaderName::from_bytes(name.as_bytes()).unwrap(),
                value.parse().unwrap(),
            );
        }
        headers
    }

    #[test]
    fn the_client_is_the_first_untrusted_address_from_the_right() {
        let trusted: Vec<IpNet> = vec!["10.0.0.0/8".parse().unwrap()];
        let proxy: SocketAddr = "10.0.0.5:40000".parse().unwrap();
        let ip = |pairs: &[(&str, &str)]| client(proxy, &headers(pairs), &trusted).ip().to_string();
        assert_eq!(ip(&[("x-forwarded-for", "203.0.113.7")]), "203.0.113.7");
        // A client that forges the header only adds to the left of what the proxy appends.
        assert_eq!(ip(&[("x-forwarded-for", "1.2.3.4, 203.0.113.7")]), "203.0.113.7");
        assert_eq!(ip(&[("x-forwarded-for", "203.0.113.7, 10.0.0.9")]), "203.0.113.7");
        assert_eq!(ip(&[("forwarded", "for=\"[2001:db8::1]:4711\";proto=https")]), "2001:db8::1");
        assert_eq!(
            ip(&[("forwarded", "for=192.0.2.60;by=10.0.0.5, for=198.51.100.17")]),
            "198.51.100.17"
        );
        // Forwarded wins over X-Forwarded-For; nothing forwarded leaves the proxy.
        assert_eq!(
            ip(&[("forwarded", "for=192.0.2.1"), ("x-forwarded-for", "192.0.2.2")]),
            "192.0.2.1"
        );
        assert_eq!(ip(&[]), "10.0.0.5");
        assert_eq!(ip(&[("x-forwarded-for", "1.2.3.4, unknown")]), "10.0.0.5");
        // Not from a trusted proxy: the header is the client's own words, and ignored.
        let direct: SocketAddr = "198.51.100.1:5000".parse().unwrap();
        let forged = headers(&[("x-forwarded-for", "203.0.113.7")]);
        assert_eq!(client(direct, &forged, &trusted), direct);
        assert_eq!(client(proxy, &forged, &[]), proxy);
    }
}
