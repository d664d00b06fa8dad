//! The EVM operations of `evm-assets`: native, ERC-20, ERC-721 and ERC-1155 transfers and
//! approvals, ABI-encoded against the devnet's contracts.

use intent_models::PipelineAction;
use serde_json::{Map, Value, json};

use super::{Assembled, to_base_units};
use crate::pipeline::Error;
use crate::pipeline::devnet::evm::{Contract, Standard};

pub(super) fn native_transfer(input: &Map<String, Value>, step: u64) -> Result<Assembled, Error> {
    let text = |key: &str| input[key].as_str().unwrap_or_default().to_owned();
    let amount = text("amount");
    let wei = to_base_units(&amount, 18)
        .ok_or_else(|| Error::Invalid("amount is out of range".to_owned()))?;
    let to = text("to");
    let action = json!({
        "chain": "evm",
        "step": step,
        "chainId": input["chainId"],
        "from": text("from"),
        "to": to,
        "value": wei,
        "data": "0x",
        "description": format!("Transfer {amount} ETH to {to}"),
    });
    Ok(Assembled {
        actions: vec![serde_json::from_value(action).map_err(|e| Error::Invalid(e.to_string()))?],
        title: format!("Send {amount} ETH"),
    })
}

/// The contract an operation names in `token`, or 400 when the devnet has none of `standards`
/// there.
fn token(input: &Map<String, Value>, standards: &[Standard]) -> Result<&'static Contract, Error> {
    let address = input["token"].as_str().unwrap_or_default();
    crate::pipeline::devnet::evm::contract(address)
        .filter(|c| standards.contains(&c.standard))
        .ok_or_else(|| {
            let names: Vec<&str> = standards.iter().map(|s| s.as_str()).collect();
            Error::Invalid(format!(
                "no {} contract of the devnet is at {address}",
                names.join(" or ")
            ))
        })
}

/// ABI words of `values` after a 4-byte selector, as `0x` hex.
fn encode(selector: &str, words: &[String]) -> String {
    let mut out = format!("0x{selector}");
    for word in words {
        out.push_str(&format!("{word:0>64}"));
    }
    out
}

/// An address as an ABI word (hex, no prefix).
fn address_word(address: &str) -> String {
    address.trim_start_matches("0x").to_ascii_lowercase()
}

/// A decimal amount as an ABI word (hex), or 400.
fn amount_word(decimal: &str) -> Result<String, Error> {
    let value: revm::primitives::U256 = decimal
        .parse()
        .map_err(|_| Error::Invalid("amount is out of range".to_owned()))?;
    Ok(format!("{value:x}"))
}

/// One EVM call action to `to` with `data`.
fn call(
    input: &Map<String, Value>,
    step: u64,
    to: &str,
    data: String,
    description: String,
) -> Result<PipelineAction, Error> {
    let action = json!({
        "chain": "evm", "step": step, "chainId": input["chainId"],
        "from": input["from"], "to": to, "value": "0", "data": data,
        "description": description,
    });
    serde_json::from_value(action).map_err(|e| Error::Invalid(e.to_string()))
}

pub(super) fn erc20_transfer(input: &Map<String, Value>, step: u64) -> Result<Assembled, Error> {
    let token = token(input, &[Standard::Erc20])?;
    let text = |key: &str| input[key].as_str().unwrap_or_default().to_owned();
    let (amount, to) = (text("amount"), text("to"));
    let units = to_base_units(&amount, token.decimals.unwrap_or_default().into())
        .ok_or_else(|| Error::Invalid("amount has too many decimals".to_owned()))?;
    // transfer(address,uint256)
    let data = encode("a9059cbb", &[address_word(&to), amount_word(&units)?]);
    let description = format!("Transfer {amount} {} to {to}", token.symbol);
    Ok(Assembled {
        actions: vec![call(input, step, token.address, data, description)?],
        title: format!("Send {amount} {}", token.symbol),
    })
}

pub(super) fn erc20_approve(input: &Map<String, Value>, step: u64) -> Result<Assembled, Error> {
    let token = token(input, &[Standard::Erc20])?;
    let text = |key: &str| input[key].as_str().unwrap_or_default().to_owned();
    let (amount, spender) = (text("amount"), text("spender"));
    let units = if amount == "unlimited" {
        revm::primitives::U256::MAX.to_string()
    } else {
        to_base_units(&amount, token.decimals.unwrap_or_default().into())
            .ok_or_else(|| Error::Invalid("amount has too many decimals".to_owned()))?
    };
    // approve(address,uint256)
    let data = encode("095ea7b3", &[address_word(&spender), amount_word(&units)?]);
    let description = format!("Approve {spender} to spend {amount} {}", token.symbol);
    Ok(Assembled {
        actions: vec![call(input, step, token.address, data, description)?],
        title: format!("Approve {amount} {}", token.symbol),
    })
}

pub(super) fn erc721_transfer(input: &Map<String, Value>, step: u64) -> Result<Assembled, Error> {
    let token = token(input, &[Standard::Erc721])?;
    let text = |key: &str| input[key].as_str().unwrap_or_default().to_owned();
    let (from, to, id) = (text("from"), text("to"), text("tokenId"));
    // safeTransferFrom(address,address,uint256)
    let data = encode(
        "42842e0e",
        &[address_word(&from), address_word(&to), amount_word(&id)?],
    );
    let description = format!("Transfer {} #{id} to {to}", token.symbol);
    Ok(Assembled {
        actions: vec![call(input, step, token.address, data, description)?],
        title: format!("Send {} #{id}", token.symbol),
    })
}

pub(super) fn erc1155_transfer(input: &Map<String, Value>, step: u64) -> Result<Assembled, Error> {
    let token = token(input, &[Standard::Erc1155])?;
    let text = |key: &str| input[key].as_str().unwrap_or_default().to_owned();
    let (from, to, id, amount) = (text("from"), text("to"), text("id"), text("amount"));
    // safeTransferFrom(address,address,uint256,uint256,bytes) with empty data
    let words = [
        address_word(&from),
        address_word(&to),
        amount_word(&id)?,
        amount_word(&amount)?,
        "a0".to_owned(),
        "0".to_owned(),
    ];
    let data = encode("f242432a", &words);
    let description = format!("Transfer {amount} of {} id {id} to {to}", token.symbol);
    Ok(Assembled {
        actions: vec![call(input, step, token.address, data, description)?],
        title: format!("Send {amount} {} #{id}", token.symbol),
    })
}

pub(super) fn set_approval_for_all(
    input: &Map<String, Value>,
    step: u64,
) -> Result<Assembled, Error> {
    let token = token(input, &[Standard::Erc721, Standard::Erc1155])?;
    let operator = input["operator"].as_str().unwrap_or_default().to_owned();
    let approved = input["approved"].as_bool().unwrap_or_default();
    // setApprovalForAll(address,bool)
    let data = encode(
        "a22cb465",
        &[address_word(&operator), u8::from(approved).to_string()],
    );
    let verb = if approved { "Allow" } else { "Revoke" };
    let description = format!("{verb} {operator} as operator of every {}", token.symbol);
    Ok(Assembled {
        actions: vec![call(input, step, token.address, data, description.clone())?],
        title: description,
    })
}
