//! The connection settings: the URL, TLS (rustls, optional) and the session options every
//! connection starts with.
