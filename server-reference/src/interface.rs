//! The interface document this server implements, embedded in the binary and parsed once:
//! served as it is at `/openapi.json`, and read for its operations, its turn states' transitions
//! and the MCP tools.

use std::sync::LazyLock;

use intent_models::schema::Schemas;
use serde_json::Value;

/// `openapi.json` as text.
pub const TEXT: &str = include_str!("../../openapi.json");

static PARSED: LazyLock<(Value, Schemas)> = LazyLock::new(|| {
    let document: Value = serde_json::from_str(TEXT).expect("the embedded openapi.json parses");
    let schemas = Schemas::from_openapi(&document).expect("openapi.json has component schemas");
    (document, schemas)
});

/// The document.
pub fn document() -> &'static Value {
    &PARSED.0
}

/// Its component schemas, converted to JSON Schema.
pub fn schemas() -> &'static Schemas {
    &PARSED.1
}
