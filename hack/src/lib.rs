//! No code: a dependency of the main job that turns on, in shared dependencies, the features the
//! workspace's tests turn on (see `Cargo.toml`), so that `cargo run -p intent-conformance` and
//! `cargo test --workspace` share one build of them.
