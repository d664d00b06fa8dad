//! JSON as the server writes it: a value serialized once and shared by its readers
//! ([`Encoded`]), and a handler's answer written into one buffer ([`Json`]).

mod answer;
mod encoded;

pub use answer::{Json, json};
pub use encoded::Encoded;
