//! The EVM operations of `evm-assets`: native, ERC-20, ERC-721 and ERC-1155 transfers and
//! approvals, ABI-encoded against the devnet's contracts, each with its input.

use intent_models::PipelineAction;
use revm::primitives::{Address, U256};

use super::input::input;
use super::{Assembled, positive, refused, to_base_units};
use crate::pipeline::Error;
use crate::pipeline::abi::{Abi, call_data};
use crate::pipeline::devnet::evm::{Contract, Standard};

/// The pattern of an EVM address.
const ADDRESS: &str = "^0x[0-9a-fA-F]{40}$";
/// The pattern of a decimal amount of at most 18 fraction digits.
const AMOUNT: &str = "^[0-9]{1,40}(\\.[0-9]{1,18})?$";
/// The pattern of a `uint256` in decimal.
const UINT: &str = "^[0-9]{1,78}$";

input! {
    /// `native-transfer`.
    NativeTransfer {
        required chain_id "chainId": u64 = { "type": "integer", "minimum": 1 },
        required from "from": String = { "type": "string", "pattern": ADDRESS },
        required to "to": String = { "type": "string", "pattern": ADDRESS },
        required amount "amount": String = {
            "type": "string",
            "description": "Amount of the native coin, in whole units (18 decimals).",
            "pattern": AMOUNT
        },
    }
}

input! {
    /// `erc20-transfer`.
    Erc20Transfer {
        required chain_id "chainId": u64 = { "type": "integer", "minimum": 1 },
        required from "from": String = { "type": "string", "pattern": ADDRESS },
        required token "token": String = { "type": "string", "pattern": ADDRESS },
        required to "to": String = { "type": "string", "pattern": ADDRESS },
        required amount "amount": String = {
            "type": "string",
            "description": "Amount in whole tokens; the token's decimals apply.",
            "pattern": AMOUNT
        },
    }
}

input! {
    /// `erc20-approve`.
    Erc20Approve {
        required chain_id "chainId": u64 = { "type": "integer", "minimum": 1 },
        required from "from": String = { "type": "string", "pattern": ADDRESS },
        required token "token": String = { "type": "string", "pattern": ADDRESS },
        required spender "spender": String = { "type": "string", "pattern": ADDRESS },
        required amount "amount": String = {
            "type": "string",
            "description": "Allowance in whole tokens, or `unlimited`.",
            "pattern": "^([0-9]{1,40}(\\.[0-9]{1,18})?|unlimited)$"
        },
    }
}

input! {
    /// `erc721-transfer`.
    Erc721Transfer {
        required chain_id "chainId": u64 = { "type": "integer", "minimum": 1 },
        required from "from": String = { "type": "string", "pattern": ADDRESS },
        required token "token": String = { "type": "string", "pattern": ADDRESS },
        required to "to": String = { "type": "string", "pattern": ADDRESS },
        required token_id "tokenId": String = { "type": "string", "pattern": UINT },
    }
}

input! {
    /// `erc1155-transfer`.
    Erc1155Transfer {
        required chain_id "chainId": u64 = { "type": "integer", "minimum": 1 },
        required from "from": String = { "type": "string", "pattern": ADDRESS },
        required token "token": String = { "type": "string", "pattern": ADDRESS },
        required to "to": String = { "type": "string", "pattern": ADDRESS },
        required id "id": String = { "type": "string", "pattern": UINT },
        required amount "amount": String = { "type": "string", "pattern": UINT },
    }
}

input! {
    /// `set-approval-for-all`.
    SetApprovalForAll {
        required chain_id "chainId": u64 = { "type": "integer", "minimum": 1 },
        required from "from": String = { "type": "string", "pattern": ADDRESS },
        required token "token": String = { "type": "string", "pattern": ADDRESS },
        required operator "operator": String = { "type": "string", "pattern": ADDRESS },
        required approved "approved": bool = { "type": "boolean" },
    }
}

pub(super) fn native_transfer(input: NativeTransfer, step: u64) -> Result<Assembled, Error> {
    let NativeTransfer {
        chain_id,
        from,
        to,
        amount,
    } = input;
    let wei = to_base_units(&amount, 18)
        .ok_or_else(|| Error::Invalid("amount is out of range".to_owned()))?;
    let description = format!("Transfer {amount} ETH to {to}");
    let sender = (chain_id, from.as_str());
    Ok(Assembled {
        actions: vec![evm_action(
            sender,
            step,
            &to,
            wei,
            "0x".to_owned(),
            description,
        )?],
        title: format!("Send {amount} ETH"),
    })
}

/// The contract at `address`, or 400 when the devnet has none of `standards` there.
fn token(address: &str, standards: &[Standard]) -> Result<&'static Contract, Error> {
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

/// One EVM action from `from` on chain `chain_id` sending `value` wei and call `data`
/// (0x-prefixed hex) to `to`.
fn evm_action(
    (chain_id, from): (u64, &str),
    step: u64,
    to: &str,
    value: String,
    data: String,
    description: String,
) -> Result<PipelineAction, Error> {
    Ok(PipelineAction::Evm {
        chain_id: positive("chainId", chain_id)?,
        data: data.try_into().map_err(refused)?,
        description: Some(description),
        from: from.parse().map_err(refused)?,
        gas_limit: None,
        step: positive("step", step)?,
        to: to.parse().map_err(refused)?,
        value: value.try_into().map_err(refused)?,
    })
}

/// One EVM call action from `from` on chain `chain_id` to `to` with `data`, sending no value.
fn call(
    sender: (u64, &str),
    step: u64,
    to: &str,
    data: String,
    description: String,
) -> Result<PipelineAction, Error> {
    evm_action(sender, step, to, "0".to_owned(), data, description)
}

pub(super) fn erc20_transfer(input: Erc20Transfer, step: u64) -> Result<Assembled, Error> {
    let token = token(&input.token, &[Standard::Erc20])?;
    let (amount, to) = (&input.amount, &input.to);
    let units = to_base_units(amount, token.decimals.unwrap_or_default().into())
        .ok_or_else(|| Error::Invalid("amount has too many decimals".to_owned()))?;
    // transfer(address,uint256)
    let data = call_data([0xa9, 0x05, 0x9c, 0xbb], &[address(to)?, uint(&units)?]);
    let description = format!("Transfer {amount} {} to {to}", token.symbol);
    let sender = (input.chain_id, input.from.as_str());
    Ok(Assembled {
        actions: vec![call(sender, step, token.address, data, description)?],
        title: format!("Send {amount} {}", token.symbol),
    })
}

pub(super) fn erc20_approve(input: Erc20Approve, step: u64) -> Result<Assembled, Error> {
    let token = token(&input.token, &[Standard::Erc20])?;
    let (amount, spender) = (&input.amount, &input.spender);
    let allowance = if amount == "unlimited" {
        Abi::Word(U256::MAX)
    } else {
        let units = to_base_units(amount, token.decimals.unwrap_or_default().into())
            .ok_or_else(|| Error::Invalid("amount has too many decimals".to_owned()))?;
        uint(&units)?
    };
    // approve(address,uint256)
    let data = call_data([0x09, 0x5e, 0xa7, 0xb3], &[address(spender)?, allowance]);
    let description = format!("Approve {spender} to spend {amount} {}", token.symbol);
    let sender = (input.chain_id, input.from.as_str());
    Ok(Assembled {
        actions: vec![call(sender, step, token.address, data, description)?],
        title: format!("Approve {amount} {}", token.symbol),
    })
}

pub(super) fn erc721_transfer(input: Erc721Transfer, step: u64) -> Result<Assembled, Error> {
    let token = token(&input.token, &[Standard::Erc721])?;
    let (from, to, id) = (&input.from, &input.to, &input.token_id);
    // safeTransferFrom(address,address,uint256)
    let data = call_data(
        [0x42, 0x84, 0x2e, 0x0e],
        &[address(from)?, address(to)?, uint(id)?],
    );
    let description = format!("Transfer {} #{id} to {to}", token.symbol);
    Ok(Assembled {
        actions: vec![call(
            (input.chain_id, from),
            step,
            token.address,
            data,
            description,
        )?],
        title: format!("Send {} #{id}", token.symbol),
    })
}

pub(super) fn erc1155_transfer(input: Erc1155Transfer, step: u64) -> Result<Assembled, Error> {
    let token = token(&input.token, &[Standard::Erc1155])?;
    let (from, to, id, amount) = (&input.from, &input.to, &input.id, &input.amount);
    // safeTransferFrom(address,address,uint256,uint256,bytes) with empty data
    let args = [
        address(from)?,
        address(to)?,
        uint(id)?,
        uint(amount)?,
        Abi::Bytes(&[]),
    ];
    let data = call_data([0xf2, 0x42, 0x43, 0x2a], &args);
    let description = format!("Transfer {amount} of {} id {id} to {to}", token.symbol);
    Ok(Assembled {
        actions: vec![call(
            (input.chain_id, from),
            step,
            token.address,
            data,
            description,
        )?],
        title: format!("Send {amount} {} #{id}", token.symbol),
    })
}

pub(super) fn set_approval_for_all(
    input: SetApprovalForAll,
    step: u64,
) -> Result<Assembled, Error> {
    let token = token(&input.token, &[Standard::Erc721, Standard::Erc1155])?;
    let (operator, approved) = (&input.operator, input.approved);
    // setApprovalForAll(address,bool)
    let data = call_data(
        [0xa2, 0x2c, 0xb4, 0x65],
        &[
            address(operator)?,
            Abi::Word(U256::from(u8::from(approved))),
        ],
    );
    let verb = if approved { "Allow" } else { "Revoke" };
    let description = format!("{verb} {operator} as operator of every {}", token.symbol);
    let sender = (input.chain_id, input.from.as_str());
    Ok(Assembled {
        actions: vec![call(
            sender,
            step,
            token.address,
            data,
            description.clone(),
        )?],
        title: description,
    })
}
