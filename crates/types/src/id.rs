//! Identifiers: a short prefix naming the kind of record, then a lower-case ULID.

/// The kinds of record that carry an identifier, with their prefixes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IdPrefix {
    Memory,
    Evidence,
    Outcome,
    ApiKey,
    Audit,
    Connector,
    Conflict,
    Conversation,
    Event,
    Message,
    Prompt,
    Activity,
    ConversationToken,
    ChannelSegment,
    VoiceConnection,
    Response,
    Request,
}

impl IdPrefix {
    pub fn as_str(self) -> &'static str {
        match self {
            IdPrefix::Memory => "mem",
            IdPrefix::Evidence => "ev",
            IdPrefix::Outcome => "out",
            IdPrefix::ApiKey => "key",
            IdPrefix::Audit => "aud",
            IdPrefix::Connector => "conn",
            IdPrefix::Conflict => "cfl",
            IdPrefix::Conversation => "conv",
            IdPrefix::Event => "evt",
            IdPrefix::Message => "msg",
            IdPrefix::Prompt => "prm",
            IdPrefix::Activity => "act",
            IdPrefix::ConversationToken => "tok",
            IdPrefix::ChannelSegment => "seg",
            IdPrefix::VoiceConnection => "vc",
            IdPrefix::Response => "resp",
            IdPrefix::Request => "req",
        }
    }
}

/// A new identifier such as `mem_01jd5z8k3v6q2w9x7y4t1r0p8n`: sortable by creation time.
pub fn new_id(prefix: IdPrefix) -> String {
    let ulid = ulid::Ulid::new().to_string().to_ascii_lowercase();
    format!("{}_{ulid}", prefix.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_have_prefix_and_lowercase_ulid() {
        let id = new_id(IdPrefix::Evidence);
        let (prefix, ulid) = id.split_once('_').unwrap();
        assert_eq!(prefix, "ev");
        assert_eq!(ulid.len(), 26);
        assert_eq!(ulid, ulid.to_ascii_lowercase());
        assert_ne!(new_id(IdPrefix::Evidence), id);
    }
}
