//! Bounding text that came from outside (ctl output, daemon log lines,
//! hostlists, node lists) before it goes into an error line, a log or a job
//! record: a 10 MB answer or a 5000-node list must never become a 10 MB
//! message.

/// Cap for one piece of outside text inside a message.
pub const PIECE_MAX: usize = 1024;
/// Cap for a whole error line.
pub const LINE_MAX: usize = 4096;

/// `s` cut to at most `max` bytes at a character boundary, saying how much
/// was left out.
pub fn cap(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max;
    while end > 0 && !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} more bytes)", &s[..end], s.len() - end)
}

/// A list joined with `,`, as many items as fit in `max` bytes, then
/// `… (N more)`.
pub fn summarize_list<S: AsRef<str>>(items: &[S], max: usize) -> String {
    let mut out = String::new();
    for (i, item) in items.iter().enumerate() {
        let item = item.as_ref();
        let sep = if i == 0 { "" } else { "," };
        if out.len() + sep.len() + item.len() > max {
            if i == 0 {
                return format!("{}… ({} more)", cap(item, max), items.len() - 1);
            }
            return format!("{out},… ({} more)", items.len() - i);
        }
        out.push_str(sep);
        out.push_str(item);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caps_at_char_boundaries() {
        assert_eq!(cap("short", 10), "short");
        assert_eq!(cap("abcdef", 3), "abc… (3 more bytes)");
        let s = "é".repeat(10);
        let c = cap(&s, 5);
        assert!(c.starts_with("éé…"), "{c}");
        assert!(cap(&"x".repeat(10_000_000), PIECE_MAX).len() < PIECE_MAX + 40);
    }

    #[test]
    fn summarizes_long_lists() {
        let nodes: Vec<String> = (1..=5000).map(|i| format!("node{i:04}")).collect();
        let s = summarize_list(&nodes, PIECE_MAX);
        assert!(s.len() <= PIECE_MAX + 30, "{}", s.len());
        assert!(s.starts_with("node0001,node0002,"));
        assert!(s.ends_with("more)"), "{s}");
        assert_eq!(summarize_list(&["a", "b"], 100), "a,b");
        assert_eq!(summarize_list::<&str>(&[], 100), "");
    }
}
