//! SHA-256, the engine's one digest: the rack map's (what `sha256sum`
//! prints, which admins compare between nodes), the seal of each piece of
//! its indexed form, a topology file's, and the bucket a node's name falls
//! in. The only user of `sha2`, which the SPANK plugin never links; the hex
//! spelling is `slurm_imex_core::hex`.

use sha2::{Digest as _, Sha256};

/// The SHA-256 of `bytes`.
pub fn sha256(bytes: &[u8]) -> [u8; 32] {
    Sha256::digest(bytes).into()
}

/// The SHA-256 of `bytes` in lowercase hex, as `sha256sum` prints it.
pub fn sha256_hex(bytes: &[u8]) -> String {
    slurm_imex_core::hex::encode(&sha256(bytes))
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_digest_is_what_sha256sum_prints() {
        // printf abc | sha256sum
        assert_eq!(
            super::sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
