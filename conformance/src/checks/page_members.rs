//! What a member beside an EventPage's four fields carries. Part 2.11: messages, tool activity,
//! actions, errors and lifecycle changes are entries of `events`, never separate top-level
//! fields. A member that carries one breaks it, in any JSON type; another (`links`, a paging
//! hint, a timing) is only off the profile.

use serde_json::Value;

/// The fields of an EventPage (part 2.11).
pub(crate) const PAGE_FIELDS: [&str; 4] = ["session_id", "cursor", "events", "has_more"];

/// The turn states of part 3: a string that is one tells a lifecycle change wherever it stands.
const TURN_STATES: [&str; 5] = [
    "processing",
    "complete",
    "failed",
    "interrupted",
    "awaiting_action",
];

/// Words that name the entries part 2.11 keeps in `events`, by the kind of entry they name.
const ENTRY_WORDS: [(&str, &[&str]); 4] = [
    ("a message", &["message", "msg", "reply", "assistant"]),
    ("tool activity", &["tool", "function"]),
    ("an action", &["action", "approval"]),
    ("an error", &["error", "failure", "exception"]),
];

/// What the member `name` with `value` carries of the entries part 2.11 keeps in `events`:
/// - a turn state of part 3 as a string, at any depth (`"turnState": "complete"`);
/// - an object, at any depth, whose `type` or `kind` names an entry (`{"type": "tool_call"}`);
/// - a name that names an entry (`messages`, `pendingAction`, `last_error`) holding a list, an
///   object or a string, even empty;
/// - a name with a turn state's word holding a boolean (`turnComplete: true`).
///
/// `None` for anything else: `links`, `status: "ok"`, `done: true`, `processingTimeMs: 12`.
pub(crate) fn entry_kind(name: &str, value: &Value) -> Option<&'static str> {
    let words = words(name);
    let named = words.iter().find_map(|word| kind_of(word));
    let holds = matches!(value, Value::Array(_) | Value::Object(_) | Value::String(_));
    let of_a_state = |word: &str| {
        let parts = TURN_STATES.iter().flat_map(|state| state.split('_'));
        parts.into_iter().any(|part| part == word)
    };
    let stated = value.is_boolean()
        && words
            .iter()
            .any(|word| of_a_state(word) || word.strip_suffix('d').is_some_and(of_a_state));
    carried(value)
        .or(named.filter(|_| holds))
        .or(stated.then_some("a lifecycle change"))
}

fn carried(value: &Value) -> Option<&'static str> {
    match value {
        Value::String(text) => TURN_STATES
            .contains(&text.as_str())
            .then_some("a lifecycle change"),
        Value::Array(items) => items.iter().find_map(carried),
        Value::Object(members) => {
            let typed = ["type", "kind"].iter().find_map(|key| {
                let kind = members.get(*key)?.as_str()?;
                words(kind).iter().find_map(|word| kind_of(word))
            });
            typed.or_else(|| members.values().find_map(carried))
        }
        _ => None,
    }
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
    fn a_member_carries_an_entry_by_its_content_or_by_a_name_holding_one() {
        let lifecycle = Some("a lifecycle change");
        assert_eq!(entry_kind("turnState", &json!("complete")), lifecycle);
        assert_eq!(
            entry_kind("latest", &json!({ "state": "awaiting_action" })),
            lifecycle
        );
        assert_eq!(entry_kind("turnComplete", &json!(true)), lifecycle);
        assert_eq!(entry_kind("messages", &json!([])), Some("a message"));
        assert_eq!(entry_kind("last_error", &json!("boom")), Some("an error"));
        assert_eq!(
            entry_kind("pendingAction", &json!({ "id": "act_1" })),
            Some("an action")
        );
        let call = json!([{ "type": "tool_call", "name": "x" }]);
        assert_eq!(entry_kind("extra", &call), Some("tool activity"));
    }

    #[test]
    fn links_paging_hints_timings_and_statuses_carry_none() {
        let links = json!({
            "self": { "href": "/v1/agent/chat/ses_1?cursor=c" },
            "status": { "href": "/v1/agent/sessions/ses_1" },
            "actions": { "href": "/v1/agent/sessions/ses_1/actions" }
        });
        assert_eq!(entry_kind("links", &links), None);
        assert_eq!(entry_kind("next", &json!("eyJzZXEiOjV9")), None);
        assert_eq!(entry_kind("done", &json!(true)), None);
        assert_eq!(entry_kind("processingTimeMs", &json!(12)), None);
        assert_eq!(entry_kind("contentType", &json!("application/json")), None);
        assert_eq!(entry_kind("status", &json!("ok")), None);
        assert_eq!(entry_kind("last_error", &json!(null)), None);
    }
}
