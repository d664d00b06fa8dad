//! A value already serialized as JSON, typed by what it holds.

use std::marker::PhantomData;

use bytes::Bytes;

/// `T` serialized as JSON once, shared by every reader that answers it. Its bytes are UTF-8.
pub struct Encoded<T> {
    json: Bytes,
    of: PhantomData<fn() -> T>,
}

impl<T: serde::Serialize> Encoded<T> {
    /// `value` as JSON.
    pub fn new(value: &T) -> serde_json::Result<Self> {
        Ok(Self {
            json: serde_json::to_vec(value)?.into(),
            of: PhantomData,
        })
    }
}

impl<T> Encoded<T> {
    /// `json`, which its writer writes as a `T` by hand (and its tests read back as one).
    pub fn written(json: String) -> Self {
        Self {
            json: json.into(),
            of: PhantomData,
        }
    }

    /// The JSON text.
    pub fn into_json(self) -> Bytes {
        self.json
    }

    /// The JSON text, borrowed.
    pub fn text(&self) -> &str {
        std::str::from_utf8(&self.json).expect("JSON text is UTF-8")
    }
}

/// A clone shares the bytes, whatever `T` is.
impl<T> Clone for Encoded<T> {
    fn clone(&self) -> Self {
        Self {
            json: self.json.clone(),
            of: PhantomData,
        }
    }
}

impl<T> std::fmt::Debug for Encoded<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Encoded")
            .field(&String::from_utf8_lossy(&self.json))
            .finish()
    }
}
