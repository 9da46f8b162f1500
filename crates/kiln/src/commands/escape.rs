//! Escaping for the human report: every string that came from the input (member names, RECORD
//! paths, metadata, symbol names, messages quoting them) passes through [`text`] before it
//! reaches a terminal. Control characters (C0, DEL, C1: cursor moves, colour, screen clearing)
//! and the characters that reorder or hide text (bidi embeddings, overrides and isolates, the
//! Arabic letter mark, zero-width characters, line/paragraph separators, BOM) are written as
//! `\u{XXXX}`, so a crafted name cannot redraw the screen or read differently than it sorts.
//! JSON output is not escaped this way: serde_json writes the exact string.

use std::borrow::Cow;

fn hidden(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{061C}'
                | '\u{200B}'..='\u{200F}'
                | '\u{2028}'..='\u{202E}'
                | '\u{2060}'..='\u{2069}'
                | '\u{FEFF}'
        )
}

/// `s` with every control or reordering character written as `\u{XXXX}`.
pub fn text(s: &str) -> Cow<'_, str> {
    if !s.chars().any(hidden) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if hidden(c) {
            out.push_str(&format!("\\u{{{:04X}}}", c as u32));
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// Like [`text`], keeping line breaks (for multi-line messages the renderer indents itself).
pub fn lines(s: &str) -> String {
    s.split('\n').map(text).collect::<Vec<_>>().join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_and_bidi_characters_are_made_visible() {
        assert_eq!(text("lib/a.so"), "lib/a.so");
        assert_eq!(
            text("x\x1b[2J\x1b[32mPASS"),
            "x\\u{001B}[2J\\u{001B}[32mPASS"
        );
        assert_eq!(text("a\u{202E}os.b"), "a\\u{202E}os.b");
        assert_eq!(text("a\u{2066}b\u{2069}"), "a\\u{2066}b\\u{2069}");
        assert_eq!(text("cr\rlf\n"), "cr\\u{000D}lf\\u{000A}");
        assert_eq!(text("\u{85}c1"), "\\u{0085}c1");
        assert_eq!(text("zw\u{200B}j"), "zw\\u{200B}j");
        assert_eq!(lines("a\nb\x07"), "a\nb\\u{0007}");
        // Ordinary non-ASCII text stays as it is.
        assert_eq!(text("naïve – 内核 …"), "naïve – 内核 …");
    }
}
