//! What a member beside an EventPage's four fields carries. Part 2.11: messages, tool activity,
//! actions, errors and lifecycle changes are entries of `events`, never separate top-level
//! fields. A member that carries one breaks it, in any JSON type; another (`links`, a paging
//! hint) is only off the profile.

use serde_json::Value;

/// The fields of an EventPage (part 2.11).
pub(crate) const PAGE_FIELDS: [&str; 4] = ["session_id", "cursor", "events", "has_more"];

/// Words that name what part 2.11 keeps in `events`, by the kind of entry they name (part 3's
/// turn states among the lifecycle changes).
const ENTRY_WORDS: [(&str, &[&str]); 5] = [
    (
        "a message",
        &[
            "message",
            "msg",
            "content",
            "delta",
            "text",
            "reply",
            "assistant",
        ],
    ),
    ("tool activity", &["tool", "function"]),
    ("an action", &["action", "approval"]),
    (
        "an error",
        &["error", "err", "failure", "exception", "fault"],
    ),
    (
        "a lifecycle change",
        &[
            "lifecycle",
            "state",
            "status",
            "phase",
            "processing",
            "complete",
            "completed",
            "failed",
            "interrupted",
            "awaiting",
            "done",
            "finished",
            "ended",
        ],
    ),
];

/// What the member `name` with `value` carries of the entries part 2.11 keeps in `events`: told
/// by its name (`turnState`, `messages`, `last_error`), by a short string that names one
/// (`"complete"`, `"tool_call"`; not a path), or by such a name or string at any depth. `None`
/// for anything else.
pub(crate) fn entry_kind(name: &str, value: &Value) -> Option<&'static str> {
    named(name).or_else(|| carried(value))
}

fn carried(value: &Value) -> Option<&'static str> {
    match value {
        Value::String(text) if !text.contains('/') => {
            let words = words(text);
            (words.len() <= 3)
                .then(|| words.iter().find_map(|word| kind_of(word)))
                .flatten()
        }
        Value::Array(items) => items.iter().find_map(carried),
        Value::Object(members) => members
            .iter()
            .find_map(|(name, member)| named(name).or_else(|| carried(member))),
        _ => None,
    }
}

fn named(name: &str) -> Option<&'static str> {
    words(name).iter().find_map(|word| kind_of(word))
}

/// The entry kind `word` names, plural or not.
fn kind_of(word: &str) -> Option<&'static str> {
    let singular = word.strip_suffix('s').unwrap_or(word);
    ENTRY_WORDS
        .iter()
        .find(|(_, words)| words.contains(&word) || words.contains(&singular))
        .map(|(kind, _)| *kind)
}

/// The lower-case words of `text`, split at what is not alphanumeric and at camelCase humps.
fn words(text: &str) -> Vec<String> {
    let (mut words, mut word, mut lower) = (Vec::new(), String::new(), false);
    for c in text.chars() {
        if !c.is_alphanumeric() {
            if !word.is_empty() {
                words.push(std::mem::take(&mut word));
            }
            lower = false;
            continue;
        }
        if c.is_uppercase() && lower && !word.is_empty() {
            words.push(std::mem::take(&mut word));
        }
        lower = c.is_lowercase() || c.is_ascii_digit();
        word.extend(c.to_lowercase());
    }
    if !word.is_empty() {
        words.push(word);
    }
    words
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_member_carries_an_entry_by_its_name_or_its_content_in_any_json_type() {
        let lifecycle = Some("a lifecycle change");
        assert_eq!(entry_kind("turnState", &json!("complete")), lifecycle);
        assert_eq!(entry_kind("latest", &json!("awaiting_action")), lifecycle);
        assert_eq!(entry_kind("done", &json!(true)), lifecycle);
        assert_eq!(entry_kind("messages", &json!([])), Some("a message"));
        assert_eq!(entry_kind("last_error", &json!(null)), Some("an error"));
        assert_eq!(
            entry_kind("pendingAction", &json!({ "id": "act_1" })),
            Some("an action")
        );
        let call = json!([{ "type": "tool_call", "name": "x" }]);
        assert_eq!(entry_kind("extra", &call), Some("tool activity"));
    }

    #[test]
    fn links_paging_hints_and_numbers_carry_none() {
        let links = json!({
            "self": { "href": "/v1/agent/chat/ses_1?cursor=c" },
            "resolve": { "href": "/v1/agent/sessions/ses_1/actions/act_1/resolve" }
        });
        assert_eq!(entry_kind("links", &links), None);
        assert_eq!(entry_kind("next", &json!("eyJzZXEiOjV9")), None);
        assert_eq!(entry_kind("limit", &json!(2)), None);
        assert_eq!(entry_kind("retryAfterMs", &json!(500)), None);
    }
}
