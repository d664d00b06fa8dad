//! The Pipeline area (parts 2.1 to 2.8 and 4.1): stateless builds, simulation against the
//! devnet, and commit after revalidation and re-simulation. Nothing about a Build is kept
//! between calls: the envelope carries it all, and its attestation proves it.

mod abi;
pub mod catalog;
pub mod devnet;
mod error;
pub(crate) mod routes;
pub mod seal;
mod service;
mod simulation;

pub use devnet::evm::erc20;
pub use error::{Error, Result};
pub use service::{Lifecycle, Pipeline};
