// SPDX-License-Identifier: MIT OR Apache-2.0
pragma solidity 0.8.37;

/// A plain ERC-721 for the devnet: holder i of the constructor owns token ids i*perHolder+1 to
/// (i+1)*perHolder. Transfers need no receiver check: the devnet has no receiving contracts.
contract DevCollectible {
    string public name;
    string public symbol;
    mapping(uint256 => address) public ownerOf;
    mapping(address => uint256) public balanceOf;
    mapping(uint256 => address) public getApproved;
    mapping(address => mapping(address => bool)) public isApprovedForAll;

    event Transfer(address indexed from, address indexed to, uint256 indexed tokenId);
    event Approval(address indexed owner, address indexed approved, uint256 indexed tokenId);
    event ApprovalForAll(address indexed owner, address indexed operator, bool approved);

    constructor(string memory name_, string memory symbol_, address[] memory holders, uint256 perHolder) {
        name = name_;
        symbol = symbol_;
        for (uint256 i = 0; i < holders.length; i++) {
            for (uint256 j = 1; j <= perHolder; j++) {
                uint256 id = i * perHolder + j;
                ownerOf[id] = holders[i];
                emit Transfer(address(0), holders[i], id);
            }
            balanceOf[holders[i]] = perHolder;
        }
    }

    function approve(address approved, uint256 tokenId) external {
        address owner = ownerOf[tokenId];
        require(msg.sender == owner || isApprovedForAll[owner][msg.sender], "not allowed");
        getApproved[tokenId] = approved;
        emit Approval(owner, approved, tokenId);
    }

    function setApprovalForAll(address operator, bool approved) external {
        isApprovedForAll[msg.sender][operator] = approved;
        emit ApprovalForAll(msg.sender, operator, approved);
    }

    function transferFrom(address from, address to, uint256 tokenId) public {
        require(ownerOf[tokenId] == from, "not the owner");
        require(
            msg.sender == from || getApproved[tokenId] == msg.sender || isApprovedForAll[from][msg.sender],
            "not allowed"
        );
        delete getApproved[tokenId];
        ownerOf[tokenId] = to;
        balanceOf[from] -= 1;
        balanceOf[to] += 1;
        emit Transfer(from, to, tokenId);
    }

    function safeTransferFrom(address from, address to, uint256 tokenId) external {
        transferFrom(from, to, tokenId);
    }
}
