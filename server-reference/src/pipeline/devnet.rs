//! The EVM devnet behind simulation and custody: chain 31337 in memory, executed with `revm`,
//! with the ten well-known development accounts funded. Simulations run on a copy of the state;
//! a commit applies the copy only once its simulation passed and the commit is recorded
//! durably. On start, the committed actions are replayed in order, so the state survives
//! restarts.

use std::collections::BTreeMap;
use std::str::FromStr;

use intent_models::{ErrorCode, PipelineAction, PipelineBuild, PipelineSimulation};
use revm::context::TxEnv;
use revm::database::{CacheDB, EmptyDB};
use revm::primitives::{Address, Bytes, TxKind, U256, keccak256};
use revm::state::AccountInfo;
use revm::{Context, DatabaseCommit, DatabaseRef, ExecuteEvm, MainBuilder, MainContext};
use serde_json::{Value, json};

use crate::error::ApiError;
use crate::store::{self, Store};

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

/// Seconds before `expiresAt` under which the expiry guard warns.
const EXPIRY_WARNING_SECS: i64 = 60;

type Db = CacheDB<EmptyDB>;

/// The devnet state, shared by simulations and commits.
pub struct Devnet {
    state: tokio::sync::Mutex<Db>,
}

/// What a commit did.
pub struct Committed {
    /// The re-simulation that admitted (or refused) the Build.
    pub simulation: PipelineSimulation,
    /// The transaction id of each step, when it was committed.
    pub transactions: Vec<(u64, String)>,
}

impl Devnet {
    /// The genesis state with every commit recorded in `store` replayed on it.
    pub async fn replay(store: &dyn Store) -> Result<Self, store::Error> {
        let mut db = genesis();
        for actions in store.committed_actions().await? {
            match serde_json::from_str::<Vec<PipelineAction>>(&actions) {
                Ok(actions) => {
                    run(&mut db, &actions, i64::MAX, 0);
                }
                Err(error) => tracing::error!(%error, "a committed Build's actions do not parse"),
            }
        }
        Ok(Self {
            state: tokio::sync::Mutex::new(db),
        })
    }

    /// Simulates `actions` against the current state, leaving it unchanged.
    pub async fn simulate(
        &self,
        actions: &[PipelineAction],
        expires_at: i64,
        now: i64,
    ) -> PipelineSimulation {
        let mut db = self.state.lock().await.clone();
        run(&mut db, actions, expires_at, now).simulation
    }

    /// Re-simulates `build` and, when it passes, records the commit in `store` and applies it.
    pub async fn commit(
        &self,
        store: &dyn Store,
        build: &PipelineBuild,
        owner: &str,
        now: i64,
    ) -> Result<Committed, ApiError> {
        let mut state = self.state.lock().await;
        let mut db = state.clone();
        let run = run(&mut db, &build.actions, build.expires_at, now);
        if run.simulation.status != intent_models::PipelineSimulationStatus::Passed {
            return Ok(Committed {
                simulation: run.simulation,
                transactions: Vec::new(),
            });
        }
        let actions = serde_json::to_string(&build.actions).expect("actions serialize");
        if !store
            .record_commit(&build.digest, owner, &actions, now)
            .await?
        {
            return Err(ApiError::new(
                ErrorCode::BuildInvalid,
                "this Build was committed already",
            ));
        }
        *state = db;
        Ok(Committed {
            simulation: run.simulation,
            transactions: run.transactions,
        })
    }

    /// The native balance of `address`, in wei.
    pub async fn balance(&self, address: &str) -> Option<U256> {
        let address = Address::from_str(address).ok()?;
        let state = self.state.lock().await;
        Some(state.basic_ref(address).ok()??.balance)
    }
}

/// An ERC-20 of the devnet, deployed at genesis.
pub struct Token {
    /// Its address (fixed: the deployer's first nonces).
    pub address: &'static str,
    /// Its symbol.
    pub symbol: &'static str,
    /// Its name.
    pub name: &'static str,
    /// Its decimals.
    pub decimals: u8,
}

/// The ERC-20 tokens (`contracts/DevToken.sol`), deployed in this order by the first funded
/// account, each holder getting 1,000,000 whole tokens.
pub const TOKENS: [Token; 2] = [
    Token {
        address: "0x5FbDB2315678afecb367f032d93F642f64180aa3",
        symbol: "USDC",
        name: "USD Coin",
        decimals: 6,
    },
    Token {
        address: "0xe7f1725E7734CE288F8367e1Bb143E90bb3F0512",
        symbol: "DAI",
        name: "Dai Stablecoin",
        decimals: 18,
    },
];

/// The token at `address`, if the devnet has one there.
pub fn token(address: &str) -> Option<&'static Token> {
    TOKENS
        .iter()
        .find(|t| t.address.eq_ignore_ascii_case(address))
}

/// Creation bytecode of `contracts/DevToken.sol`, rebuilt by `contracts/build.sh`.
const DEV_TOKEN_BIN: &str = include_str!("../../contracts/DevToken.bin");

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
    let code = hex_bytes(DEV_TOKEN_BIN.trim());
    for (nonce, token) in TOKENS.iter().enumerate() {
        let supply = U256::from(1_000_000u64) * U256::from(10u64).pow(U256::from(token.decimals));
        let args = constructor_args(token, &holders, supply);
        let tx = TxEnv::builder()
            .caller(holders[0])
            .kind(TxKind::Create)
            .data([code.as_ref(), &args].concat().into())
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
        let outcome = evm.transact(tx).expect("the devnet tokens deploy");
        drop(evm);
        let deployed = outcome.result.created_address();
        assert_eq!(
            deployed.map(|a| a.to_checksum(None)).as_deref(),
            Some(token.address),
            "token {} deploys at its fixed address",
            token.symbol
        );
        db.commit(outcome.state);
    }
    db
}

/// ABI encoding of `(string name, string symbol, uint8 decimals, address[] holders, uint256
/// supplyEach)`.
fn constructor_args(token: &Token, holders: &[Address], supply: U256) -> Vec<u8> {
    fn word(value: U256) -> [u8; 32] {
        value.to_be_bytes::<32>()
    }
    fn text(value: &str) -> Vec<u8> {
        let mut out = word(U256::from(value.len())).to_vec();
        out.extend_from_slice(value.as_bytes());
        out.resize(32 + value.len().div_ceil(32) * 32, 0);
        out
    }
    let name = text(token.name);
    let symbol = text(token.symbol);
    let mut list = word(U256::from(holders.len())).to_vec();
    for holder in holders {
        list.extend_from_slice(&[0u8; 12]);
        list.extend_from_slice(holder.as_slice());
    }
    let head = 5 * 32;
    let mut out = Vec::new();
    out.extend_from_slice(&word(U256::from(head)));
    out.extend_from_slice(&word(U256::from(head + name.len())));
    out.extend_from_slice(&word(U256::from(token.decimals)));
    out.extend_from_slice(&word(U256::from(head + name.len() + symbol.len())));
    out.extend_from_slice(&word(supply));
    out.extend(name);
    out.extend(symbol);
    out.extend(list);
    out
}

/// A simulation and the transaction ids of a run.
struct Run {
    simulation: PipelineSimulation,
    transactions: Vec<(u64, String)>,
}

/// Guards, in the order they are reported.
#[derive(Default)]
struct Guards {
    known_chain: Option<String>,
    zero_address: Option<String>,
    sufficient_balance: Option<String>,
    succeeded: Option<String>,
}

/// Executes `actions` in order on `db`, committing each one's changes, and describes it.
fn run(db: &mut Db, actions: &[PipelineAction], expires_at: i64, now: i64) -> Run {
    let mut guards = Guards::default();
    let mut balance_changes = Vec::new();
    let mut fees = Vec::new();
    let mut logs = Vec::new();
    let mut warnings = Vec::new();
    let mut approvals = Vec::new();
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
            decode_erc20(
                log,
                step,
                &mut balance_changes,
                &mut approvals,
                &mut warnings,
            );
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
    let mut guard_list = vec![
        guard("known_chain", guards.known_chain, "failed"),
        guard("zero_address", guards.zero_address, "failed"),
        guard("sufficient_balance", guards.sufficient_balance, "failed"),
        guard("simulation_succeeded", guards.succeeded, "failed"),
    ];
    let unlimited = approvals.iter().any(|a| a["unlimited"] == true);
    guard_list.push(guard(
        "unlimited_approval",
        unlimited.then(|| "a spender may move every token of the account".to_owned()),
        "warning",
    ));
    let left = expires_at.saturating_sub(now);
    guard_list.push(json!({
        "name": "expiry_window",
        "status": if left <= 0 { "failed" } else if left < EXPIRY_WARNING_SECS { "warning" } else { "passed" },
        "message": format!("{} seconds left before expiresAt", left.max(0)),
    }));
    let passed = guard_list.iter().all(|g| g["status"] != "failed");
    let simulation = json!({
        "status": if passed { "passed" } else { "failed" },
        "balanceChanges": balance_changes,
        "approvals": approvals,
        "fees": fees,
        "warnings": warnings,
        "guards": guard_list,
        "gas": {
            "units": gas_units.to_string(),
            "priceWei": GAS_PRICE_WEI.to_string(),
            "nativeCost": (U256::from(gas_units) * U256::from(GAS_PRICE_WEI)).to_string(),
        },
        "logs": logs,
    });
    Run {
        simulation: serde_json::from_value(simulation).expect("a simulation matches its model"),
        transactions,
    }
}

/// `Transfer(address,address,uint256)`.
const TRANSFER_TOPIC: &str = "0xddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef";
/// `Approval(address,address,uint256)`.
const APPROVAL_TOPIC: &str = "0x8c5be1e5ebec7d5bd14f71427d1e84f3dd0314c0f7b2291e5b200ac8c7c3b925";

/// Balance changes and approvals of an ERC-20 log: `Transfer` and `Approval` with three topics
/// (ERC-721 shares topic0 with a fourth, indexed token id).
fn decode_erc20(
    log: &revm::primitives::Log,
    step: u64,
    balance_changes: &mut Vec<Value>,
    approvals: &mut Vec<Value>,
    warnings: &mut Vec<String>,
) {
    let topics = log.data.topics();
    if topics.len() != 3 {
        return;
    }
    let asset = log.address.to_checksum(None);
    let (symbol, name, decimals) = match token(&asset) {
        Some(t) => (Some(t.symbol), Some(t.name), Some(t.decimals)),
        None => (None, None, None),
    };
    let party = |topic: &revm::primitives::B256| Address::from_word(*topic).to_checksum(None);
    let amount = U256::from_be_slice(&log.data.data);
    let (first, second) = (party(&topics[1]), party(&topics[2]));
    match topics[0].to_string().as_str() {
        TRANSFER_TOPIC => {
            for (account, direction, counterparty) in
                [(&first, "out", &second), (&second, "in", &first)]
            {
                balance_changes.push(json!({
                    "asset": asset, "amount": amount.to_string(), "account": account,
                    "direction": direction, "symbol": symbol, "decimals": decimals,
                    "chainId": CHAIN_ID, "standard": "erc20", "name": name,
                    "counterparty": counterparty, "step": step,
                }));
            }
        }
        APPROVAL_TOPIC => {
            let unlimited = amount == U256::MAX;
            if unlimited {
                warnings.push(format!(
                    "step {step} approves {second} to spend every {} of {first}",
                    symbol.unwrap_or("token")
                ));
            }
            approvals.push(json!({
                "account": first, "spender": second, "asset": asset, "kind": "allowance",
                "standard": "erc20", "amount": amount.to_string(), "unlimited": unlimited,
                "symbol": symbol, "name": name, "decimals": decimals, "chainId": CHAIN_ID,
                "step": step,
            }));
        }
        _ => {}
    }
}

fn guard(name: &str, failure: Option<String>, status: &str) -> Value {
    match failure {
        Some(message) => json!({ "name": name, "status": status, "message": message }),
        None => json!({ "name": name, "status": "passed" }),
    }
}

fn hex_bytes(text: &str) -> Bytes {
    Bytes::from_str(text).unwrap_or_default()
}
