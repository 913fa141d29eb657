//! Bytes spelled as lowercase hex, as `sha256sum` and `od -x` print them:
//! the one spelling of every digest the programs show or compare (the rack
//! map's, its pieces' seals, a topology file's) and of the random part of a
//! temporary file's name. No digest is computed here: the plugin links this
//! crate, and SHA-256 stays with the domain engine
//! (`slurm_imex_domain::digest`).

/// `bytes` as lowercase hex, two digits a byte.
pub fn encode(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 0x0f)]));
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn bytes_are_two_lowercase_digits_each() {
        assert_eq!(super::encode(&[]), "");
        assert_eq!(super::encode(&[0x00, 0x0f, 0xa5, 0xff]), "000fa5ff");
    }
}
