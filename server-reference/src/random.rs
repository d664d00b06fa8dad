//! Random bytes and identifiers from the operating system.

/// `N` random bytes.
pub fn bytes<const N: usize>() -> [u8; N] {
    let mut out = [0; N];
    getrandom::fill(&mut out).expect("the operating system provides randomness");
    out
}

/// A random identifier: `prefix`, an underscore and 32 lowercase hex digits.
pub fn id(prefix: &str) -> String {
    let mut id = String::with_capacity(prefix.len() + 33);
    id.push_str(prefix);
    id.push('_');
    push_hex(&mut id, &bytes::<16>());
    id
}

/// Appends `bytes` to `text` as lowercase hex digits.
pub fn push_hex(text: &mut String, bytes: &[u8]) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    for byte in bytes {
        text.push(char::from(DIGITS[usize::from(byte >> 4)]));
        text.push(char::from(DIGITS[usize::from(byte & 0xf)]));
    }
}
