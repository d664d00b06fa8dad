//! The server binary as a child process: stopped by `kill -9` and by SIGTERM, minting tokens for
//! the SDK through `intent-server token` (short-lived ones, and through the docs' token command),
//! opening the data that servers of earlier commits left (upgrades in place), and the log it
//! writes, and the metrics it serves.

mod crash;
mod handover;
mod logs;
mod memory;
mod metrics;
mod scale_out;
#[path = "../support/mod.rs"]
mod support;
mod token_command;
mod token_expiry;
mod upgrade;
