// SPDX-License-Identifier: MIT OR Apache-2.0
pragma solidity 0.8.37;

/// A plain ERC-1155 for the devnet: each holder of the constructor gets `amount` of each id.
/// Transfers need no receiver check: the devnet has no receiving contracts.
contract DevMultiToken {
    mapping(uint256 => mapping(address => uint256)) public balanceOf;
    mapping(address => mapping(address => bool)) public isApprovedForAll;

    event TransferSingle(address indexed operator, address indexed from, address indexed to, uint256 id, uint256 value);
    event TransferBatch(address indexed operator, address indexed from, address indexed to, uint256[] ids, uint256[] values);
    event ApprovalForAll(address indexed account, address indexed operator, bool approved);

    constructor(address[] memory holders, uint256[] memory ids, uint256 amount) {
        for (uint256 i = 0; i < holders.length; i++) {
            for (uint256 j = 0; j < ids.length; j++) {
                balanceOf[ids[j]][holders[i]] = amount;
                emit TransferSingle(msg.sender, address(0), holders[i], ids[j], amount);
            }
        }
    }

    function setApprovalForAll(address operator, bool approved) external {
        isApprovedForAll[msg.sender][operator] = approved;
        emit ApprovalForAll(msg.sender, operator, approved);
    }

    function safeTransferFrom(address from, address to, uint256 id, uint256 value, bytes calldata) external {
        require(msg.sender == from || isApprovedForAll[from][msg.sender], "not allowed");
        _move(from, to, id, value);
        emit TransferSingle(msg.sender, from, to, id, value);
    }

    function safeBatchTransferFrom(
        address from,
        address to,
        uint256[] calldata ids,
        uint256[] calldata values,
        bytes calldata
    ) external {
        require(msg.sender == from || isApprovedForAll[from][msg.sender], "not allowed");
        require(ids.length == values.length, "lengths");
        for (uint256 i = 0; i < ids.length; i++) {
            _move(from, to, ids[i], values[i]);
        }
        emit TransferBatch(msg.sender, from, to, ids, values);
    }

    function _move(address from, address to, uint256 id, uint256 value) private {
        require(balanceOf[id][from] >= value, "balance");
        balanceOf[id][from] -= value;
        balanceOf[id][to] += value;
    }
}
