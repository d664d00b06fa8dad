//! Who may call: the bearer [`token`] (verified once through the `token_cache`), bound to one
//! [`resource`], the account's `rate` limit, and the `principal` that handlers take. The HTTP
//! layer's gateway applies them to every `/v1` request.

pub(crate) mod principal;
pub(crate) mod rate;
pub mod resource;
pub mod token;
pub(crate) mod token_cache;
