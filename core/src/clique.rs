//! An NVLink clique's one spelling, `<uuid>.<id>`: the rule the GPU side
//! (`slurm_imex_gpu::clique`, which reads a clique from NVML) and the rack
//! side (`slurm_imex_domain::rack`, which reads one from a rack map or a
//! node's Slurm Extra) both apply, so the two never disagree about the same
//! clique. Here, below both, because neither depends on the other; pure
//! string rules, nothing the SPANK plugin would link beyond them.

/// A clique in the only shape we publish: `<32 lower-case hex digits in
/// 8-4-4-4-12>.<id>`, the id in decimal with no sign and no leading zero,
/// neither part all zeros and the id not 0xFFFFFFFF. The one spelling
/// [`canonical`] writes, so two cliques compare equal exactly when their
/// strings do.
pub fn is_clique(value: &str) -> bool {
    canonical(value).as_deref() == Some(value)
}

/// The one spelling of a clique written any way NVML's two values can be:
/// the UUID in any case, the id with leading zeros or a `+`
/// (`…-5291DD461278.+0002` is `…-5291dd461278.2`). None when it is no
/// clique at all. Every clique read (a rack map, a node's Extra) passes
/// through here, so the rack map and the GPU side never disagree about the
/// same clique's spelling.
pub fn canonical(value: &str) -> Option<String> {
    let (uuid, id) = value.rsplit_once('.')?;
    let uuid = uuid.to_ascii_lowercase();
    let groups: Vec<&str> = uuid.split('-').collect();
    let shape = groups.iter().map(|g| g.len()).eq([8, 4, 4, 4, 12]);
    let hex = uuid.chars().all(|c| c == '-' || c.is_ascii_hexdigit());
    let not_nil = uuid.chars().any(|c| c.is_ascii_hexdigit() && c != '0');
    let digits = id.strip_prefix('+').unwrap_or(id);
    let id_ok = !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit());
    let id = digits
        .parse::<u32>()
        .ok()
        .filter(|n| *n != 0 && *n != u32::MAX);
    match (shape && hex && not_nil && id_ok, id) {
        (true, Some(id)) => Some(format!("{uuid}.{id}")),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const C: &str = "dc6e40c4-d722-4357-9ba6-5291dd461278.2";

    #[test]
    fn only_the_shape_we_publish_is_trusted() {
        assert!(is_clique(C));
        assert!(is_clique("9277d399-0674-44a9-b64e-d85bb19ce2b0.32766"));
        for bad in [
            "00000000-0000-0000-0000-000000000000.2",
            "dc6e40c4-d722-4357-9ba6-5291dd461278.0",
            "dc6e40c4-d722-4357-9ba6-5291dd461278.4294967295",
            "dc6e40c4-d722-4357-9ba6-5291dd461278",
            "DC6E40C4-D722-4357-9BA6-5291DD461278.2",
            "dc6e40c4d7224357-9ba6-5291dd461278.2",
            "rack1",
            "",
        ] {
            assert!(!is_clique(bad), "{bad}");
        }
    }
}
