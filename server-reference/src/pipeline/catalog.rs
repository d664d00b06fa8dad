//! The apps whose operations assemble actions, each operation with the JSON Schema of its input
//! (checked with the `jsonschema` crate before anything is assembled).

use std::str::FromStr;
use std::sync::LazyLock;

use intent_models::{ErrorCode, PipelineAction, PipelineChain};
use serde_json::{Map, Value, json};

use super::devnet::evm::{Contract, Standard};
use super::devnet::svm;
use crate::error::ApiError;

/// An app: a named set of operations on one chain.
pub struct App {
    /// The app name, `origin.app` of its Builds.
    pub name: &'static str,
    /// What it does.
    pub description: &'static str,
    /// The chain its actions run on.
    pub chain: PipelineChain,
    /// Its operations.
    pub operations: Vec<Operation>,
}

/// A JSON Schema with its compiled validator.
pub struct Schema {
    /// The schema as served in operation descriptors.
    pub json: Value,
    validator: jsonschema::Validator,
}

impl Schema {
    fn new(json: Value) -> Self {
        let validator =
            jsonschema::draft202012::new(&json).expect("the catalog's input schemas compile");
        Self { json, validator }
    }

    /// Checks `input` against the schema: 400 `validation_failed` with every error otherwise.
    pub fn check(&self, what: &str, input: &Value) -> Result<(), ApiError> {
        let errors: Vec<Value> = self
            .validator
            .iter_errors(input)
            .map(|e| json!({ "path": e.instance_path().to_string(), "message": e.to_string() }))
            .collect();
        if errors.is_empty() {
            return Ok(());
        }
        Err(ApiError::new(
            ErrorCode::ValidationFailed,
            format!("the input of {what} does not match its schema"),
        )
        .with_detail("errors", Value::Array(errors)))
    }
}

/// An operation that turns a checked input into actions.
pub struct Operation {
    /// The operation name.
    pub name: &'static str,
    /// The input's schema.
    pub input: Schema,
    assemble: fn(&Map<String, Value>, u64) -> Result<Assembled, ApiError>,
}

/// Actions assembled by an operation, and a title for people.
pub struct Assembled {
    /// The actions, numbered from the given step.
    pub actions: Vec<PipelineAction>,
    /// What they do, for the Build's summary.
    pub title: String,
}

impl Operation {
    fn new(
        name: &'static str,
        input_schema: Value,
        assemble: fn(&Map<String, Value>, u64) -> Result<Assembled, ApiError>,
    ) -> Self {
        Self {
            name,
            input: Schema::new(input_schema),
            assemble,
        }
    }

    /// Checks `input` against the input schema, then assembles its actions from `step` on.
    pub fn assemble(&self, input: &Map<String, Value>, step: u64) -> Result<Assembled, ApiError> {
        self.input.check(self.name, &Value::Object(input.clone()))?;
        (self.assemble)(input, step)
    }
}

impl App {
    /// The operation called `name`, or 404.
    pub fn operation(&self, name: &str) -> Result<&Operation, ApiError> {
        let what = format!("app {} has no operation", self.name);
        named(&self.operations, |op| op.name, name, &what)
    }
}

/// The item of `items` called `name`, or 404 saying `what` and the name.
fn named<'a, T>(
    items: &'a [T],
    name_of: fn(&T) -> &'static str,
    name: &str,
    what: &str,
) -> Result<&'a T, ApiError> {
    items
        .iter()
        .find(|item| name_of(item) == name)
        .ok_or_else(|| ApiError::new(ErrorCode::NotFound, format!("{what} {name}")))
}

/// Every app.
pub static APPS: LazyLock<Vec<App>> = LazyLock::new(|| {
    vec![
        App {
            name: "evm-assets",
            description: "Native, ERC-20, ERC-721 and ERC-1155 transfers and approvals on the EVM devnet.",
            chain: PipelineChain::Evm,
            operations: vec![
                Operation::new(
                    "native-transfer",
                    json!({
                        "type": "object",
                        "required": ["chainId", "from", "to", "amount"],
                        "properties": {
                            "chainId": { "type": "integer", "minimum": 1 },
                            "from": { "type": "string", "pattern": "^0x[0-9a-fA-F]{40}$" },
                            "to": { "type": "string", "pattern": "^0x[0-9a-fA-F]{40}$" },
                            "amount": {
                                "type": "string",
                                "description": "Amount of the native coin, in whole units (18 decimals).",
                                "pattern": "^[0-9]{1,40}(\\.[0-9]{1,18})?$"
                            }
                        },
                        "additionalProperties": false
                    }),
                    native_transfer,
                ),
                Operation::new(
                    "erc20-transfer",
                    json!({
                        "type": "object",
                        "required": ["chainId", "from", "token", "to", "amount"],
                        "properties": {
                            "chainId": { "type": "integer", "minimum": 1 },
                            "from": { "type": "string", "pattern": "^0x[0-9a-fA-F]{40}$" },
                            "token": { "type": "string", "pattern": "^0x[0-9a-fA-F]{40}$" },
                            "to": { "type": "string", "pattern": "^0x[0-9a-fA-F]{40}$" },
                            "amount": {
                                "type": "string",
                                "description": "Amount in whole tokens; the token's decimals apply.",
                                "pattern": "^[0-9]{1,40}(\\.[0-9]{1,18})?$"
                            }
                        },
                        "additionalProperties": false
                    }),
                    erc20_transfer,
                ),
                Operation::new(
                    "erc20-approve",
                    json!({
                        "type": "object",
                        "required": ["chainId", "from", "token", "spender", "amount"],
                        "properties": {
                            "chainId": { "type": "integer", "minimum": 1 },
                            "from": { "type": "string", "pattern": "^0x[0-9a-fA-F]{40}$" },
                            "token": { "type": "string", "pattern": "^0x[0-9a-fA-F]{40}$" },
                            "spender": { "type": "string", "pattern": "^0x[0-9a-fA-F]{40}$" },
                            "amount": {
                                "type": "string",
                                "description": "Allowance in whole tokens, or `unlimited`.",
                                "pattern": "^([0-9]{1,40}(\\.[0-9]{1,18})?|unlimited)$"
                            }
                        },
                        "additionalProperties": false
                    }),
                    erc20_approve,
                ),
                Operation::new(
                    "erc721-transfer",
                    json!({
                        "type": "object",
                        "required": ["chainId", "from", "token", "to", "tokenId"],
                        "properties": {
                            "chainId": { "type": "integer", "minimum": 1 },
                            "from": { "type": "string", "pattern": "^0x[0-9a-fA-F]{40}$" }, "token": { "type": "string", "pattern": "^0x[0-9a-fA-F]{40}$" }, "to": { "type": "string", "pattern": "^0x[0-9a-fA-F]{40}$" },
                            "tokenId": { "type": "string", "pattern": "^[0-9]{1,78}$" }
                        },
                        "additionalProperties": false
                    }),
                    erc721_transfer,
                ),
                Operation::new(
                    "erc1155-transfer",
                    json!({
                        "type": "object",
                        "required": ["chainId", "from", "token", "to", "id", "amount"],
                        "properties": {
                            "chainId": { "type": "integer", "minimum": 1 },
                            "from": { "type": "string", "pattern": "^0x[0-9a-fA-F]{40}$" }, "token": { "type": "string", "pattern": "^0x[0-9a-fA-F]{40}$" }, "to": { "type": "string", "pattern": "^0x[0-9a-fA-F]{40}$" },
                            "id": { "type": "string", "pattern": "^[0-9]{1,78}$" },
                            "amount": { "type": "string", "pattern": "^[0-9]{1,78}$" }
                        },
                        "additionalProperties": false
                    }),
                    erc1155_transfer,
                ),
                Operation::new(
                    "set-approval-for-all",
                    json!({
                        "type": "object",
                        "required": ["chainId", "from", "token", "operator", "approved"],
                        "properties": {
                            "chainId": { "type": "integer", "minimum": 1 },
                            "from": { "type": "string", "pattern": "^0x[0-9a-fA-F]{40}$" }, "token": { "type": "string", "pattern": "^0x[0-9a-fA-F]{40}$" }, "operator": { "type": "string", "pattern": "^0x[0-9a-fA-F]{40}$" },
                            "approved": { "type": "boolean" }
                        },
                        "additionalProperties": false
                    }),
                    set_approval_for_all,
                ),
            ],
        },
        App {
            name: "svm-assets",
            description: "SOL and SPL token transfers on the SVM devnet.",
            chain: PipelineChain::Svm,
            operations: vec![
                Operation::new(
                    "sol-transfer",
                    json!({
                        "type": "object",
                        "required": ["cluster", "from", "to", "amount"],
                        "properties": {
                            "cluster": { "type": "string", "minLength": 1, "maxLength": 64 },
                            "from": { "type": "string", "pattern": BASE58 },
                            "to": { "type": "string", "pattern": BASE58 },
                            "amount": {
                                "type": "string",
                                "description": "Amount in SOL (9 decimals).",
                                "pattern": "^[0-9]{1,11}(\\.[0-9]{1,9})?$"
                            }
                        },
                        "additionalProperties": false
                    }),
                    sol_transfer,
                ),
                Operation::new(
                    "spl-transfer",
                    json!({
                        "type": "object",
                        "required": ["cluster", "from", "mint", "to", "amount"],
                        "properties": {
                            "cluster": { "type": "string", "minLength": 1, "maxLength": 64 },
                            "from": { "type": "string", "pattern": BASE58 },
                            "mint": { "type": "string", "pattern": BASE58 },
                            "to": { "type": "string", "pattern": BASE58 },
                            "amount": {
                                "type": "string",
                                "description": "Amount in whole tokens; the mint's decimals apply. The recipient's associated token account is created when missing.",
                                "pattern": "^[0-9]{1,20}(\\.[0-9]{1,9})?$"
                            }
                        },
                        "additionalProperties": false
                    }),
                    spl_transfer,
                ),
            ],
        },
    ]
});

/// The pattern of a base58 SVM address.
const BASE58: &str = "^[1-9A-HJ-NP-Za-km-z]{32,44}$";

/// A skill: operations that answer request-local results and assemble nothing.
pub struct Skill {
    /// The skill name.
    pub name: &'static str,
    /// What it does.
    pub description: &'static str,
    /// Its operations.
    pub operations: Vec<SkillOperation>,
}

/// A skill operation: a checked input in, a result out.
pub struct SkillOperation {
    /// The operation name.
    pub name: &'static str,
    /// The input's schema.
    pub input: Schema,
    run: fn(&Value) -> Value,
}

impl SkillOperation {
    /// Checks `input` against the input schema, then runs the operation.
    pub fn run(&self, input: &Value) -> Result<Value, ApiError> {
        self.input.check(self.name, input)?;
        Ok((self.run)(input))
    }
}

impl Skill {
    /// The operation called `name`, or 404.
    pub fn operation(&self, name: &str) -> Result<&SkillOperation, ApiError> {
        let what = format!("skill {} has no operation", self.name);
        named(&self.operations, |op| op.name, name, &what)
    }
}

/// Every skill.
pub static SKILLS: LazyLock<Vec<Skill>> = LazyLock::new(|| {
    vec![
        Skill {
            name: "address",
            description: "Address checks.",
            operations: vec![SkillOperation {
                name: "validate",
                input: Schema::new(json!({
                    "type": "object",
                    "required": ["address"],
                    "properties": { "address": { "type": "string", "maxLength": 128 } },
                    "additionalProperties": false
                })),
                run: validate_address,
            }],
        },
        Skill {
            name: "fees",
            description: "Fee quotes on the devnet.",
            operations: vec![SkillOperation {
                name: "quote",
                input: Schema::new(json!({
                    "type": "object",
                    "required": ["chainId"],
                    "properties": {
                        "chainId": { "type": "integer", "minimum": 1 },
                        "gasUnits": { "type": "integer", "minimum": 21000, "maximum": 30000000 }
                    },
                    "additionalProperties": false
                })),
                run: quote_fee,
            }],
        },
    ]
});

/// The skill called `name`, or 404.
pub fn skill(name: &str) -> Result<&'static Skill, ApiError> {
    named(&SKILLS, |skill| skill.name, name, "no skill")
}

/// Whether `address` is an EVM address (with its EIP-55 form; mixed case must be the checksum)
/// or an SVM one.
fn validate_address(input: &Value) -> Value {
    let text = input["address"].as_str().unwrap_or_default();
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
fn quote_fee(input: &Value) -> Value {
    let chain_id = input["chainId"].as_u64().unwrap_or_default();
    if chain_id != super::devnet::evm::CHAIN_ID {
        return json!({ "chainId": chain_id, "known": false });
    }
    let units = input["gasUnits"].as_u64().unwrap_or(21_000);
    let price = super::devnet::evm::GAS_PRICE_WEI;
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

/// The app called `name`, or 404.
pub fn app(name: &str) -> Result<&'static App, ApiError> {
    named(&APPS, |app| app.name, name, "no app")
}

fn native_transfer(input: &Map<String, Value>, step: u64) -> Result<Assembled, ApiError> {
    let text = |key: &str| input[key].as_str().unwrap_or_default().to_owned();
    let amount = text("amount");
    let wei = to_base_units(&amount, 18)
        .ok_or_else(|| ApiError::new(ErrorCode::ValidationFailed, "amount is out of range"))?;
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
        actions: vec![
            serde_json::from_value(action)
                .map_err(|e| ApiError::new(ErrorCode::ValidationFailed, e.to_string()))?,
        ],
        title: format!("Send {amount} ETH"),
    })
}

/// The contract an operation names in `token`, or 400 when the devnet has none of `standards`
/// there.
fn token(
    input: &Map<String, Value>,
    standards: &[Standard],
) -> Result<&'static Contract, ApiError> {
    let address = input["token"].as_str().unwrap_or_default();
    super::devnet::evm::contract(address)
        .filter(|c| standards.contains(&c.standard))
        .ok_or_else(|| {
            let names: Vec<&str> = standards.iter().map(|s| s.as_str()).collect();
            ApiError::new(
                ErrorCode::ValidationFailed,
                format!(
                    "no {} contract of the devnet is at {address}",
                    names.join(" or ")
                ),
            )
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
fn amount_word(decimal: &str) -> Result<String, ApiError> {
    let value: revm::primitives::U256 = decimal
        .parse()
        .map_err(|_| ApiError::new(ErrorCode::ValidationFailed, "amount is out of range"))?;
    Ok(format!("{value:x}"))
}

/// One EVM call action to `to` with `data`.
fn call(
    input: &Map<String, Value>,
    step: u64,
    to: &str,
    data: String,
    description: String,
) -> Result<PipelineAction, ApiError> {
    let action = json!({
        "chain": "evm", "step": step, "chainId": input["chainId"],
        "from": input["from"], "to": to, "value": "0", "data": data,
        "description": description,
    });
    serde_json::from_value(action)
        .map_err(|e| ApiError::new(ErrorCode::ValidationFailed, e.to_string()))
}

fn erc20_transfer(input: &Map<String, Value>, step: u64) -> Result<Assembled, ApiError> {
    let token = token(input, &[Standard::Erc20])?;
    let text = |key: &str| input[key].as_str().unwrap_or_default().to_owned();
    let (amount, to) = (text("amount"), text("to"));
    let units =
        to_base_units(&amount, token.decimals.unwrap_or_default().into()).ok_or_else(|| {
            ApiError::new(ErrorCode::ValidationFailed, "amount has too many decimals")
        })?;
    // transfer(address,uint256)
    let data = encode("a9059cbb", &[address_word(&to), amount_word(&units)?]);
    let description = format!("Transfer {amount} {} to {to}", token.symbol);
    Ok(Assembled {
        actions: vec![call(input, step, token.address, data, description)?],
        title: format!("Send {amount} {}", token.symbol),
    })
}

fn erc20_approve(input: &Map<String, Value>, step: u64) -> Result<Assembled, ApiError> {
    let token = token(input, &[Standard::Erc20])?;
    let text = |key: &str| input[key].as_str().unwrap_or_default().to_owned();
    let (amount, spender) = (text("amount"), text("spender"));
    let units = if amount == "unlimited" {
        revm::primitives::U256::MAX.to_string()
    } else {
        to_base_units(&amount, token.decimals.unwrap_or_default().into()).ok_or_else(|| {
            ApiError::new(ErrorCode::ValidationFailed, "amount has too many decimals")
        })?
    };
    // approve(address,uint256)
    let data = encode("095ea7b3", &[address_word(&spender), amount_word(&units)?]);
    let description = format!("Approve {spender} to spend {amount} {}", token.symbol);
    Ok(Assembled {
        actions: vec![call(input, step, token.address, data, description)?],
        title: format!("Approve {amount} {}", token.symbol),
    })
}

fn erc721_transfer(input: &Map<String, Value>, step: u64) -> Result<Assembled, ApiError> {
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

fn erc1155_transfer(input: &Map<String, Value>, step: u64) -> Result<Assembled, ApiError> {
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

fn set_approval_for_all(input: &Map<String, Value>, step: u64) -> Result<Assembled, ApiError> {
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

/// One SVM action paid by the input's `from`.
fn svm_action(
    input: &Map<String, Value>,
    step: u64,
    instructions: Vec<Value>,
    description: String,
) -> Result<PipelineAction, ApiError> {
    let action = json!({
        "chain": "svm", "step": step, "cluster": input["cluster"],
        "feePayer": input["from"], "instructions": instructions,
        "description": description,
    });
    serde_json::from_value(action)
        .map_err(|e| ApiError::new(ErrorCode::ValidationFailed, e.to_string()))
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
fn base_units_u64(amount: &str, decimals: u8) -> Result<u64, ApiError> {
    to_base_units(amount, decimals.into())
        .and_then(|units| units.parse().ok())
        .ok_or_else(|| ApiError::new(ErrorCode::ValidationFailed, "amount is out of range"))
}

/// An SVM address of an input, or 400.
fn svm_address(input: &Map<String, Value>, key: &str) -> Result<solana_address::Address, ApiError> {
    let text = input[key].as_str().unwrap_or_default();
    text.parse().map_err(|_| {
        ApiError::new(
            ErrorCode::ValidationFailed,
            format!("{key} is not a 32-byte base58 address"),
        )
    })
}

fn sol_transfer(input: &Map<String, Value>, step: u64) -> Result<Assembled, ApiError> {
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

fn spl_transfer(input: &Map<String, Value>, step: u64) -> Result<Assembled, ApiError> {
    let (from, to) = (svm_address(input, "from")?, svm_address(input, "to")?);
    let mint_address = svm_address(input, "mint")?;
    let mint = svm::mint(&mint_address.to_string()).ok_or_else(|| {
        ApiError::new(
            ErrorCode::ValidationFailed,
            format!("no SPL mint of the devnet is at {mint_address}"),
        )
    })?;
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

/// `amount` (decimal, at most `decimals` fraction digits) in base units, as a decimal string
/// of at most 78 digits.
fn to_base_units(amount: &str, decimals: usize) -> Option<String> {
    let (whole, fraction) = amount.split_once('.').unwrap_or((amount, ""));
    if fraction.len() > decimals {
        return None;
    }
    let digits = format!("{whole}{fraction:0<decimals$}");
    let trimmed = digits.trim_start_matches('0');
    let units = if trimmed.is_empty() { "0" } else { trimmed };
    (units.len() <= 78).then(|| units.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn amounts_become_base_units() {
        assert_eq!(
            to_base_units("1", 18).as_deref(),
            Some("1000000000000000000")
        );
        assert_eq!(
            to_base_units("0.5", 18).as_deref(),
            Some("500000000000000000")
        );
        assert_eq!(to_base_units("25.5", 6).as_deref(), Some("25500000"));
        assert_eq!(to_base_units("0", 6).as_deref(), Some("0"));
        assert_eq!(to_base_units("0.0000001", 6), None);
    }
}
