//! The EVM operations of `evm-assets`: native, ERC-20, ERC-721 and ERC-1155 transfers and
//! approvals, ABI-encoded against the devnet's contracts.

use intent_models::PipelineAction;
use revm::primitives::{Address, U256};
use serde_json::{Map, Value, json};

use super::{Assembled, to_base_units};
use crate::pipeline::Error;
use crate::pipeline::abi::{Abi, call_data};
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

/// An address argument, or 400.
fn address(text: &str) -> Result<Abi<'static>, Error> {
    let address: Address = text
        .parse()
        .map_err(|_| Error::Invalid(format!("{text} is not an address")))?;
    Ok(Abi::Address(address))
}

/// A decimal number as a `uint256` argument, or 400.
fn uint(decimal: &str) -> Result<Abi<'static>, Error> {
    let value: U256 = decimal
        .parse()
        .map_err(|_| Error::Invalid("amount is out of range".to_owned()))?;
    Ok(Abi::Word(value))
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
    let data = call_data([0xa9, 0x05, 0x9c, 0xbb], &[address(&to)?, uint(&units)?]);
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
    let allowance = if amount == "unlimited" {
        Abi::Word(U256::MAX)
    } else {
        let units = to_base_units(&amount, token.decimals.unwrap_or_default().into())
            .ok_or_else(|| Error::Invalid("amount has too many decimals".to_owned()))?;
        uint(&units)?
    };
    // approve(address,uint256)
    let data = call_data([0x09, 0x5e, 0xa7, 0xb3], &[address(&spender)?, allowance]);
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
    let data = call_data(
        [0x42, 0x84, 0x2e, 0x0e],
        &[address(&from)?, address(&to)?, uint(&id)?],
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
    let args = [
        address(&from)?,
        address(&to)?,
        uint(&id)?,
        uint(&amount)?,
        Abi::Bytes(&[]),
    ];
    let data = call_data([0xf2, 0x42, 0x43, 0x2a], &args);
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
    let data = call_data(
        [0xa2, 0x2c, 0xb4, 0x65],
        &[
            address(&operator)?,
            Abi::Word(U256::from(u8::from(approved))),
        ],
    );
    let verb = if approved { "Allow" } else { "Revoke" };
    let description = format!("{verb} {operator} as operator of every {}", token.symbol);
    Ok(Assembled {
        actions: vec![call(input, step, token.address, data, description.clone())?],
        title: description,
    })
}
