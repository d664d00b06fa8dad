//! What a builder's setter of an optional member takes. A member of a model made from text (a
//! constrained string such as a title, or a string enum) takes the text itself, which the
//! builder's `try_into()` checks, naming the member and what is wrong:
//!
//! ```
//! use intent_models::SessionUpdate;
//!
//! let update: SessionUpdate = SessionUpdate::builder().title("Weekly report").try_into().unwrap();
//! assert_eq!(update.title.as_deref().map(|title| title.as_str()), Some("Weekly report"));
//!
//! let long = "x".repeat(1_000);
//! let refused: Result<SessionUpdate, _> = SessionUpdate::builder().title(long.as_str()).try_into();
//! let message = refused.unwrap_err().to_string();
//! assert!(message.contains("title"), "{message}");
//! ```
//!
//! The member's own type, `Some` of it and `None` are taken as before.

use std::fmt::Display;
use std::str::FromStr;

/// A model made from text: `cargo xtask codegen` implements it for each model with `FromStr`.
pub trait FromText: FromStr<Err: Display> {}

/// A value for an optional member of type `Option<T>`: `Option<T>`, `T`, or, where `T` is made
/// from text, a `&str` or `String`.
pub trait IntoOptional<T> {
    /// The member's value, or why the text is refused.
    fn into_optional(self) -> Result<Option<T>, String>;
}

impl<T> IntoOptional<T> for Option<T> {
    fn into_optional(self) -> Result<Option<T>, String> {
        Ok(self)
    }
}

impl<T> IntoOptional<T> for T {
    fn into_optional(self) -> Result<Option<T>, String> {
        Ok(Some(self))
    }
}

impl<T: FromText> IntoOptional<T> for &str {
    fn into_optional(self) -> Result<Option<T>, String> {
        self.parse().map(Some).map_err(|e: T::Err| e.to_string())
    }
}

impl<T: FromText> IntoOptional<T> for String {
    fn into_optional(self) -> Result<Option<T>, String> {
        self.as_str().into_optional()
    }
}

impl<T: FromText> IntoOptional<T> for &String {
    fn into_optional(self) -> Result<Option<T>, String> {
        self.as_str().into_optional()
    }
}
