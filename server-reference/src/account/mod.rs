//! The Account area (part 4.3): applications, credentials and the usage statement. Every call
//! is scoped to the caller's account.

mod catalog;
mod error;
pub(crate) mod routes;
mod service;
mod statement;

pub use error::{Error, Result};
pub use service::Account;
