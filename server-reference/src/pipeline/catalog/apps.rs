//! The apps of the reference catalog, each operation with the input it takes.

use std::sync::LazyLock;

use intent_models::PipelineChain;

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
                AppOperation::new("native-transfer", native_transfer),
                AppOperation::new("erc20-transfer", erc20_transfer),
                AppOperation::new("erc20-approve", erc20_approve),
                AppOperation::new("erc721-transfer", erc721_transfer),
                AppOperation::new("erc1155-transfer", erc1155_transfer),
                AppOperation::new("set-approval-for-all", set_approval_for_all),
            ],
        },
        App {
            name: "svm-assets",
            description: "SOL and SPL token transfers on the SVM devnet.",
            chain: PipelineChain::Svm,
            operations: vec![
                AppOperation::new("sol-transfer", sol_transfer),
                AppOperation::new("spl-transfer", spl_transfer),
            ],
        },
    ]
});
