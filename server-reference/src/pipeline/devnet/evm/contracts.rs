//! The token contracts of the EVM devnet: their standards, addresses and creation bytecode.

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
pub(super) const DEV_TOKEN_BIN: &str = include_str!("../../../../contracts/DevToken.bin");
pub(super) const DEV_COLLECTIBLE_BIN: &str =
    include_str!("../../../../contracts/DevCollectible.bin");
pub(super) const DEV_MULTI_TOKEN_BIN: &str =
    include_str!("../../../../contracts/DevMultiToken.bin");
