//! UTC timestamps: milliseconds since the Unix epoch inside, ISO 8601 on the wire.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;
use utoipa::openapi::schema::{KnownFormat, ObjectBuilder, SchemaFormat, Type};
use utoipa::openapi::{RefOr, Schema};

/// A point in time with millisecond precision, written as `2026-11-21T20:15:18.123Z`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp(i64);

impl Timestamp {
    pub fn now() -> Timestamp {
        let nanos = OffsetDateTime::now_utc().unix_timestamp_nanos();
        Timestamp((nanos / 1_000_000) as i64)
    }

    pub fn from_millis(millis: i64) -> Timestamp {
        Timestamp(millis)
    }

    pub fn as_millis(self) -> i64 {
        self.0
    }

    /// Parses an RFC 3339 timestamp with any offset, keeping millisecond precision.
    pub fn parse(text: &str) -> Option<Timestamp> {
        let parsed = OffsetDateTime::parse(text, &Rfc3339).ok()?;
        Some(Timestamp((parsed.unix_timestamp_nanos() / 1_000_000) as i64))
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let nanos = i128::from(self.0) * 1_000_000;
        let Ok(at) = OffsetDateTime::from_unix_timestamp_nanos(nanos) else {
            return write!(f, "invalid-timestamp({})", self.0);
        };
        let (year, month, day) = (at.year(), at.month() as u8, at.day());
        let (hour, minute, second, milli) = (at.hour(), at.minute(), at.second(), at.millisecond());
        write!(f, "{year:04}-{month:02}-{day:02}T{hour:02}:{minute:02}:{second:02}.{milli:03}Z")
    }
}

impl Serialize for Timestamp {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Timestamp {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        Timestamp::parse(&text).ok_or_else(|| {
            serde::de::Error::custom(format!("`{text}` is not an ISO 8601 (RFC 3339) timestamp"))
        })
    }
}

impl utoipa::PartialSchema for Timestamp {
    fn schema() -> RefOr<Schema> {
        ObjectBuilder::new()
            .schema_type(Type::String)
            .format(Some(SchemaFormat::KnownFormat(KnownFormat::DateTime)))
            .description(Some("ISO 8601 UTC timestamp with milliseconds"))
            .into()
    }
}

impl utoipa::ToSchema for Timestamp {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_iso8601_utc_with_millis_and_parses_back() {
        let at = Timestamp::from_millis(1_763_756_118_123);
        assert_eq!(at.to_string(), "2025-11-21T20:15:18.123Z");
        assert_eq!(Timestamp::parse(&at.to_string()), Some(at));
        assert_eq!(Timestamp::parse("2025-11-21T21:15:18.123+01:00"), Some(at));
        assert_eq!(Timestamp::parse("yesterday"), None);
    }
}
