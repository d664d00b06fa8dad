//! Solidity ABI encoding of the arguments the Pipeline sends to EVM contracts: the calls the
//! catalog assembles and the constructors of the devnet's contracts.

use revm::primitives::{Address, U256, hex};

/// One argument.
pub enum Abi<'a> {
    /// A `uint256` (or a `bool`, as 0 or 1).
    Word(U256),
    /// An `address`.
    Address(Address),
    /// A `string`.
    Text(&'a str),
    /// A `bytes`.
    Bytes(&'a [u8]),
    /// An `address[]`.
    Addresses(&'a [Address]),
    /// A `uint256[]`.
    Words(&'a [U256]),
}

/// The call data of the function with `selector` called with `args`, as `0x` hex.
pub fn call_data(selector: [u8; 4], args: &[Abi]) -> String {
    let mut data = selector.to_vec();
    data.extend(encode(args));
    format!("0x{}", hex::encode(data))
}

/// The ABI encoding of `args`: their head words, then the tails of the dynamic ones.
pub fn encode(args: &[Abi]) -> Vec<u8> {
    fn word(value: U256) -> [u8; 32] {
        value.to_be_bytes::<32>()
    }
    fn address(out: &mut Vec<u8>, address: &Address) {
        out.extend_from_slice(&[0u8; 12]);
        out.extend_from_slice(address.as_slice());
    }
    fn padded(bytes: &[u8]) -> Vec<u8> {
        let mut out = word(U256::from(bytes.len())).to_vec();
        out.extend_from_slice(bytes);
        out.resize(32 + bytes.len().div_ceil(32) * 32, 0);
        out
    }
    let mut head = Vec::new();
    let mut tail = Vec::new();
    let head_len = args.len() * 32;
    for arg in args {
        let dynamic: Option<Vec<u8>> = match arg {
            Abi::Word(value) => {
                head.extend_from_slice(&word(*value));
                None
            }
            Abi::Address(value) => {
                address(&mut head, value);
                None
            }
            Abi::Text(text) => Some(padded(text.as_bytes())),
            Abi::Bytes(bytes) => Some(padded(bytes)),
            Abi::Addresses(list) => {
                let mut out = word(U256::from(list.len())).to_vec();
                for value in *list {
                    address(&mut out, value);
                }
                Some(out)
            }
            Abi::Words(list) => {
                let mut out = word(U256::from(list.len())).to_vec();
                for value in *list {
                    out.extend_from_slice(&word(*value));
                }
                Some(out)
            }
        };
        if let Some(bytes) = dynamic {
            head.extend_from_slice(&word(U256::from(head_len + tail.len())));
            tail.extend(bytes);
        }
    }
    head.extend(tail);
    head
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_transfer_with_empty_bytes_encodes_as_solidity_does() {
        let to: Address = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8"
            .parse()
            .unwrap();
        let data = call_data(
            [0xf2, 0x42, 0x43, 0x2a],
            &[
                Abi::Address(to),
                Abi::Word(U256::from(7u8)),
                Abi::Bytes(&[]),
            ],
        );
        let expected = [
            "0xf242432a",
            "00000000000000000000000070997970c51812dc3a010c7d01b50e0d17dc79c8",
            "0000000000000000000000000000000000000000000000000000000000000007",
            "0000000000000000000000000000000000000000000000000000000000000060",
            "0000000000000000000000000000000000000000000000000000000000000000",
        ];
        assert_eq!(data, expected.concat());
    }

    #[test]
    fn a_string_is_padded_to_whole_words_after_its_length() {
        let encoded = encode(&[Abi::Text("USD Coin")]);
        assert_eq!(encoded.len(), 3 * 32);
        assert_eq!(encoded[31], 0x20, "the offset of the tail");
        assert_eq!(encoded[63], 8, "the length");
        assert_eq!(&encoded[64..72], b"USD Coin");
        assert!(encoded[72..].iter().all(|b| *b == 0));
    }
}
