//! The server binary as a child process: stopped by `kill -9` and by SIGTERM, and minting
//! short-lived tokens for the SDK through `intent-server token`.

mod crash;
mod memory;
mod scale_out;
#[path = "../support/mod.rs"]
mod support;
mod token_expiry;
