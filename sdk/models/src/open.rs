//! A member whose content the interface leaves open.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A member the interface calls "any JSON value" and the reference profile fills with a model
/// (`PipelineBuild::summary`): the profile's shape when the content fits it, else the JSON as
/// sent. A Build's digest is computed over the JSON received, never over this view.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq)]
#[serde(untagged)]
pub enum Open<T> {
    /// Content in the reference profile's shape.
    Profile(T),
    /// Any other JSON value, as sent.
    Other(Value),
}

impl<T> Open<T> {
    /// The content in the reference profile's shape, if it has it.
    pub fn profile(&self) -> Option<&T> {
        match self {
            Self::Profile(content) => Some(content),
            Self::Other(_) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::{Open, PipelineSummary};

    #[test]
    fn content_in_another_shape_is_kept_as_sent() {
        let title = json!({
            "title": "Send 0.5 ETH", "chain": "evm", "network": "31337", "actionCount": 1
        });
        let read: Open<PipelineSummary> = serde_json::from_value(title.clone()).unwrap();
        assert_eq!(
            read.profile().map(|s| s.title.as_str()),
            Some("Send 0.5 ETH")
        );
        assert_eq!(serde_json::to_value(&read).unwrap(), title);

        for other in [
            json!("Send 0.5 ETH"),
            json!({ "lines": [1, 2] }),
            json!(null),
        ] {
            let read: Open<PipelineSummary> = serde_json::from_value(other.clone()).unwrap();
            assert!(read.profile().is_none(), "{other}");
            assert_eq!(serde_json::to_value(&read).unwrap(), other);
        }
    }
}
