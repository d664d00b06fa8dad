//! The EVM devnet: chain 31337 executed with `revm`, with the ten well-known development
//! accounts funded and the token contracts of `contracts/` deployed at genesis.

use std::collections::BTreeMap;
use std::num::NonZeroU64;
use std::str::FromStr;

use intent_models::error::ConversionError;
use intent_models::{
    PipelineAction, PipelineBalanceChange, PipelineBalanceChangeDirection as Direction,
    PipelineBalanceChangeStandard as ChangeStandard, PipelineFeeEstimate, PipelineGasEstimate,
    PipelineLog,
};
use revm::context::TxEnv;
use revm::database::{CacheDB, EmptyDB};
use revm::primitives::{Address, Bytes, TxKind, U256, keccak256};
use revm::state::AccountInfo;
use revm::{Context, DatabaseCommit, DatabaseRef, ExecuteEvm, MainBuilder, MainContext};

mod contracts;
mod logs;

pub use contracts::{CONTRACTS, Contract, Standard, contract, erc20};
use contracts::{DEV_COLLECTIBLE_BIN, DEV_MULTI_TOKEN_BIN, DEV_TOKEN_BIN};
use logs::Decoded;

use super::{Ledger, Run};
use crate::pipeline::abi::{self, Abi};
use crate::pipeline::simulation::{Guards, Observed, simulation};

/// The devnet's chain id.
pub const CHAIN_ID: u64 = 31337;

/// Gas price of every transaction, in wei; equal to the base fee, so no tip is paid.
pub const GAS_PRICE_WEI: u64 = 1_000_000_000;

/// Gas limit of an action that names none.
const DEFAULT_GAS_LIMIT: u64 = 1_000_000;

/// Gas limit of a token deployment at genesis (under the EIP-7825 cap of 2^24).
const DEPLOY_GAS_LIMIT: u64 = 5_000_000;

/// Block gas limit.
const BLOCK_GAS_LIMIT: u64 = 30_000_000;

/// The funded development accounts (the usual `anvil` and `hardhat` ones), 10,000 ETH each.
pub const FUNDED_ACCOUNTS: [&str; 10] = [
    "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266",
    "0x70997970C51812dc3A010C7d01b50e0d17dc79C8",
    "0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC",
    "0x90F79bf6EB2c4f870365E785982E1f101E93b906",
    "0x15d34AAf54267DB7D7c367839AAf71A00a2C6A65",
    "0x9965507D1a55bcC2695C58ba16FB37d819B0A4dc",
    "0x976EA74026E726554dB657fA54763abd0C3a0aa9",
    "0x14dC79964da2C08b23698B3D3cc7Ca32193d9955",
    "0x23618e81E3f5cdF7f54C3d65f7FBc0aBf5B21E8f",
    "0xa0Ee7A142d267C1f36714E4a8F75612F20a79720",
];

/// The chain's state.
pub type Db = CacheDB<EmptyDB>;

/// The state at genesis: funded accounts and deployed contracts.
fn genesis() -> Db {
    let mut db = CacheDB::new(EmptyDB::default());
    let balance = U256::from(10_000u64) * U256::from(10u64).pow(U256::from(18u64));
    let holders: Vec<Address> = FUNDED_ACCOUNTS
        .iter()
        .map(|a| Address::from_str(a).expect("a funded account is an address"))
        .collect();
    for address in &holders {
        db.insert_account_info(
            *address,
            AccountInfo {
                balance,
                ..AccountInfo::default()
            },
        );
    }
    for (nonce, contract) in CONTRACTS.iter().enumerate() {
        let (code, args) = match contract.standard {
            Standard::Erc20 => {
                let decimals = contract.decimals.unwrap_or_default();
                let supply = U256::from(1_000_000u64) * U256::from(10u64).pow(U256::from(decimals));
                let args = abi::encode(&[
                    Abi::Text(contract.name),
                    Abi::Text(contract.symbol),
                    Abi::Word(U256::from(decimals)),
                    Abi::Addresses(&holders),
                    Abi::Word(supply),
                ]);
                (DEV_TOKEN_BIN, args)
            }
            Standard::Erc721 => {
                let args = abi::encode(&[
                    Abi::Text(contract.name),
                    Abi::Text(contract.symbol),
                    Abi::Addresses(&holders),
                    Abi::Word(U256::from(3u64)),
                ]);
                (DEV_COLLECTIBLE_BIN, args)
            }
            Standard::Erc1155 => {
                let ids = [U256::from(1u64), U256::from(2u64)];
                let args = abi::encode(&[
                    Abi::Addresses(&holders),
                    Abi::Words(&ids),
                    Abi::Word(U256::from(100u64)),
                ]);
                (DEV_MULTI_TOKEN_BIN, args)
            }
        };
        let tx = TxEnv::builder()
            .caller(holders[0])
            .kind(TxKind::Create)
            .data([hex_bytes(code.trim()).as_ref(), &args].concat().into())
            .gas_limit(DEPLOY_GAS_LIMIT)
            .gas_price(u128::from(GAS_PRICE_WEI))
            .nonce(nonce as u64)
            .chain_id(Some(CHAIN_ID))
            .build_fill();
        let mut evm = Context::mainnet()
            .with_db(&mut db)
            .modify_cfg_chained(|cfg| cfg.chain_id = CHAIN_ID)
            .modify_block_chained(|block| {
                block.basefee = GAS_PRICE_WEI;
                block.gas_limit = BLOCK_GAS_LIMIT;
            })
            .build_mainnet();
        let outcome = evm.transact(tx).expect("the devnet contracts deploy");
        drop(evm);
        assert!(outcome.result.is_success(), "{} deploys", contract.symbol);
        let deployed = outcome.result.created_address();
        assert_eq!(
            deployed.map(|a| a.to_checksum(None)).as_deref(),
            Some(contract.address),
            "{} deploys at its fixed address",
            contract.symbol
        );
        db.commit(outcome.state);
    }
    db
}

impl Ledger for Db {
    fn genesis() -> Self {
        genesis()
    }

    fn run(
        &mut self,
        actions: &[PipelineAction],
        expires_at: i64,
        now: i64,
    ) -> Result<Run, ConversionError> {
        run(self, actions, expires_at, now)
    }
}

/// Executes `actions` in order on `db`, committing each one's changes, and describes it.
fn run(
    db: &mut Db,
    actions: &[PipelineAction],
    expires_at: i64,
    now: i64,
) -> Result<Run, ConversionError> {
    let mut guards = Guards::default();
    let mut balance_changes = Vec::new();
    let mut fees = Vec::new();
    let mut logs = Vec::new();
    let mut warnings = Vec::new();
    let mut decoded = Decoded::default();
    let mut transactions = Vec::new();
    let mut gas_units: u64 = 0;
    for action in actions {
        let PipelineAction::Evm {
            chain_id,
            data,
            from,
            gas_limit,
            step,
            to,
            value,
            ..
        } = action
        else {
            guards.known_chain = Some("only the EVM devnet is simulated here".to_owned());
            continue;
        };
        let step = step.get();
        if chain_id.get() != CHAIN_ID {
            guards.known_chain = Some(format!("step {step}: unknown chain {chain_id}"));
            continue;
        }
        let (Ok(caller), Ok(target)) = (Address::from_str(from), Address::from_str(to)) else {
            guards.succeeded = Some(format!("step {step}: malformed address"));
            continue;
        };
        if target == Address::ZERO {
            guards.zero_address = Some(format!("step {step} sends to the zero address"));
            warnings.push(format!(
                "step {step} sends to the zero address, where value is lost"
            ));
        }
        let value = U256::from_str(value).unwrap_or_default();
        let input = hex_bytes(data);
        let before = db.basic_ref(caller).ok().flatten().unwrap_or_default();
        let gas_limit = gas_limit
            .as_ref()
            .and_then(|g| g.parse().ok())
            .unwrap_or(DEFAULT_GAS_LIMIT);
        let tx = TxEnv::builder()
            .caller(caller)
            .kind(TxKind::Call(target))
            .value(value)
            .data(input.clone())
            .gas_limit(gas_limit)
            .gas_price(u128::from(GAS_PRICE_WEI))
            .nonce(before.nonce)
            .chain_id(Some(CHAIN_ID))
            .build_fill();
        let mut evm = Context::mainnet()
            .with_db(&mut *db)
            .modify_cfg_chained(|cfg| cfg.chain_id = CHAIN_ID)
            .modify_block_chained(|block| {
                block.basefee = GAS_PRICE_WEI;
                block.gas_limit = BLOCK_GAS_LIMIT;
                block.number = U256::from(1u64);
                block.timestamp = U256::from(now.max(0) as u64);
            })
            .build_mainnet();
        let outcome = match evm.transact(tx) {
            Ok(outcome) => outcome,
            Err(error) => {
                let message = format!("step {step}: {error}");
                if message.contains("funds") || message.contains("balance") {
                    guards.sufficient_balance = Some(message);
                } else {
                    guards.succeeded = Some(message);
                }
                continue;
            }
        };
        drop(evm);
        let gas_used = outcome.result.tx_gas_used();
        gas_units += gas_used;
        let fee = U256::from(gas_used) * U256::from(GAS_PRICE_WEI);
        if !outcome.result.is_success() {
            guards.succeeded = Some(format!("step {step}: the transaction reverted"));
        }
        for log in outcome.result.logs() {
            decoded.log(log, step)?;
            let topics: Vec<String> = log.data.topics().iter().map(|t| t.to_string()).collect();
            let entry = PipelineLog::builder()
                .address(log.address.to_checksum(None))
                .topics(topics)
                .data(log.data.data.to_string())
                .chain_id(Some(CHAIN_ID as i64))
                .step(NonZeroU64::new(step));
            logs.push(entry.try_into()?);
        }
        // Native value deltas, fee excluded, ordered by address for a stable result.
        let mut deltas = BTreeMap::new();
        for (address, account) in &outcome.state {
            let pre = db
                .basic_ref(*address)
                .ok()
                .flatten()
                .unwrap_or_default()
                .balance;
            let mut post = account.info.balance;
            if *address == caller {
                post += fee;
            }
            if post != pre {
                deltas.insert(*address, (pre, post));
            }
        }
        for (address, (pre, post)) in &deltas {
            let (amount, direction, counterparty) = if post > pre {
                (post - pre, Direction::In, caller)
            } else {
                (pre - post, Direction::Out, target)
            };
            let change = PipelineBalanceChange::builder()
                .asset("native")
                .amount(amount.to_string())
                .account(address.to_checksum(None))
                .direction(direction)
                .symbol(Some("ETH".to_owned()))
                .decimals(Some(18))
                .chain_id(Some(CHAIN_ID as i64))
                .standard(ChangeStandard::Native)
                .counterparty(counterparty.to_checksum(None))
                .step(NonZeroU64::new(step));
            balance_changes.push(change.try_into()?);
        }
        let gas = PipelineFeeEstimate::builder()
            .asset("native")
            .amount(fee.to_string())
            .account(caller.to_checksum(None))
            .symbol(Some("ETH".to_owned()))
            .decimals(Some(18))
            .chain_id(Some(CHAIN_ID as i64))
            .kind(Some("gas".to_owned()));
        fees.push(gas.try_into()?);
        let id = keccak256(
            [
                &CHAIN_ID.to_be_bytes()[..],
                caller.as_slice(),
                &before.nonce.to_be_bytes(),
                target.as_slice(),
                &value.to_be_bytes::<32>(),
                &input,
            ]
            .concat(),
        );
        transactions.push((step, id.to_string()));
        db.commit(outcome.state);
    }
    warnings.extend(decoded.warnings);
    balance_changes.extend(decoded.balance_changes);
    let approvals = decoded.approvals;
    let unlimited = approvals.iter().any(|a| a.unlimited == Some(true));
    let guards = guards.results(
        unlimited.then(|| "a spender may move every token of the account".to_owned()),
        expires_at,
        now,
    )?;
    let gas = PipelineGasEstimate::builder()
        .units(gas_units.to_string())
        .price_wei(GAS_PRICE_WEI.to_string())
        .native_cost((U256::from(gas_units) * U256::from(GAS_PRICE_WEI)).to_string())
        .try_into()?;
    let observed = Observed {
        balance_changes,
        approvals,
        fees,
        logs,
        warnings,
        gas: Some(gas),
    };
    Ok(Run {
        simulation: simulation(observed, guards)?,
        transactions,
    })
}

fn hex_bytes(text: &str) -> Bytes {
    Bytes::from_str(text).unwrap_or_default()
}
