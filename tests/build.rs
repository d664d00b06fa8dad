//! Writes the list of openapi.json's component schemas for the round trip of every example
//! through its model (`tests/it/openapi_examples.rs`): each schema is a model of
//! `intent-models` by the same name, so a new schema needs no list edited by hand.

use std::path::Path;

fn main() {
    let document = Path::new(env!("CARGO_MANIFEST_DIR")).join("../openapi.json");
    println!("cargo::rerun-if-changed={}", document.display());
    let text = std::fs::read_to_string(&document).expect("openapi.json reads");
    let value: serde_json::Value = serde_json::from_str(&text).expect("openapi.json parses");
    let schemas = value["components"]["schemas"]
        .as_object()
        .expect("openapi.json has component schemas");
    let names: Vec<&str> = schemas.keys().map(String::as_str).collect();
    let out = Path::new(&std::env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join("models.rs");
    let code = format!("model_round_trip!({});\n", names.join(", "));
    std::fs::write(out, code).expect("the list writes");
}
