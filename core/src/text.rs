//! Bounding text that came from outside (ctl output, daemon log lines,
//! hostlists, node lists) before it goes into an error line, a log or a job
//! record: a 10 MB answer or a 5000-node list must never become a 10 MB
//! message.
//!
//! And showing it: outside text that reaches a terminal or stderr (a label
//! a Prometheus answers with, a stored summary, a row of the job database,
//! an NVML string, a ctl answer, a state file) is [`shown`], printable and
//! bounded, so an ESC cannot rewrite the admin's screen, a BEL or an OSC
//! cannot set its title, a newline cannot forge a line, and a megabyte
//! stays a kilobyte. That rule is applied where text is *written*, not
//! where each field is read: the CLI's one writer (`cli/src/output.rs`, its
//! `out!` lines and its table cells) and the hooks' one stderr line
//! ([`crate::logging::stderr_line`]) pass everything they write through
//! [`shown`], and `cli/clippy.toml` and `hooks/clippy.toml` refuse any other
//! print there, so a field added tomorrow cannot reach a terminal raw.

/// Cap for one piece of outside text inside a message.
pub const PIECE_MAX: usize = 1024;
/// Cap for a whole error line.
pub const LINE_MAX: usize = 4096;
/// Cap for one line a command prints on a terminal (a job's note naming
/// twenty nodes, a domain's member list); each table cell is cut at
/// [`PIECE_MAX`] on its own.
pub const SHOWN_LINE_MAX: usize = 16 * 1024;

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
    shown(s, usize::MAX)
}

/// `s` as it may be shown on a terminal or stderr: [`printable`], and at
/// most `max` bytes in all: when it does not fit, cut at a character (never
/// inside an escape) with `… (N more bytes)` saying how many bytes of `s`
/// were left out. What it returns is returned unchanged by it again. It
/// stops reading soon after the cut: a megabyte costs about `max`.
pub fn shown(s: &str, max: usize) -> String {
    if s.len() <= max && !s.chars().any(needs_escape) {
        return s.to_string();
    }
    // Room for the note of what was left out, whatever the cut.
    let note = "… ( more bytes)".len() + s.len().to_string().len();
    let keep = max.saturating_sub(note);
    let mut out = String::new();
    let mut cut = None;
    for (at, c) in s.char_indices() {
        let before = out.len();
        match c {
            c if !needs_escape(c) => out.push(c),
            c if (c as u32) < 0x80 => out.push_str(&format!("\\x{:02x}", c as u32)),
            c => out.push_str(&format!("\\u{{{:04x}}}", c as u32)),
        }
        if cut.is_none() && out.len() > keep {
            cut = Some((before, at));
        }
        if out.len() > max {
            let (len, at) = cut.unwrap_or((before, at));
            out.truncate(len);
            return format!("{out}… ({} more bytes)", s.len() - at);
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
    fn shown_text_is_printable_and_cut_after_escaping() {
        assert_eq!(shown("gb-r1-01", 100), "gb-r1-01");
        assert_eq!(
            shown("a\x1b[2J\x1b]0;t\x07\r\nNODE", 100),
            "a\\x1b[2J\\x1b]0;t\\x07\\x0d\\x0aNODE"
        );
        // Cut after escaping, never inside an escape, the note included in
        // `max`; what was left out is counted in bytes of the text.
        assert_eq!(
            shown(&format!("{}\0cd", "a".repeat(20)), 40),
            format!("{}\\x00cd", "a".repeat(20))
        );
        assert_eq!(
            shown(&format!("{}\0cd", "a".repeat(20)), 24),
            "aaaaa… (18 more bytes)"
        );
        assert_eq!(
            shown(&format!("ab{}", "\0".repeat(20)), 30),
            "ab\\x00\\x00… (18 more bytes)"
        );
        let mib = format!("\x1b[2J{}", "\n".repeat(1 << 20));
        let s = shown(&mib, PIECE_MAX);
        assert!(s.len() <= PIECE_MAX, "{}", s.len());
        assert!(!s.chars().any(char::is_control), "{s}");
        assert!(s.ends_with(" more bytes)"), "{s}");
        assert_eq!(shown(&s, PIECE_MAX), s);
        let long = "é".repeat(1000);
        assert!(shown(&long, 101).len() <= 101);
        assert_eq!(shown(&shown(&long, 101), 101), shown(&long, 101));
        assert_eq!(shown("é ✓", 100), "é ✓");
        assert_eq!(shown("\u{202e}x", 100), "\\u{202e}x");
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
