//! What a simulation reports of an EVM run, decoded from its logs: balance changes and approvals
//! of the devnet's token standards.

use std::num::NonZeroU64;

use intent_models::error::ConversionError;
use intent_models::{
    PipelineApprovalChange, PipelineApprovalChangeKind as Kind, PipelineBalanceChange,
    PipelineBalanceChangeDirection as Direction, PipelineBalanceChangeStandard as Standard,
    builder,
};
use revm::primitives::{Address, U256};

use super::CHAIN_ID;
use super::contracts::{Contract, contract};

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
pub(super) struct Decoded {
    /// Balance changes.
    pub balance_changes: Vec<PipelineBalanceChange>,
    /// Approvals.
    pub approvals: Vec<PipelineApprovalChange>,
    /// What could not be decoded.
    pub warnings: Vec<String>,
}

impl Decoded {
    /// Balance changes and approvals of a token log, told apart by topic0 and topic count.
    pub fn log(&mut self, log: &revm::primitives::Log, step: u64) -> Result<(), ConversionError> {
        let topics = log.data.topics();
        let Some(topic0) = topics.first().map(|t| t.to_string()) else {
            return Ok(());
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
        let base = Token {
            asset: asset.clone(),
            known,
            step: NonZeroU64::new(step),
        };
        match (topic0.as_str(), topics.len()) {
            (TRANSFER_TOPIC, 3) => {
                let decimals = known.and_then(|c| c.decimals);
                self.transfer(
                    &base,
                    Standard::Erc20,
                    &party(1),
                    &party(2),
                    word(0),
                    None,
                    decimals,
                )?;
            }
            (TRANSFER_TOPIC, 4) => {
                let id = U256::from_be_bytes(topics[3].0);
                self.transfer(
                    &base,
                    Standard::Erc721,
                    &party(1),
                    &party(2),
                    U256::from(1u64),
                    Some(id),
                    None,
                )?;
            }
            (TRANSFER_SINGLE_TOPIC, 4) => {
                self.transfer(
                    &base,
                    Standard::Erc1155,
                    &party(2),
                    &party(3),
                    word(1),
                    Some(word(0)),
                    None,
                )?;
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
                        Standard::Erc1155,
                        &party(2),
                        &party(3),
                        value,
                        Some(id),
                        None,
                    )?;
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
                let approval = base
                    .approval(&party(1), &party(2))
                    .kind(Kind::Allowance)
                    .standard("erc20")
                    .amount(amount.to_string())
                    .unlimited(unlimited)
                    .decimals(known.and_then(|c| c.decimals).map(i64::from));
                self.approvals.push(approval.try_into()?);
            }
            (APPROVAL_TOPIC, 4) => {
                let id = U256::from_be_bytes(topics[3].0);
                let approval = base
                    .approval(&party(1), &party(2))
                    .kind(Kind::Token)
                    .standard("erc721")
                    .token_id(id.to_string());
                self.approvals.push(approval.try_into()?);
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
                let approval = base
                    .approval(&party(1), &party(2))
                    .kind(Kind::Operator)
                    .standard(standard)
                    .approved(approved)
                    .unlimited(approved);
                self.approvals.push(approval.try_into()?);
            }
            _ => {}
        }
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn transfer(
        &mut self,
        base: &Token<'_>,
        standard: Standard,
        from: &str,
        to: &str,
        amount: U256,
        token_id: Option<U256>,
        decimals: Option<u8>,
    ) -> Result<(), ConversionError> {
        for (account, direction, counterparty) in
            [(from, Direction::Out, to), (to, Direction::In, from)]
        {
            let change = base
                .change()
                .amount(amount.to_string())
                .account(account.to_owned())
                .direction(direction)
                .counterparty(counterparty.to_owned())
                .standard(standard)
                .decimals(decimals.map(i64::from))
                .token_id(token_id.map(|id| id.to_string()));
            self.balance_changes.push(change.try_into()?);
        }
        Ok(())
    }
}

/// The token a log is about, and the step whose run wrote it.
struct Token<'a> {
    asset: String,
    known: Option<&'a Contract>,
    step: Option<NonZeroU64>,
}

impl Token<'_> {
    /// A balance change of this token, with what every change of it says.
    fn change(&self) -> builder::PipelineBalanceChange {
        PipelineBalanceChange::builder()
            .asset(self.asset.clone())
            .symbol(self.known.map(|c| c.symbol.to_owned()))
            .name(self.known.map(|c| c.name.to_owned()))
            .chain_id(Some(CHAIN_ID as i64))
            .step(self.step)
    }

    /// `spender`'s approval over `holder`'s holdings of this token.
    fn approval(&self, holder: &str, spender: &str) -> builder::PipelineApprovalChange {
        PipelineApprovalChange::builder()
            .asset(self.asset.clone())
            .symbol(self.known.map(|c| c.symbol.to_owned()))
            .name(self.known.map(|c| c.name.to_owned()))
            .chain_id(Some(CHAIN_ID as i64))
            .step(self.step)
            .account(holder.to_owned())
            .spender(spender.to_owned())
    }
}
