//! Values made from the schemas of openapi.json, the same for the same seed: the inputs of the
//! `stateful` checks that no link gives.

use serde_json::{Map, Value, json};

use crate::spec::spec;

/// A small deterministic generator (SplitMix64): the same seed and label give the same values,
/// whatever else runs at the same time.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator for `seed`, apart for each `label` (a check's id).
    pub fn new(seed: u64, label: &str) -> Self {
        // FNV-1a of the label, so that each check draws its own values.
        let hash = label.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |hash, byte| {
            (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
        });
        Self(seed ^ hash)
    }

    /// The next 64 random bits.
    pub fn bits(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Heads or tails.
    pub fn coin(&mut self) -> bool {
        self.bits() & 1 == 0
    }

    /// A number in `low..=high` (`low` when `high` is below it).
    pub fn between(&mut self, low: i64, high: i64) -> i64 {
        if high <= low {
            return low;
        }
        let span = (high - low) as u64 + 1;
        low + (self.bits() % span) as i64
    }
}

/// How far past its minimum a generated length or number goes.
const SPREAD: i64 = 12;

/// A value `schema` accepts (its `$ref`s followed in openapi.json): an `enum` member, the
/// schema's `example` where it has a `pattern`, one alternative of `oneOf` or `anyOf`, an
/// object's required properties and about half of the others (at least `minProperties`), and
/// lengths and numbers near their minimum.
pub fn value(schema: &Value, rng: &mut Rng) -> Value {
    let schema = spec().resolve(schema);
    if let Some(values) = schema["enum"]
        .as_array()
        .filter(|values| !values.is_empty())
    {
        return values[rng.between(0, values.len() as i64 - 1) as usize].clone();
    }
    if let Some(pattern) = schema["pattern"].as_str() {
        let made = schema
            .get("example")
            .cloned()
            .or_else(|| matching(pattern, rng));
        if let Some(made) = made {
            return made;
        }
    }
    for key in ["oneOf", "anyOf"] {
        if let Some(choices) = schema[key].as_array().filter(|choices| !choices.is_empty()) {
            let choice = &choices[rng.between(0, choices.len() as i64 - 1) as usize];
            return value(choice, rng);
        }
    }
    // An `allOf` beside a `type` of its own only narrows it (an integer is a number too).
    if let Some(parts) = schema["allOf"]
        .as_array()
        .filter(|_| schema.get("type").is_none())
    {
        let mut merged = Map::new();
        for part in parts {
            if let Value::Object(members) = value(part, rng) {
                merged.extend(members);
            }
        }
        return Value::Object(merged);
    }
    let bound = |key: &str| schema[key].as_i64();
    match schema["type"].as_str() {
        Some("object") => {
            let required: Vec<&str> = schema["required"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            let least = bound("minProperties").unwrap_or(0).max(0) as usize;
            let mut members = Map::new();
            for (name, property) in schema["properties"].as_object().into_iter().flatten() {
                let wanted =
                    required.contains(&name.as_str()) || members.len() < least || rng.coin();
                if wanted {
                    members.insert(name.clone(), value(property, rng));
                }
            }
            Value::Object(members)
        }
        Some("array") => {
            let count = bound("minItems").unwrap_or(1).max(1);
            let items = (0..count).map(|_| value(&schema["items"], rng));
            Value::Array(items.collect())
        }
        Some("integer") | Some("number") => {
            let low = bound("minimum").unwrap_or(0);
            let high = bound("maximum").unwrap_or(i64::MAX).min(low + SPREAD);
            json!(rng.between(low, high))
        }
        Some("boolean") => json!(rng.coin()),
        _ => {
            let low = bound("minLength").unwrap_or(1).max(1);
            let high = bound("maxLength").unwrap_or(i64::MAX).min(low + SPREAD);
            let length = rng.between(low, high);
            const LETTERS: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
            let text = (0..length)
                .map(|_| LETTERS[(rng.bits() % LETTERS.len() as u64) as usize] as char)
                .collect::<String>();
            json!(text)
        }
    }
}

/// A string `pattern` matches, for patterns made of literals, classes (`[a-f0-9_]`), `.`
/// and the quantifiers `{n}`, `{n,m}`, `?`, `*` and `+`, anchored or not; `None` for any other
/// pattern (groups, alternation, escapes).
fn matching(pattern: &str, rng: &mut Rng) -> Option<Value> {
    let pattern = pattern.strip_prefix('^').unwrap_or(pattern);
    let pattern = pattern.strip_suffix('$').unwrap_or(pattern);
    let mut chars = pattern.chars().peekable();
    let mut out = String::new();
    while let Some(c) = chars.next() {
        let choices: Vec<char> = match c {
            '[' => {
                let mut class = Vec::new();
                let mut previous = None;
                loop {
                    match chars.next()? {
                        ']' => break,
                        '-' if previous.is_some() && chars.peek() != Some(&']') => {
                            let (low, high) = (previous?, chars.next()?);
                            class.extend((low..=high).skip(1));
                            previous = None;
                        }
                        '\\' | '^' => return None,
                        member => {
                            class.push(member);
                            previous = Some(member);
                        }
                    }
                }
                class
            }
            '.' => ('a'..='z').collect(),
            '(' | ')' | '|' | '\\' | '{' | '?' | '*' | '+' => return None,
            literal => vec![literal],
        };
        let (low, high) = match chars.peek() {
            Some('{') => {
                chars.next();
                let bounds: String = chars.by_ref().take_while(|&c| c != '}').collect();
                let (low, high) = bounds.split_once(',').unwrap_or((&bounds, &bounds));
                let low: i64 = low.trim().parse().ok()?;
                let high = high.trim().parse().unwrap_or(low + SPREAD);
                (low, high)
            }
            Some('?') => (0, 1),
            Some('*') => (0, SPREAD),
            Some('+') => (1, SPREAD),
            _ => (1, 1),
        };
        if matches!(chars.peek(), Some('?' | '*' | '+')) {
            chars.next();
        }
        if choices.is_empty() {
            return None;
        }
        for _ in 0..rng.between(low, high.min(low + SPREAD).max(low)) {
            out.push(choices[(rng.bits() % choices.len() as u64) as usize]);
        }
    }
    Some(json!(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_seed_makes_the_same_values_and_each_holds_against_its_schema() {
        for name in [
            "SessionUpdate",
            "ActionResolutionRequest",
            "CredentialValue",
        ] {
            let schema = json!({ "$ref": format!("#/components/schemas/{name}") });
            let validator = spec().component(name).unwrap();
            let made: Vec<Value> = (0..5)
                .map(|seed| value(&schema, &mut Rng::new(seed, "stateful.x")))
                .collect();
            for made in &made {
                assert!(validator.is_valid(made), "{name}: {made}");
            }
            let again = value(&schema, &mut Rng::new(3, "stateful.x"));
            assert_eq!(made[3], again, "{name}");
        }
        let other = |seed| value(&json!({"type": "string"}), &mut Rng::new(seed, "a"));
        assert_ne!(other(1), other(2));
        let name = "^[A-Za-z_][A-Za-z0-9_]{0,127}$";
        let made = matching(name, &mut Rng::new(7, "a")).unwrap();
        let regex = spec()
            .inline(&json!({"type": "string", "pattern": name}))
            .unwrap();
        assert!(regex.is_valid(&made), "{made}");
        assert_eq!(matching("^(a|b)$", &mut Rng::new(7, "a")), None);
    }
}
