//! The SVM operations of `svm-assets`: SOL transfers (System program) and SPL transfers
//! (Associated Token Account and SPL Token programs).

use intent_models::PipelineAction;
use serde_json::{Map, Value, json};

use super::{Assembled, to_base_units};
use crate::pipeline::Error;
use crate::pipeline::devnet::svm;

/// One SVM action paid by the input's `from`.
fn svm_action(
    input: &Map<String, Value>,
    step: u64,
    instructions: Vec<Value>,
    description: String,
) -> Result<PipelineAction, Error> {
    let action = json!({
        "chain": "svm", "step": step, "cluster": input["cluster"],
        "feePayer": input["from"], "instructions": instructions,
        "description": description,
    });
    serde_json::from_value(action).map_err(|e| Error::Invalid(e.to_string()))
}

/// An SVM instruction to `program` over `accounts` (address, signer, writable).
fn svm_instruction(program: &str, accounts: &[(&str, bool, bool)], data: &[u8]) -> Value {
    use base64::Engine;
    let accounts: Vec<Value> = accounts
        .iter()
        .map(|(pubkey, signer, writable)| {
            json!({ "pubkey": pubkey, "isSigner": signer, "isWritable": writable })
        })
        .collect();
    json!({
        "programId": program,
        "accounts": accounts,
        "data": base64::engine::general_purpose::STANDARD.encode(data),
    })
}

/// A decimal amount in base units as a `u64`, or 400.
fn base_units_u64(amount: &str, decimals: u8) -> Result<u64, Error> {
    to_base_units(amount, decimals.into())
        .and_then(|units| units.parse().ok())
        .ok_or_else(|| Error::Invalid("amount is out of range".to_owned()))
}

/// An SVM address of an input, or 400.
fn svm_address(input: &Map<String, Value>, key: &str) -> Result<solana_address::Address, Error> {
    let text = input[key].as_str().unwrap_or_default();
    text.parse()
        .map_err(|_| Error::Invalid(format!("{key} is not a 32-byte base58 address")))
}

pub(super) fn sol_transfer(input: &Map<String, Value>, step: u64) -> Result<Assembled, Error> {
    let (from, to) = (svm_address(input, "from")?, svm_address(input, "to")?);
    let amount = input["amount"].as_str().unwrap_or_default();
    let lamports = base_units_u64(amount, 9)?;
    // SystemInstruction::Transfer: index 2 (u32), then lamports (u64), little-endian.
    let data = [&2u32.to_le_bytes()[..], &lamports.to_le_bytes()].concat();
    let (from, to) = (from.to_string(), to.to_string());
    let transfer = svm_instruction(
        svm::SYSTEM_PROGRAM,
        &[(&from, true, true), (&to, false, true)],
        &data,
    );
    Ok(Assembled {
        actions: vec![svm_action(
            input,
            step,
            vec![transfer],
            format!("Transfer {amount} SOL to {to}"),
        )?],
        title: format!("Send {amount} SOL"),
    })
}

pub(super) fn spl_transfer(input: &Map<String, Value>, step: u64) -> Result<Assembled, Error> {
    let (from, to) = (svm_address(input, "from")?, svm_address(input, "to")?);
    let mint_address = svm_address(input, "mint")?;
    let mint = svm::mint(&mint_address.to_string())
        .ok_or_else(|| Error::Invalid(format!("no SPL mint of the devnet is at {mint_address}")))?;
    let amount = input["amount"].as_str().unwrap_or_default();
    let units = base_units_u64(amount, mint.decimals)?;
    let source = svm::associated_token_account(&from, &mint_address).to_string();
    let destination = svm::associated_token_account(&to, &mint_address).to_string();
    let (from, to) = (from.to_string(), to.to_string());
    // AssociatedTokenAccountInstruction::CreateIdempotent: the recipient's account, if missing.
    let create = svm_instruction(
        svm::ASSOCIATED_TOKEN_PROGRAM,
        &[
            (&from, true, true),
            (&destination, false, true),
            (&to, false, false),
            (mint.address, false, false),
            (svm::SYSTEM_PROGRAM, false, false),
            (svm::TOKEN_PROGRAM, false, false),
        ],
        &[1],
    );
    // TokenInstruction::TransferChecked: tag 12, amount (u64, little-endian), decimals.
    let data = [&[12u8][..], &units.to_le_bytes(), &[mint.decimals]].concat();
    let transfer = svm_instruction(
        svm::TOKEN_PROGRAM,
        &[
            (&source, false, true),
            (mint.address, false, false),
            (&destination, false, true),
            (&from, true, false),
        ],
        &data,
    );
    let description = format!("Transfer {amount} {} to {to}", mint.symbol);
    Ok(Assembled {
        actions: vec![svm_action(
            input,
            step,
            vec![create, transfer],
            description,
        )?],
        title: format!("Send {amount} {}", mint.symbol),
    })
}
