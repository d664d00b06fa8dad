//! Who may call: the `gateway` in front of every `/v1` request verifies the bearer [`token`]
//! (through the `token_cache`), bound to one [`resource`], checks the operation's scope and the
//! account's `rate` limit, and hands handlers a `principal`.

pub(crate) mod gateway;
pub(crate) mod principal;
pub(crate) mod rate;
pub mod resource;
pub mod token;
pub(crate) mod token_cache;
