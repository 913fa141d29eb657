//! Slurm hostlist expressions (`gb-r1-[01-04,07],gb-r2-01`): expansion into
//! node names, in Slurm's order, bounded in size, and the reverse
//! (`compress`), which keeps the order so that expanding gives the list back.
//!
//! Hand-rolled on purpose: no maintained crate parses Slurm's hostlist syntax,
//! and calling `scontrol show hostnames` from a prolog would put a Slurm RPC
//! and a fork on every job's critical path. The grammar follows Slurm's
//! src/common/hostlist.c: comma-separated host expressions; each may hold
//! several bracket groups (expanded as a cartesian product, leftmost group
//! outermost); a group holds comma-separated numbers or `lo-hi` ranges; the
//! width of `lo` sets zero padding. Order is kept and duplicates are kept
//! (`tux[2,1-2]` is tux2,tux1,tux2), exactly as Slurm's unsorted hostlist.

use crate::error::{Error, Result};

/// The most hosts any hostlist is expanded to: the bound of `[imex]
/// max_nodes`, and of a `--node` hostlist a command is given.
pub const MAX_HOSTS_LIMIT: usize = 16384;

/// Expand `expr` into node names. Fails with one line naming the problem and
/// its position when the syntax is bad or the result exceeds `max_hosts`.
pub fn expand(expr: &str, max_hosts: usize) -> Result<Vec<String>> {
    if expr.is_empty() {
        return Err(Error::new("empty hostlist"));
    }
    // Host names go into nodes_config.cfg and error lines: only what a
    // host name may hold (RFC 1123 plus '_'), and the hostlist syntax.
    if let Some((i, c)) = expr
        .char_indices()
        .find(|(_, c)| !(c.is_ascii_alphanumeric() || "-._[],".contains(*c)))
    {
        let what = if c.is_whitespace() {
            "whitespace".to_string()
        } else if c.is_control() {
            format!("control character {:?}", c)
        } else {
            format!("'{c}'")
        };
        let at = expr[..i].chars().count();
        return Err(bad(expr, at, &format!("{what} cannot be in a host name")));
    }
    let mut hosts = Vec::new();
    for (start, part) in split_top_level(expr)? {
        if part.trim().is_empty() {
            return Err(bad(expr, start, "empty host name between commas"));
        }
        expand_one(expr, start, part, max_hosts, &mut hosts)?;
    }
    Ok(hosts)
}

fn bad(expr: &str, at: usize, what: &str) -> Error {
    Error::new(format!(
        "bad hostlist \"{}\" at character {}: {what}",
        crate::text::cap(&expr.escape_debug().to_string(), crate::text::PIECE_MAX),
        at + 1
    ))
}

/// Split on commas outside brackets; yields (byte offset, piece).
fn split_top_level(expr: &str) -> Result<Vec<(usize, &str)>> {
    let mut parts = Vec::new();
    let mut depth = 0u32;
    let mut start = 0;
    for (i, c) in expr.char_indices() {
        match c {
            '[' if depth > 0 => return Err(bad(expr, i, "nested '['")),
            '[' => depth = 1,
            ']' if depth == 0 => return Err(bad(expr, i, "']' without '['")),
            ']' => depth = 0,
            ',' if depth == 0 => {
                parts.push((start, &expr[start..i]));
                start = i + 1;
            }
            _ => {}
        }
    }
    if depth > 0 {
        return Err(bad(expr, expr.len() - 1, "'[' is never closed"));
    }
    parts.push((start, &expr[start..]));
    Ok(parts)
}

/// One host expression: literal text and bracket groups.
enum Piece {
    Text(String),
    Numbers(Vec<String>),
}

fn expand_one(
    expr: &str,
    offset: usize,
    part: &str,
    max_hosts: usize,
    out: &mut Vec<String>,
) -> Result<()> {
    let mut pieces = Vec::new();
    let mut rest = part;
    let mut pos = offset;
    while let Some(open) = rest.find('[') {
        let Some(close) = rest[open..].find(']').map(|c| open + c) else {
            return Err(Error::new(format!(
                "hostlist \"{part}\": a '[' is never closed"
            )));
        };
        if open > 0 {
            pieces.push(Piece::Text(rest[..open].to_string()));
        }
        let body = &rest[open + 1..close];
        pieces.push(Piece::Numbers(expand_group(
            expr,
            pos + open + 1,
            body,
            max_hosts,
        )?));
        pos += close + 1;
        rest = &rest[close + 1..];
    }
    if !rest.is_empty() {
        pieces.push(Piece::Text(rest.to_string()));
    }
    // Size check before expanding, with overflow-safe arithmetic.
    let mut total: usize = 1;
    for p in &pieces {
        if let Piece::Numbers(n) = p {
            total = total.saturating_mul(n.len());
        }
    }
    if out.len().saturating_add(total) > max_hosts {
        return Err(Error::new(format!(
            "hostlist \"{}\" expands to more than {max_hosts} hosts \
             (raise [imex] max_nodes if this is intended)",
            crate::text::cap(expr, crate::text::PIECE_MAX)
        )));
    }
    let mut names = vec![String::new()];
    for p in &pieces {
        names = match p {
            Piece::Text(t) => names.into_iter().map(|n| n + t).collect(),
            Piece::Numbers(nums) => names
                .iter()
                .flat_map(|n| nums.iter().map(move |x| format!("{n}{x}")))
                .collect(),
        };
    }
    out.extend(names);
    Ok(())
}

/// `01-04,07` → ["01","02","03","04","07"].
fn expand_group(expr: &str, at: usize, body: &str, max_hosts: usize) -> Result<Vec<String>> {
    if body.is_empty() {
        return Err(bad(expr, at, "empty brackets"));
    }
    let mut out = Vec::new();
    for item in body.split(',') {
        let (lo, hi) = match item.split_once('-') {
            Some((lo, hi)) => (lo, hi),
            None => (item, item),
        };
        let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
        if !digits(lo) || !digits(hi) {
            return Err(bad(
                expr,
                at,
                &format!("\"{item}\" is not a number or a lo-hi range"),
            ));
        }
        let parse = |s: &str| {
            s.parse::<u64>()
                .map_err(|_| bad(expr, at, &format!("\"{s}\" is too large")))
        };
        let (l, h) = (parse(lo)?, parse(hi)?);
        if l > h {
            return Err(bad(expr, at, &format!("range \"{item}\" runs backwards")));
        }
        if (h - l) as usize >= max_hosts || out.len() + (h - l) as usize >= max_hosts {
            return Err(Error::new(format!(
                "hostlist \"{expr}\" expands to more than {max_hosts} hosts \
                 (raise [imex] max_nodes if this is intended)"
            )));
        }
        let width = lo.len();
        for n in l..=h {
            out.push(format!("{n:0width$}"));
        }
    }
    Ok(out)
}

/// An expression for `hosts` that expands back to exactly `hosts`, in their
/// order (Slurm's `scontrol show hostlist` sorts; a job's order matters to
/// us): consecutive hosts of one prefix and number width become one
/// `prefix[lo-hi,...]`, with runs counting up by one as ranges.
pub fn compress(hosts: &[String]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut open: Option<Group> = None;
    for host in hosts {
        let digits = host.len() - host.trim_end_matches(|c: char| c.is_ascii_digit()).len();
        let (prefix, num) = host.split_at(host.len() - digits);
        let number = (1..=18)
            .contains(&digits)
            .then(|| num.parse::<u64>().ok())
            .flatten();
        let Some(n) = number else {
            out.extend(open.take().map(render_group));
            out.push(host.clone());
            continue;
        };
        let padded = num.starts_with('0') && digits > 1;
        let joins = |p: &str, w: usize| p == prefix && if w == 0 { !padded } else { digits == w };
        match &mut open {
            Some((p, w, ranges)) if joins(p, *w) => match ranges.last_mut() {
                Some(last) if n == last.1.saturating_add(1) => last.1 = n,
                _ => ranges.push((n, n)),
            },
            _ => {
                out.extend(open.take().map(render_group));
                open = Some((prefix, if padded { digits } else { 0 }, vec![(n, n)]));
            }
        }
    }
    out.extend(open.map(render_group));
    out.join(",")
}

/// Hosts of one prefix and number width (0: unpadded), as number ranges.
type Group<'a> = (&'a str, usize, Vec<(u64, u64)>);

fn render_group((prefix, width, ranges): Group) -> String {
    let number = |n: u64| format!("{n:0width$}");
    match ranges.as_slice() {
        [(lo, hi)] if lo == hi => format!("{prefix}{}", number(*lo)),
        _ => {
            let parts: Vec<String> = ranges
                .iter()
                .map(|&(lo, hi)| match lo == hi {
                    true => number(lo),
                    false => format!("{}-{}", number(lo), number(hi)),
                })
                .collect();
            format!("{prefix}[{}]", parts.join(","))
        }
    }
}

/// Sort host names as people number racks: digit runs compare as numbers
/// (`n2` before `n10`), the rest as text. A rack's nodes_config must be the
/// same on every node of the rack, whichever source listed them.
pub fn sort_natural(hosts: &mut [String]) {
    hosts.sort_by(|a, b| natural_key(a).cmp(&natural_key(b)).then_with(|| a.cmp(b)));
}

/// Runs of digits and of other characters; a digit run as (length without
/// leading zeros, digits), so numbers of any size compare by value.
fn natural_key(host: &str) -> Vec<(bool, usize, &str)> {
    let mut key = Vec::new();
    let mut rest = host;
    while let Some(first) = rest.chars().next() {
        let digits = first.is_ascii_digit();
        let end = rest
            .find(|c: char| c.is_ascii_digit() != digits)
            .unwrap_or(rest.len());
        let (run, tail) = rest.split_at(end);
        if digits {
            let value = run.trim_start_matches('0');
            key.push((true, value.len(), value));
        } else {
            key.push((false, 0, run));
        }
        rest = tail;
    }
    key
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compress_gives_back_the_same_hosts_in_the_same_order() {
        let cases = [
            ("n1,n2", "n[1-2]"),
            ("n[3-4]", "n[3-4]"),
            ("gb-r1-[01-04,07],gb-r2-01", "gb-r1-[01-04,07],gb-r2-01"),
            ("n9,n10,n11", "n[9-11]"),
            ("n[09-11]", "n[09-11]"),
            ("n2,n1,n2", "n[2,1-2]"),
            ("login,n1", "login,n1"),
            ("a1b2", "a1b2"),
            ("x7", "x7"),
        ];
        for (list, want) in cases {
            let hosts = expand(list, 100).unwrap();
            let got = compress(&hosts);
            assert_eq!(got, want, "{list}");
            assert_eq!(expand(&got, 100).unwrap(), hosts, "{list}");
        }
        assert_eq!(compress(&[]), "");
    }

    fn x(e: &str) -> Vec<String> {
        expand(e, 100_000).unwrap()
    }

    #[test]
    fn published_slurm_examples_expand_as_slurm_does() {
        // tests/data/samples/hostlists.txt: every line with an expected value.
        let samples = include_str!("../../../tests/data/samples/hostlists.txt");
        let mut checked = 0;
        for line in samples.lines() {
            if let Some((e, want)) = line.split_once('\t') {
                assert_eq!(x(e).join(","), want, "{e}");
                checked += 1;
            } else if !line.trim().is_empty() {
                assert!(!x(line).is_empty(), "{line}");
            }
        }
        assert!(checked >= 10);
    }

    #[test]
    fn padding_multi_bracket_and_sizes() {
        assert_eq!(x("node[01-03]"), ["node01", "node02", "node03"]);
        assert_eq!(x("linux[0000-1023]").len(), 1024);
        assert_eq!(x("linux[0000-1023]")[7], "linux0007");
        assert_eq!(x("n[9-11]"), ["n9", "n10", "n11"]);
        assert_eq!(x("rack[0-63]_blade[0-41]").len(), 64 * 42);
        assert_eq!(x("r[0-1]b[0-1]"), ["r0b0", "r0b1", "r1b0", "r1b1"]);
        assert_eq!(
            x("gb-r1-[01-04,07],gb-r2-01"),
            ["gb-r1-01", "gb-r1-02", "gb-r1-03", "gb-r1-04", "gb-r1-07", "gb-r2-01"]
        );
        assert_eq!(x("n[1-2]-ib"), ["n1-ib", "n2-ib"]);
        assert_eq!(x("single"), ["single"]);
    }

    #[test]
    fn malformed_lists_fail_with_position() {
        for (e, needle) in [
            ("", "empty"),
            ("n[1-3", "never closed"),
            ("n1-3]", "without '['"),
            ("n[[1]]", "nested"),
            ("n[]", "empty brackets"),
            ("n[3-1]", "backwards"),
            ("n[a-b]", "not a number"),
            ("n[1-]", "not a number"),
            ("a,,b", "empty host name"),
            ("n[1-99999999999999999999999]", "too large"),
        ] {
            let err = expand(e, 1000).unwrap_err().to_string();
            assert!(err.contains(needle), "{e}: {err}");
        }
    }

    #[test]
    fn expansion_is_bounded() {
        let e = expand("n[1-5000]", 4096).unwrap_err().to_string();
        assert!(
            e.contains("more than 4096") && e.contains("max_nodes"),
            "{e}"
        );
        let e = expand("a[0-99999]b[0-99999]c[0-99999]", 4096).unwrap_err();
        assert!(e.to_string().contains("more than"));
        assert!(expand("n[1-4096]", 4096).is_ok());
        assert!(expand("n[1-4096],m1", 4096).is_err());
    }

    #[test]
    fn natural_sort_orders_numbers_by_value() {
        let mut hosts: Vec<String> = ["n10", "n2", "gb-r2-01", "n1", "gb-r10-01", "gb-r2-001", "x"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        sort_natural(&mut hosts);
        assert_eq!(
            hosts,
            ["gb-r2-001", "gb-r2-01", "gb-r10-01", "n1", "n2", "n10", "x"]
        );
    }
}
