//! The interface document this server implements, embedded in the binary and parsed once:
//! served as it is at `/openapi.json`, and read for its operations, its turn states' transitions
//! and the MCP tools.

use std::sync::LazyLock;

use intent_models::openapi::Document;
use intent_models::schema::Schemas;

/// `openapi.json` as text.
pub const TEXT: &str = include_str!("../../openapi.json");

static PARSED: LazyLock<(Document, Schemas)> = LazyLock::new(|| {
    let document = Document::parse(TEXT).expect("the embedded openapi.json parses");
    let schemas =
        Schemas::from_openapi(document.value()).expect("openapi.json has component schemas");
    (document, schemas)
});

/// The document, its operations read.
pub fn document() -> &'static Document {
    &PARSED.0
}

/// Its component schemas, converted to JSON Schema.
pub fn schemas() -> &'static Schemas {
    &PARSED.1
}
