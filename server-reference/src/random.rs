//! Random bytes and identifiers from the operating system.

/// `N` random bytes.
pub fn bytes<const N: usize>() -> [u8; N] {
    let mut out = [0; N];
    getrandom::fill(&mut out).expect("the operating system provides randomness");
    out
}

/// A random identifier: `prefix`, an underscore and 32 lowercase hex digits.
pub fn id(prefix: &str) -> String {
    let hex: String = bytes::<16>().iter().map(|b| format!("{b:02x}")).collect();
    format!("{prefix}_{hex}")
}
