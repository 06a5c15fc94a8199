//! Who may read a memory. A memory is shared unless a conversation or a contact owns it: the
//! conversation runtime writes what a visitor tells it with an owner tag, `conversation:<id>`
//! and, when the channel says who the visitor is, `contact:<channel>:<address>`. Owned
//! memories are left out of every search, context pack and coding context, and served to
//! their owners alone (`Engine::search_as`). The memory API still lists and reads them, for
//! the service's operators, and erasure finds them by these tags.

use cairn_types::Memory;

/// The tag that makes a memory a conversation's own.
pub fn conversation_tag(conversation_id: &str) -> String {
    format!("conversation:{conversation_id}")
}

/// The tag that makes a memory a contact's own; `channel` is the channel's type (`sms`,
/// `email`, …) and `address` its id for the contact.
pub fn contact_tag(channel: &str, address: &str) -> String {
    format!("contact:{channel}:{address}")
}

/// The owner tags of a memory.
pub fn owners(memory: &Memory) -> impl Iterator<Item = &str> {
    memory
        .tags
        .iter()
        .map(String::as_str)
        .filter(|tag| tag.starts_with("conversation:") || tag.starts_with("contact:"))
}

/// Whether a reader holding `owners` may read `memory`: an owned memory when one of its
/// owners is the reader's; a shared one when `shared` says so.
pub fn readable(memory: &Memory, readers: &[String], shared: impl Fn(&Memory) -> bool) -> bool {
    let mut owned = false;
    for owner in owners(memory) {
        if readers.iter().any(|reader| reader == owner) {
            return true;
        }
        owned = true;
    }
    !owned && shared(memory)
}

#[cfg(test)]
mod tests {
    use cairn_types::{Scope, Status, Timestamp};

    use super::*;

    fn memory(tags: &[&str]) -> Memory {
        Memory {
            id: "mem_1".into(),
            content: "x".into(),
            scope: Scope::Task,
            status: Status::Active,
            repo: None,
            tags: tags.iter().map(|tag| (*tag).to_owned()).collect(),
            source: None,
            metadata: Default::default(),
            created_at: Timestamp::from_millis(0),
            updated_at: Timestamp::from_millis(0),
            last_recalled_at: None,
            recall_count: 0,
            archived_at: None,
        }
    }

    #[test]
    fn owned_memories_are_their_owners_alone() {
        let ada = memory(&["visitor-data", "conversation:conv_a", "contact:sms:+1555"]);
        let own = [conversation_tag("conv_a")];
        let same_contact = [conversation_tag("conv_b"), contact_tag("sms", "+1555")];
        let stranger = [conversation_tag("conv_c")];
        assert!(readable(&ada, &own, |_| false));
        assert!(readable(&ada, &same_contact, |_| false));
        assert!(!readable(&ada, &stranger, |_| true), "owned memories are never shared");
        let faq = memory(&["concierge"]);
        assert!(readable(&faq, &stranger, |m| m.tags.contains(&"concierge".to_owned())));
        assert!(!readable(&faq, &stranger, |_| false));
    }
}
