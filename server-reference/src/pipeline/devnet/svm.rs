//! The SVM devnet: cluster `localnet` executed with `litesvm`, with the System Program and the
//! SPL Token and Associated Token Account programs, three funded accounts and two SPL mints.
//! Fees, logs and balance changes come from the execution's metadata and from the accounts
//! before and after each transaction.

use std::collections::BTreeMap;
use std::num::NonZeroU64;
use std::str::FromStr;
use std::sync::{LazyLock, Mutex};

use base64::Engine;
use intent_models::error::ConversionError;
use intent_models::{
    PipelineAction, PipelineBalanceChange, PipelineBalanceChangeDirection as Direction,
    PipelineBalanceChangeStandard as Standard, PipelineFeeEstimate, PipelineLog, SvmInstruction,
};
use litesvm::LiteSVM;
use litesvm::types::FailedTransactionMetadata;
use sha2::{Digest, Sha512};
use solana_account::Account;
use solana_address::Address;
use solana_instruction::{AccountMeta, Instruction};
use solana_instruction_error::InstructionError;
use solana_message::Message;
use solana_signature::Signature;
use solana_transaction::Transaction;
use solana_transaction_error::TransactionError;

use super::{Ledger, Run};
use crate::pipeline::simulation::{Guards, Observed, simulation};

/// The cluster's name.
pub const CLUSTER: &str = "localnet";

/// The System Program.
pub const SYSTEM_PROGRAM: &str = "11111111111111111111111111111111";

/// The SPL Token program.
pub const TOKEN_PROGRAM: &str = "TokenkegQfeZyiNwAJbNbGKPFXCWuBvf9Ss623VQ5DA";

/// The SPL Associated Token Account program.
pub const ASSOCIATED_TOKEN_PROGRAM: &str = "ATokenGPvbdGVxr1b2hvZbsiqW5xWH25efTNsLJA8knL";

/// Lamports in one SOL.
pub const LAMPORTS_PER_SOL: u64 = 1_000_000_000;

/// The funded accounts, 1,000 SOL each, each with an associated token account of every mint.
pub const FUNDED_ACCOUNTS: [&str; 3] = [
    "9WzDXwBbmkg8ZTbNMqUxvQRAyrZzDsGYdLVL9zYtAWWM",
    "4Nd1mBQtrMJVYVfKf2PJy9NZUZdTAsp7D4xWLs4gDB4T",
    "HN7cABqLq46Es1jh92dQQisAq662SmxELLLsHHe4YWrH",
];

/// An SPL mint of the devnet, created at genesis without a mint authority.
pub struct Mint {
    /// Its address.
    pub address: &'static str,
    /// Its symbol.
    pub symbol: &'static str,
    /// Its decimals.
    pub decimals: u8,
    /// What each funded account holds, in whole tokens.
    pub balance: u64,
}

/// The SPL mints, at their mainnet addresses.
pub const MINTS: [Mint; 2] = [
    Mint {
        address: "EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1v",
        symbol: "USDC",
        decimals: 6,
        balance: 1_000_000,
    },
    Mint {
        address: "mSoLzYCxHdYgdzU16g5QSh3i5K3z3KZK7ytfqcJm7So",
        symbol: "mSOL",
        decimals: 9,
        balance: 1_000,
    },
];

/// The mint at `address`, if the devnet has one there.
pub fn mint(address: &str) -> Option<&'static Mint> {
    MINTS.iter().find(|m| m.address == address)
}

/// The associated token account of `owner` for `mint`.
pub fn associated_token_account(owner: &Address, mint: &Address) -> Address {
    let token_program = address(TOKEN_PROGRAM);
    Address::find_program_address(
        &[owner.as_ref(), token_program.as_ref(), mint.as_ref()],
        &address(ASSOCIATED_TOKEN_PROGRAM),
    )
    .0
}

/// A base58 address the devnet's own tables hold.
fn address(text: &str) -> Address {
    Address::from_str(text).expect("the devnet's addresses are base58")
}

/// Size of an SPL Token mint account.
const MINT_LEN: usize = 82;

/// Size of an SPL Token account.
const TOKEN_ACCOUNT_LEN: usize = 165;

/// The cluster's state.
#[derive(Clone)]
pub struct Cluster {
    svm: LiteSVM,
}

/// An initialized mint (SPL Token layout) without mint or freeze authority.
fn mint_data(supply: u64, decimals: u8) -> Vec<u8> {
    let mut data = vec![0u8; MINT_LEN];
    data[36..44].copy_from_slice(&supply.to_le_bytes());
    data[44] = decimals;
    data[45] = 1; // is_initialized
    data
}

/// An initialized token account (SPL Token layout) without delegate or close authority.
fn token_account_data(mint: &Address, owner: &Address, amount: u64) -> Vec<u8> {
    let mut data = vec![0u8; TOKEN_ACCOUNT_LEN];
    data[..32].copy_from_slice(mint.as_ref());
    data[32..64].copy_from_slice(owner.as_ref());
    data[64..72].copy_from_slice(&amount.to_le_bytes());
    data[108] = 1; // AccountState::Initialized
    data
}

/// What an account holds: lamports, and the tokens of a token account.
#[derive(Clone, Copy, Default)]
struct Holding {
    lamports: u64,
    tokens: Option<Tokens>,
}

/// The mint, owner and amount of a token account.
#[derive(Clone, Copy)]
struct Tokens {
    mint: Address,
    owner: Address,
    amount: u64,
}

/// The cluster at genesis, made once per process and copied for each server: loading its
/// programs compiles them, which every server of a test process would otherwise repeat.
static GENESIS: LazyLock<Mutex<Cluster>> = LazyLock::new(|| Mutex::new(Cluster::made()));

impl Cluster {
    /// What each of `keys` holds now.
    fn holdings(&self, keys: &[Address]) -> Vec<Holding> {
        let token_program = address(TOKEN_PROGRAM);
        keys.iter()
            .map(|key| {
                let Some(account) = self.svm.get_account(key) else {
                    return Holding::default();
                };
                let tokens = (account.owner == token_program
                    && account.data.len() == TOKEN_ACCOUNT_LEN)
                    .then(|| Tokens {
                        mint: Address::try_from(&account.data[..32]).unwrap_or_default(),
                        owner: Address::try_from(&account.data[32..64]).unwrap_or_default(),
                        amount: u64::from_le_bytes(
                            account.data[64..72].try_into().expect("eight bytes"),
                        ),
                    });
                Holding {
                    lamports: account.lamports,
                    tokens,
                }
            })
            .collect()
    }

    /// The state at genesis: programs, funded accounts, mints and token accounts.
    fn made() -> Self {
        // The devnet holds no keys: signatures are not verified, and each transaction carries a
        // derived id in their place (see `transaction_id`).
        let mut svm = LiteSVM::new()
            .with_sigverify(false)
            .with_transaction_history(0);
        let token_program = address(TOKEN_PROGRAM);
        let rent = |len| svm.minimum_balance_for_rent_exemption(len);
        let (mint_rent, account_rent) = (rent(MINT_LEN), rent(TOKEN_ACCOUNT_LEN));
        let token_owned = |data: Vec<u8>, lamports| Account {
            lamports,
            data,
            owner: token_program,
            ..Account::default()
        };
        let mut set = |at: Address, account: Account| {
            svm.set_account(at, account)
                .expect("genesis accounts are valid");
        };
        for owner in FUNDED_ACCOUNTS.map(address) {
            set(
                owner,
                Account {
                    lamports: 1_000 * LAMPORTS_PER_SOL,
                    owner: address(SYSTEM_PROGRAM),
                    ..Account::default()
                },
            );
        }
        for mint in &MINTS {
            let at = address(mint.address);
            let each = mint.balance * 10u64.pow(mint.decimals.into());
            let supply = each * FUNDED_ACCOUNTS.len() as u64;
            set(at, token_owned(mint_data(supply, mint.decimals), mint_rent));
            for owner in FUNDED_ACCOUNTS.map(address) {
                let data = token_account_data(&at, &owner, each);
                set(
                    associated_token_account(&owner, &at),
                    token_owned(data, account_rent),
                );
            }
        }
        Self { svm }
    }
}

impl Ledger for Cluster {
    fn genesis() -> Self {
        GENESIS
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    fn run(
        &mut self,
        actions: &[PipelineAction],
        expires_at: i64,
        now: i64,
    ) -> Result<Run, ConversionError> {
        let mut guards = Guards::default();
        let mut balance_changes = Vec::new();
        let mut fees = Vec::new();
        let mut logs = Vec::new();
        let mut warnings = Vec::new();
        let mut transactions = Vec::new();
        for action in actions {
            let PipelineAction::Svm {
                cluster,
                fee_payer,
                instructions,
                step,
                ..
            } = action
            else {
                guards.known_chain = Some("only the SVM devnet is simulated here".to_owned());
                continue;
            };
            let step = step.get();
            if cluster.as_str() != CLUSTER {
                guards.known_chain = Some(format!("step {step}: unknown cluster {}", **cluster));
                continue;
            }
            let instructions: Vec<Instruction> =
                match instructions.iter().map(instruction).collect() {
                    Ok(instructions) => instructions,
                    Err(message) => {
                        guards.succeeded = Some(format!("step {step}: {message}"));
                        continue;
                    }
                };
            let Ok(payer) = Address::from_str(fee_payer) else {
                guards.succeeded = Some(format!("step {step}: malformed fee payer"));
                continue;
            };
            let tx = self.transaction(action, &instructions, &payer);
            let zero = Address::default();
            if instructions
                .iter()
                .flat_map(|ix| &ix.accounts)
                .any(|meta| meta.is_writable && meta.pubkey == zero)
            {
                guards.zero_address = Some(format!("step {step} sends to the zero address"));
                warnings.push(format!(
                    "step {step} sends to the zero address, where value is lost"
                ));
            }
            let keys = tx.message.account_keys.clone();
            let before = self.holdings(&keys);
            let outcome = self.svm.send_transaction(tx);
            self.svm.expire_blockhash();
            let meta = match outcome {
                Ok(meta) => meta,
                Err(FailedTransactionMetadata { err, meta }) => {
                    logs.extend(program_logs(&meta.logs, step)?);
                    let message = format!("step {step}: {err}");
                    if short_of_funds(&err) {
                        guards.sufficient_balance = Some(message);
                    } else {
                        guards.succeeded = Some(message);
                    }
                    continue;
                }
            };
            let after = self.holdings(&keys);
            balance_changes.extend(changes(&keys, &before, &after, &payer, meta.fee, step)?);
            let fee = PipelineFeeEstimate::builder()
                .asset("native")
                .amount(meta.fee.to_string())
                .account(payer.to_string())
                .symbol(Some("SOL".to_owned()))
                .decimals(Some(9))
                .cluster(Some(CLUSTER.to_owned()))
                .kind(Some("signature".to_owned()));
            fees.push(fee.try_into()?);
            logs.extend(program_logs(&meta.logs, step)?);
            transactions.push((step, meta.signature.to_string()));
        }
        let guards = guards.results(None, expires_at, now)?;
        let observed = Observed {
            balance_changes,
            approvals: Vec::new(),
            fees,
            logs,
            warnings,
            gas: None,
        };
        Ok(Run {
            simulation: simulation(observed, guards)?,
            transactions,
        })
    }
}

impl Cluster {
    /// The transaction of `action` at the latest blockhash. The devnet holds no keys, so the
    /// fee payer's signature is replaced by an id: SHA-512 of the blockhash and the action's
    /// JSON, unique because every transaction moves the blockhash on.
    fn transaction(
        &self,
        action: &PipelineAction,
        instructions: &[Instruction],
        payer: &Address,
    ) -> Transaction {
        let blockhash = self.svm.latest_blockhash();
        let message = Message::new_with_blockhash(instructions, Some(payer), &blockhash);
        let mut id = Sha512::new();
        id.update(blockhash.as_ref());
        id.update(serde_json::to_vec(action).expect("an action serializes"));
        let id: [u8; 64] = id.finalize().into();
        let mut signatures =
            vec![Signature::default(); usize::from(message.header.num_required_signatures)];
        if let Some(first) = signatures.first_mut() {
            *first = Signature::from(id);
        }
        Transaction {
            signatures,
            message,
        }
    }
}

/// An instruction of an action, or why it is malformed.
fn instruction(ix: &SvmInstruction) -> Result<Instruction, String> {
    let program_id = Address::from_str(&ix.program_id)
        .map_err(|_| format!("program id {} is not an address", *ix.program_id))?;
    let accounts = ix
        .accounts
        .iter()
        .map(|meta| {
            let pubkey = Address::from_str(&meta.pubkey)
                .map_err(|_| format!("account {} is not an address", *meta.pubkey))?;
            Ok(AccountMeta {
                pubkey,
                is_signer: meta.is_signer,
                is_writable: meta.is_writable,
            })
        })
        .collect::<Result<_, String>>()?;
    let data = base64::engine::general_purpose::STANDARD
        .decode(ix.data.as_bytes())
        .map_err(|e| format!("instruction data is not base64: {e}"))?;
    Ok(Instruction {
        program_id,
        accounts,
        data,
    })
}

/// Whether a failure comes from a balance too low: for the fee, for rent, or a transfer of
/// more than the account holds (custom error 1 of both the System and the Token programs).
fn short_of_funds(err: &TransactionError) -> bool {
    matches!(
        err,
        TransactionError::InsufficientFundsForFee
            | TransactionError::AccountNotFound
            | TransactionError::InsufficientFundsForRent { .. }
            | TransactionError::InstructionError(_, InstructionError::Custom(1))
    )
}

/// Program log lines, each attributed to the program running when it was written.
fn program_logs(lines: &[String], step: u64) -> Result<Vec<PipelineLog>, ConversionError> {
    let mut running: Vec<String> = Vec::new();
    lines
        .iter()
        .map(|line| {
            let mut words = line.split(' ');
            let named = match (words.next(), words.next(), words.next()) {
                (Some("Program"), Some(id), Some(what)) if Address::from_str(id).is_ok() => {
                    Some((id.to_owned(), what))
                }
                _ => None,
            };
            let address = match named {
                Some((id, "invoke")) => {
                    running.push(id.clone());
                    id
                }
                Some((id, "success" | "failed")) => {
                    running.pop();
                    id
                }
                Some((id, _)) => id,
                None => running.last().cloned().unwrap_or_default(),
            };
            PipelineLog::builder()
                .address(address)
                .topics(Vec::<String>::new())
                .data(line.clone())
                .cluster(Some(CLUSTER.to_owned()))
                .step(NonZeroU64::new(step))
                .try_into()
        })
        .collect()
}

/// The balance changes between `before` and `after`: lamports (the fee left out) and tokens,
/// each with the account on the other side of the largest opposite change of its asset.
fn changes(
    keys: &[Address],
    before: &[Holding],
    after: &[Holding],
    payer: &Address,
    fee: u64,
    step: u64,
) -> Result<Vec<PipelineBalanceChange>, ConversionError> {
    // (asset, account) -> signed delta, in base units.
    let mut deltas: BTreeMap<(Option<Address>, Address), i128> = BTreeMap::new();
    for ((key, pre), post) in keys.iter().zip(before).zip(after) {
        let mut lamports = i128::from(post.lamports) - i128::from(pre.lamports);
        if key == payer {
            lamports += i128::from(fee);
        }
        *deltas.entry((None, *key)).or_default() += lamports;
        for (tokens, sign) in [(pre.tokens, -1), (post.tokens, 1)] {
            if let Some(t) = tokens {
                *deltas.entry((Some(t.mint), t.owner)).or_default() += sign * i128::from(t.amount);
            }
        }
    }
    deltas.retain(|_, delta| *delta != 0);
    let counterparty = |asset: &Option<Address>, positive: bool| {
        deltas
            .iter()
            .filter(|((a, _), d)| a == asset && (**d > 0) != positive)
            .max_by_key(|(_, d)| d.unsigned_abs())
            .map(|((_, account), _)| account.to_string())
    };
    deltas
        .iter()
        .map(|((asset, account), delta)| {
            let (asset_name, known, standard) = match asset {
                None => (
                    "native".to_owned(),
                    Some(("SOL", 9)),
                    Some(Standard::Native),
                ),
                Some(mint_address) => {
                    let known = mint(&mint_address.to_string()).map(|m| (m.symbol, m.decimals));
                    (mint_address.to_string(), known, None)
                }
            };
            PipelineBalanceChange::builder()
                .asset(asset_name)
                .amount(delta.unsigned_abs().to_string())
                .account(account.to_string())
                .direction(if *delta > 0 {
                    Direction::In
                } else {
                    Direction::Out
                })
                .cluster(Some(CLUSTER.to_owned()))
                .counterparty(counterparty(asset, *delta > 0))
                .step(NonZeroU64::new(step))
                .symbol(known.map(|(symbol, _)| symbol.to_owned()))
                .decimals(known.map(|(_, decimals)| i64::from(decimals)))
                .standard(standard)
                .try_into()
        })
        .collect()
}
