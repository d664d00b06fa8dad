//! The SVM operations of `svm-assets`: SOL transfers (System program) and SPL transfers
//! (Associated Token Account and SPL Token programs), each with its input.

use intent_models::{PipelineAction, SvmAccountMeta, SvmInstruction};

use super::input::input;
use super::{Assembled, positive, refused, to_base_units};
use crate::pipeline::Error;
use crate::pipeline::devnet::svm;

/// The pattern of a base58 SVM address.
const BASE58: &str = "^[1-9A-HJ-NP-Za-km-z]{32,44}$";

input! {
    /// `sol-transfer`.
    SolTransfer {
        required cluster "cluster": String = { "type": "string", "minLength": 1, "maxLength": 64 },
        required from "from": String = { "type": "string", "pattern": BASE58 },
        required to "to": String = { "type": "string", "pattern": BASE58 },
        required amount "amount": String = {
            "type": "string",
            "description": "Amount in SOL (9 decimals).",
            "pattern": "^[0-9]{1,11}(\\.[0-9]{1,9})?$"
        },
    }
}

input! {
    /// `spl-transfer`.
    SplTransfer {
        required cluster "cluster": String = { "type": "string", "minLength": 1, "maxLength": 64 },
        required from "from": String = { "type": "string", "pattern": BASE58 },
        required mint "mint": String = { "type": "string", "pattern": BASE58 },
        required to "to": String = { "type": "string", "pattern": BASE58 },
        required amount "amount": String = {
            "type": "string",
            "description": "Amount in whole tokens; the mint's decimals apply. The recipient's associated token account is created when missing.",
            "pattern": "^[0-9]{1,20}(\\.[0-9]{1,9})?$"
        },
    }
}

/// One SVM action on `cluster` paid by `fee_payer`.
fn svm_action(
    (cluster, fee_payer): (&str, &str),
    step: u64,
    instructions: Vec<SvmInstruction>,
    description: String,
) -> Result<PipelineAction, Error> {
    Ok(PipelineAction::Svm {
        cluster: cluster.parse().map_err(refused)?,
        description: Some(description),
        fee_payer: fee_payer.parse().map_err(refused)?,
        instructions,
        step: positive("step", step)?,
    })
}

/// An SVM instruction to `program` over `accounts` (address, signer, writable).
fn svm_instruction(
    program: &str,
    accounts: &[(&str, bool, bool)],
    data: &[u8],
) -> Result<SvmInstruction, Error> {
    use base64::Engine;
    let accounts = accounts
        .iter()
        .map(|&(pubkey, signer, writable)| {
            SvmAccountMeta::builder()
                .pubkey(pubkey)
                .is_signer(signer)
                .is_writable(writable)
                .try_into()
        })
        .collect::<Result<Vec<_>, _>>()
        .map_err(refused)?;
    SvmInstruction::builder()
        .program_id(program)
        .accounts(accounts)
        .data(base64::engine::general_purpose::STANDARD.encode(data))
        .try_into()
        .map_err(refused)
}

/// A decimal amount in base units as a `u64`, or 400.
fn base_units_u64(amount: &str, decimals: u8) -> Result<u64, Error> {
    to_base_units(amount, decimals.into())
        .and_then(|units| units.parse().ok())
        .ok_or_else(|| Error::Invalid("amount is out of range".to_owned()))
}

/// The SVM address `text` of the input's member `key`, or 400.
fn svm_address(text: &str, key: &str) -> Result<solana_address::Address, Error> {
    text.parse()
        .map_err(|_| Error::Invalid(format!("{key} is not a 32-byte base58 address")))
}

pub(super) fn sol_transfer(input: SolTransfer, step: u64) -> Result<Assembled, Error> {
    let from = svm_address(&input.from, "from")?;
    let to = svm_address(&input.to, "to")?;
    let amount = &input.amount;
    let lamports = base_units_u64(amount, 9)?;
    // SystemInstruction::Transfer: index 2 (u32), then lamports (u64), little-endian.
    let data = [&2u32.to_le_bytes()[..], &lamports.to_le_bytes()].concat();
    let (from, to) = (from.to_string(), to.to_string());
    let transfer = svm_instruction(
        svm::SYSTEM_PROGRAM,
        &[(&from, true, true), (&to, false, true)],
        &data,
    )?;
    Ok(Assembled {
        actions: vec![svm_action(
            (&input.cluster, &input.from),
            step,
            vec![transfer],
            format!("Transfer {amount} SOL to {to}"),
        )?],
        title: format!("Send {amount} SOL"),
    })
}

pub(super) fn spl_transfer(input: SplTransfer, step: u64) -> Result<Assembled, Error> {
    let from = svm_address(&input.from, "from")?;
    let to = svm_address(&input.to, "to")?;
    let mint_address = svm_address(&input.mint, "mint")?;
    let mint = svm::mint(&mint_address.to_string())
        .ok_or_else(|| Error::Invalid(format!("no SPL mint of the devnet is at {mint_address}")))?;
    let amount = &input.amount;
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
    )?;
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
    )?;
    let description = format!("Transfer {amount} {} to {to}", mint.symbol);
    Ok(Assembled {
        actions: vec![svm_action(
            (&input.cluster, &input.from),
            step,
            vec![create, transfer],
            description,
        )?],
        title: format!("Send {amount} {}", mint.symbol),
    })
}
