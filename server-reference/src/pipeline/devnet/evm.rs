//! The EVM devnet: chain 31337 executed with `revm`, with the ten well-known development
//! accounts funded and the token contracts of `contracts/` deployed at genesis.

use std::collections::BTreeMap;
use std::str::FromStr;

use intent_models::{PipelineAction, PipelineGasEstimate};
use revm::context::TxEnv;
use revm::database::{CacheDB, EmptyDB};
use revm::primitives::{Address, Bytes, TxKind, U256, keccak256};
use revm::state::AccountInfo;
use revm::{Context, DatabaseCommit, DatabaseRef, ExecuteEvm, MainBuilder, MainContext};
use serde_json::{Value, json};

use super::{Guards, Ledger, Observed, Run, simulation};
use crate::pipeline::abi::{self, Abi};

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

/// A token standard of the devnet's contracts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Standard {
    /// Fungible tokens.
    Erc20,
    /// Non-fungible tokens.
    Erc721,
    /// Multi-tokens.
    Erc1155,
}

impl Standard {
    /// The name used in simulations.
    pub fn as_str(self) -> &'static str {
        match self {
            Standard::Erc20 => "erc20",
            Standard::Erc721 => "erc721",
            Standard::Erc1155 => "erc1155",
        }
    }
}

/// A token contract of the devnet, deployed at genesis.
pub struct Contract {
    /// Its address (fixed: the deployer's first nonces).
    pub address: &'static str,
    /// Its symbol.
    pub symbol: &'static str,
    /// Its name.
    pub name: &'static str,
    /// Its decimals, for ERC-20.
    pub decimals: Option<u8>,
    /// Its standard.
    pub standard: Standard,
}

/// The token contracts (`contracts/*.sol`), deployed in this order by the first funded account.
/// Every funded account holds 1,000,000 of each ERC-20, three ERC-721 tokens (account `i` owns
/// ids `3i+1` to `3i+3`) and 100 of ERC-1155 ids 1 and 2.
pub const CONTRACTS: [Contract; 4] = [
    Contract {
        address: "0x5FbDB2315678afecb367f032d93F642f64180aa3",
        symbol: "USDC",
        name: "USD Coin",
        decimals: Some(6),
        standard: Standard::Erc20,
    },
    Contract {
        address: "0xe7f1725E7734CE288F8367e1Bb143E90bb3F0512",
        symbol: "DAI",
        name: "Dai Stablecoin",
        decimals: Some(18),
        standard: Standard::Erc20,
    },
    Contract {
        address: "0x9fE46736679d2D9a65F0992F2272dE9f3c7fa6e0",
        symbol: "DCOL",
        name: "Devnet Collectible",
        decimals: None,
        standard: Standard::Erc721,
    },
    Contract {
        address: "0xCf7Ed3AccA5a467e9e704C703E8D87F634fB0Fc9",
        symbol: "DITEM",
        name: "Devnet Items",
        decimals: None,
        standard: Standard::Erc1155,
    },
];

/// The contract at `address`, if the devnet has one there.
pub fn contract(address: &str) -> Option<&'static Contract> {
    CONTRACTS
        .iter()
        .find(|c| c.address.eq_ignore_ascii_case(address))
}

/// The devnet's ERC-20 whose symbol is `symbol` (any case).
pub fn erc20(symbol: &str) -> Option<&'static Contract> {
    CONTRACTS
        .iter()
        .find(|c| c.standard == Standard::Erc20 && c.symbol.eq_ignore_ascii_case(symbol))
}

/// Creation bytecode of the contracts, rebuilt by `contracts/build.sh`.
const DEV_TOKEN_BIN: &str = include_str!("../../../contracts/DevToken.bin");
const DEV_COLLECTIBLE_BIN: &str = include_str!("../../../contracts/DevCollectible.bin");
const DEV_MULTI_TOKEN_BIN: &str = include_str!("../../../contracts/DevMultiToken.bin");

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

    fn run(&mut self, actions: &[PipelineAction], expires_at: i64, now: i64) -> Run {
        run(self, actions, expires_at, now)
    }
}

/// Executes `actions` in order on `db`, committing each one's changes, and describes it.
fn run(db: &mut Db, actions: &[PipelineAction], expires_at: i64, now: i64) -> Run {
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
            decoded.log(log, step);
            logs.push(json!({
                "address": log.address.to_checksum(None),
                "topics": log.data.topics().iter().map(|t| t.to_string()).collect::<Vec<_>>(),
                "data": log.data.data.to_string(),
                "chainId": CHAIN_ID,
                "step": step,
            }));
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
                (post - pre, "in", caller)
            } else {
                (pre - post, "out", target)
            };
            balance_changes.push(json!({
                "asset": "native",
                "amount": amount.to_string(),
                "account": address.to_checksum(None),
                "direction": direction,
                "symbol": "ETH",
                "decimals": 18,
                "chainId": CHAIN_ID,
                "standard": "native",
                "counterparty": counterparty.to_checksum(None),
                "step": step,
            }));
        }
        fees.push(json!({
            "asset": "native",
            "amount": fee.to_string(),
            "account": caller.to_checksum(None),
            "symbol": "ETH",
            "decimals": 18,
            "chainId": CHAIN_ID,
            "kind": "gas",
        }));
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
    let unlimited = approvals.iter().any(|a| a["unlimited"] == true);
    let guards = guards.results(
        unlimited.then(|| "a spender may move every token of the account".to_owned()),
        expires_at,
        now,
    );
    let gas = PipelineGasEstimate {
        units: Some(gas_units.to_string()),
        price_wei: Some(GAS_PRICE_WEI.to_string()),
        native_cost: Some((U256::from(gas_units) * U256::from(GAS_PRICE_WEI)).to_string()),
    };
    let observed = Observed {
        balance_changes,
        approvals,
        fees,
        logs,
        warnings,
        gas: Some(gas),
    };
    Run {
        simulation: simulation(observed, guards),
        transactions,
    }
}

/// `Transfer(address,address,uint256)`: ERC-20 with three topics, ERC-721 with four.
const TRANSFER_TOPIC: &str = "0xddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef";
/// `Approval(address,address,uint256)`: ERC-20 with three topics, ERC-721 with four.
const APPROVAL_TOPIC: &str = "0x8c5be1e5ebec7d5bd14f71427d1e84f3dd0314c0f7b2291e5b200ac8c7c3b925";
/// `ApprovalForAll(address,address,bool)`: ERC-721 and ERC-1155.
const APPROVAL_FOR_ALL_TOPIC: &str =
    "0x17307eab39ab6107e8899845ad3d59bd9653f200f220920489ca2b5937696c31";
/// `TransferSingle(address,address,address,uint256,uint256)`.
const TRANSFER_SINGLE_TOPIC: &str =
    "0xc3d58168c5ae7397731d063d5bbf3d657854427343f4c083240f7aacaa2d0f62";
/// `TransferBatch(address,address,address,uint256[],uint256[])`.
const TRANSFER_BATCH_TOPIC: &str =
    "0x4a39dc06d4c0dbc64b70af90fd698a233a518aa5d07e595d983b8c0526c8f7fb";

/// What the simulation reports, collected from logs.
#[derive(Default)]
struct Decoded {
    balance_changes: Vec<Value>,
    approvals: Vec<Value>,
    warnings: Vec<String>,
}

impl Decoded {
    /// Balance changes and approvals of a token log, told apart by topic0 and topic count.
    fn log(&mut self, log: &revm::primitives::Log, step: u64) {
        let topics = log.data.topics();
        let Some(topic0) = topics.first().map(|t| t.to_string()) else {
            return;
        };
        let asset = log.address.to_checksum(None);
        let known = contract(&asset);
        let party = |i: usize| Address::from_word(topics[i]).to_checksum(None);
        let word = |i: usize| {
            log.data
                .data
                .get(i * 32..(i + 1) * 32)
                .map_or(U256::ZERO, U256::from_be_slice)
        };
        let base = json!({
            "asset": asset,
            "symbol": known.map(|c| c.symbol),
            "name": known.map(|c| c.name),
            "chainId": CHAIN_ID,
            "step": step,
        });
        match (topic0.as_str(), topics.len()) {
            (TRANSFER_TOPIC, 3) => {
                let decimals = known.and_then(|c| c.decimals);
                self.transfer(
                    &base,
                    "erc20",
                    &party(1),
                    &party(2),
                    word(0),
                    None,
                    decimals,
                );
            }
            (TRANSFER_TOPIC, 4) => {
                let id = U256::from_be_bytes(topics[3].0);
                self.transfer(
                    &base,
                    "erc721",
                    &party(1),
                    &party(2),
                    U256::from(1u64),
                    Some(id),
                    None,
                );
            }
            (TRANSFER_SINGLE_TOPIC, 4) => {
                self.transfer(
                    &base,
                    "erc1155",
                    &party(2),
                    &party(3),
                    word(1),
                    Some(word(0)),
                    None,
                );
            }
            (TRANSFER_BATCH_TOPIC, 4) => {
                let array = |offset: U256| -> Vec<U256> {
                    let start = offset.to::<usize>() / 32;
                    let len = word(start).to::<usize>();
                    (0..len).map(|k| word(start + 1 + k)).collect()
                };
                let (ids, values) = (array(word(0)), array(word(1)));
                for (id, value) in ids.into_iter().zip(values) {
                    self.transfer(
                        &base,
                        "erc1155",
                        &party(2),
                        &party(3),
                        value,
                        Some(id),
                        None,
                    );
                }
            }
            (APPROVAL_TOPIC, 3) => {
                let amount = word(0);
                let unlimited = amount == U256::MAX;
                if unlimited {
                    self.warnings.push(format!(
                        "step {step} approves {} to spend every {} of {}",
                        party(2),
                        known.map_or("token", |c| c.symbol),
                        party(1)
                    ));
                }
                self.approve(
                    &base,
                    &party(1),
                    &party(2),
                    json!({
                        "kind": "allowance", "standard": "erc20", "amount": amount.to_string(),
                        "unlimited": unlimited, "decimals": known.and_then(|c| c.decimals),
                    }),
                );
            }
            (APPROVAL_TOPIC, 4) => {
                let id = U256::from_be_bytes(topics[3].0);
                self.approve(
                    &base,
                    &party(1),
                    &party(2),
                    json!({
                        "kind": "token", "standard": "erc721", "tokenId": id.to_string(),
                    }),
                );
            }
            (APPROVAL_FOR_ALL_TOPIC, 3) => {
                let approved = word(0) != U256::ZERO;
                let standard = known.map_or("erc721_or_erc1155", |c| c.standard.as_str());
                if approved {
                    self.warnings.push(format!(
                        "step {step} lets {} move every token of {} in {asset}",
                        party(2),
                        party(1)
                    ));
                }
                self.approve(
                    &base,
                    &party(1),
                    &party(2),
                    json!({
                        "kind": "operator", "standard": standard, "approved": approved,
                        "unlimited": approved,
                    }),
                );
            }
            _ => {}
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn transfer(
        &mut self,
        base: &Value,
        standard: &str,
        from: &str,
        to: &str,
        amount: U256,
        token_id: Option<U256>,
        decimals: Option<u8>,
    ) {
        for (account, direction, counterparty) in [(from, "out", to), (to, "in", from)] {
            let mut change = base.clone();
            change["amount"] = amount.to_string().into();
            change["account"] = account.into();
            change["direction"] = direction.into();
            change["counterparty"] = counterparty.into();
            change["standard"] = standard.into();
            change["decimals"] = json!(decimals);
            if let Some(id) = token_id {
                change["tokenId"] = id.to_string().into();
            }
            self.balance_changes.push(change);
        }
    }

    fn approve(&mut self, base: &Value, account: &str, spender: &str, fields: Value) {
        let mut approval = base.clone();
        approval["account"] = account.into();
        approval["spender"] = spender.into();
        if let (Value::Object(approval), Value::Object(fields)) = (&mut approval, fields) {
            approval.extend(fields);
        }
        self.approvals.push(approval);
    }
}

fn hex_bytes(text: &str) -> Bytes {
    Bytes::from_str(text).unwrap_or_default()
}
