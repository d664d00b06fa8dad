//! The apps of the reference catalog and the input schema of each of their operations.

use std::sync::LazyLock;

use intent_models::PipelineChain;
use serde_json::json;

use super::evm_assets::{
    erc20_approve, erc20_transfer, erc721_transfer, erc1155_transfer, native_transfer,
    set_approval_for_all,
};
use super::svm_assets::{sol_transfer, spl_transfer};
use super::{App, AppOperation};

/// Every app.
pub static APPS: LazyLock<Vec<App>> = LazyLock::new(|| {
    vec![
        App {
            name: "evm-assets",
            description: "Native, ERC-20, ERC-721 and ERC-1155 transfers and approvals on the EVM devnet.",
            chain: PipelineChain::Evm,
            operations: vec![
                AppOperation::new(
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
                AppOperation::new(
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
                AppOperation::new(
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
                AppOperation::new(
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
                AppOperation::new(
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
                AppOperation::new(
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
                AppOperation::new(
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
                AppOperation::new(
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
