//! The skills of the reference catalog: address checks and fee quotes.

use std::str::FromStr;
use std::sync::LazyLock;

use serde_json::{Value, json};

use super::input::input;
use super::{Skill, SkillOperation};
use crate::pipeline::devnet::evm::{CHAIN_ID, GAS_PRICE_WEI};

/// Every skill.
pub static SKILLS: LazyLock<Vec<Skill>> = LazyLock::new(|| {
    vec![
        Skill {
            name: "address",
            description: "Address checks.",
            operations: vec![SkillOperation::new("validate", validate_address)],
        },
        Skill {
            name: "fees",
            description: "Fee quotes on the devnet.",
            operations: vec![SkillOperation::new("quote", quote_fee)],
        },
    ]
});

input! {
    /// `address.validate`.
    ValidateAddress {
        required address "address": String = { "type": "string", "maxLength": 128 },
    }
}

input! {
    /// `fees.quote`.
    QuoteFee {
        required chain_id "chainId": u64 = { "type": "integer", "minimum": 1 },
        optional gas_units "gasUnits": Option<u64> = {
            "type": "integer", "minimum": 21000, "maximum": 30000000
        },
    }
}

/// Whether `address` is an EVM address (with its EIP-55 form; mixed case must be the checksum)
/// or an SVM one.
pub(super) fn validate_address(input: ValidateAddress) -> Value {
    let text = input.address.as_str();
    let parsed = text
        .strip_prefix("0x")
        .filter(|hex| hex.len() == 40)
        .and_then(|_| revm::primitives::Address::from_str(text).ok());
    match parsed {
        Some(address) => {
            let checksummed = address.to_checksum(None);
            let hex = &text[2..];
            let one_case = hex == hex.to_ascii_lowercase() || hex == hex.to_ascii_uppercase();
            if one_case || checksummed == text {
                json!({ "valid": true, "chain": "evm", "checksummed": checksummed })
            } else {
                json!({ "valid": false, "chain": "evm", "reason": "the mixed-case checksum does not match" })
            }
        }
        None if text.parse::<solana_address::Address>().is_ok() => {
            json!({ "valid": true, "chain": "svm" })
        }
        None => json!({
            "valid": false,
            "reason": "neither a 0x-prefixed 20-byte hex address nor a base58 32-byte address"
        }),
    }
}

/// The fee of `gasUnits` (a plain transfer by default) at the devnet's gas price.
pub(super) fn quote_fee(input: QuoteFee) -> Value {
    let chain_id = input.chain_id;
    if chain_id != CHAIN_ID {
        return json!({ "chainId": chain_id, "known": false });
    }
    let units = input.gas_units.unwrap_or(21_000);
    let price = GAS_PRICE_WEI;
    json!({
        "chainId": chain_id,
        "known": true,
        "gasUnits": units.to_string(),
        "priceWei": price.to_string(),
        "nativeCost": (u128::from(units) * u128::from(price)).to_string(),
        "symbol": "ETH",
        "decimals": 18,
    })
}
