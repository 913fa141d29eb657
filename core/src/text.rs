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

/// `s` with every character that is not printable escaped, as the kernel
/// escapes them in `/dev/kmsg` (`\x00`): control characters (NUL, ESC, CR,
/// DEL, the C1 range), line and paragraph separators and the bidirectional
/// overrides. Text from outside (a plain-file kernel log, an NVML string)
/// goes through this before it reaches a drain reason, a record or a line:
/// a NUL makes an argument that no program can be started with, an escape
/// sequence rewrites a terminal, a newline forges a second line.
pub fn printable(s: &str) -> String {
    if !s.chars().any(needs_escape) {
        return s.to_string();
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            c if !needs_escape(c) => out.push(c),
            c if (c as u32) < 0x80 => out.push_str(&format!("\\x{:02x}", c as u32)),
            c => out.push_str(&format!("\\u{{{:04x}}}", c as u32)),
        }
    }
    out
}

fn needs_escape(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{2028}' | '\u{2029}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
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
    fn control_characters_are_escaped_as_the_kernel_does() {
        assert_eq!(
            printable("GPU has fallen off the bus."),
            "GPU has fallen off the bus."
        );
        assert_eq!(printable("fallen\0 off"), "fallen\\x00 off");
        assert_eq!(printable("a\x1b[2Jb\r\n\x7f"), "a\\x1b[2Jb\\x0d\\x0a\\x7f");
        assert_eq!(printable("\u{85}x\u{202e}"), "\\u{0085}x\\u{202e}");
        assert_eq!(printable("é ✓ 温度"), "é ✓ 温度");
        assert!(printable(&"\0".repeat(1000))
            .chars()
            .all(|c| !c.is_control()));
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
