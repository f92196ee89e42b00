//! Text a guest handed the host, made safe to keep: bounded in bytes and storable on every
//! database.
//!
//! PostgreSQL refuses NUL bytes in text; so that the three databases keep the same thing, NUL is
//! replaced by U+FFFD (the replacement character) everywhere a guest's text is stored.

/// Replace NUL bytes by U+FFFD and cut `s` to at most `max` bytes (on a character boundary),
/// ending a cut text with `marker` (counted in `max`).
pub fn bounded(s: &str, max: usize, marker: &str) -> String {
    let clean: std::borrow::Cow<'_, str> = if s.contains('\0') { s.replace('\0', "\u{FFFD}").into() } else { s.into() };
    if clean.len() <= max {
        return clean.into_owned();
    }
    let keep = floor_char_boundary(&clean, max.saturating_sub(marker.len()));
    let mut out = String::with_capacity(keep + marker.len());
    out.push_str(&clean[..keep]);
    if marker.len() <= max {
        out.push_str(marker);
    }
    out
}

/// One guest log line as the host keeps it: line breaks, every other control character and the
/// characters that reorder or hide text escaped, so that a guest can never start a line of its
/// own or rewrite one on a terminal (host lines are told apart by their start).
pub fn one_line(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\0' => out.push('\u{FFFD}'),
            c if hidden(c) => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    out
}

/// `s` with every control character but line breaks and tabs, and every character that
/// reorders or hides text, escaped: a guest's multi-line message, safe to print.
pub fn printable(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\n' | '\t' => out.push(c),
            '\0' => out.push('\u{FFFD}'),
            c if hidden(c) => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    out
}

/// Control characters (C0, DEL, C1), line and paragraph separators, and the zero-width and
/// bidirectional marks.
fn hidden(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{2028}' | '\u{2029}' | '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' | '\u{FEFF}')
}

/// The largest index ≤ `i` that is a character boundary of `s`.
pub fn floor_char_boundary(s: &str, i: usize) -> usize {
    if i >= s.len() {
        return s.len();
    }
    let mut i = i;
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// `n` and the noun, in the plural unless `n` is 1: "1 task", "2 tasks", "3 retries", "1 dead
/// letter". The noun's last word takes the plural.
pub fn count(n: impl Into<u64>, noun: &str) -> String {
    let n = n.into();
    if n == 1 {
        return format!("1 {noun}");
    }
    match noun.strip_suffix('y') {
        Some(stem) if !stem.ends_with(['a', 'e', 'i', 'o', 'u']) => format!("{n} {stem}ies"),
        _ => format!("{n} {noun}s"),
    }
}

/// A duration for a person to read: whole milliseconds under 10 seconds, whole seconds after
/// ("1s 989ms", "2m 5s"), never nanoseconds.
pub fn duration(d: std::time::Duration) -> String {
    let rounded = if d < std::time::Duration::from_secs(10) {
        std::time::Duration::from_millis(u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
    } else {
        std::time::Duration::from_secs(d.as_secs() + u64::from(d.subsec_millis() >= 500))
    };
    humantime::format_duration(rounded).to_string()
}

/// A time with its zone. One without (`2026-01-02T03:04:05`) is refused rather than guessed.
pub fn parse_time(s: &str) -> Result<chrono::DateTime<chrono::Utc>, String> {
    if let Ok(t) = chrono::DateTime::parse_from_rfc3339(s) {
        return Ok(t.with_timezone(&chrono::Utc));
    }
    if s.parse::<chrono::NaiveDateTime>().is_ok() {
        return Err("the time has no zone: add Z (UTC) or an offset, e.g. 2026-01-02T03:04:05Z".into());
    }
    Err("expected an RFC 3339 time with a zone, e.g. 2026-01-02T03:04:05Z".into())
}

/// A duration written as text: numbers with units ("90s", "5m", "2h 30m", "30days"). The error
/// quotes the text and says what is expected.
pub fn parse_duration(s: &str) -> Result<std::time::Duration, String> {
    use humantime::DurationError as E;
    humantime::parse_duration(s.trim()).map_err(|e| {
        let why = match e {
            E::UnknownUnit { unit, .. } => format!("unknown unit \"{unit}\""),
            E::NumberExpected(_) if s.trim().is_empty() => "empty".to_string(),
            E::NumberExpected(_) => "a number is expected first".to_string(),
            E::InvalidCharacter(_) => "unexpected character".to_string(),
            E::NumberOverflow => "too large".to_string(),
            E::Empty => "empty".to_string(),
        };
        format!("\"{s}\" is not a duration ({why}): write a number and a unit, such as 90s, 5m, 2h or 30days")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_and_durations_read_as_a_person_writes_them() {
        assert_eq!(
            (count(1u64, "task"), count(0u64, "task"), count(3u64, "retry")),
            ("1 task".into(), "0 tasks".into(), "3 retries".into())
        );
        assert_eq!(
            (count(1u32, "dead letter"), count(2u32, "dead letter"), count(2u32, "day")),
            ("1 dead letter".into(), "2 dead letters".into(), "2 days".into())
        );
        let d = std::time::Duration::from_nanos(1_988_618_803);
        assert_eq!(duration(d), "1s 988ms");
        assert_eq!(duration(std::time::Duration::from_millis(125_600)), "2m 6s");
    }

    #[test]
    fn a_short_clean_text_is_kept_as_it_is() {
        assert_eq!(bounded("abc", 10, "…"), "abc");
    }

    #[test]
    fn nul_bytes_become_replacement_characters() {
        assert_eq!(bounded("a\0b", 10, "…"), "a\u{FFFD}b");
    }

    #[test]
    fn a_long_text_is_cut_to_the_limit_with_its_marker() {
        let s = bounded(&"x".repeat(100), 10, "…");
        assert_eq!(s.len(), 10);
        assert!(s.ends_with('…'));
    }

    #[test]
    fn a_cut_never_splits_a_character() {
        let s = bounded(&"é".repeat(50), 11, "~");
        assert!(s.len() <= 11 && s.ends_with('~'), "{s}");
    }

    #[test]
    fn terminal_escapes_and_hidden_marks_are_shown_not_obeyed() {
        assert_eq!(one_line("a\u{1b}[2Kb\u{200b}"), "a\\u{1b}[2Kb\\u{200b}");
        assert_eq!(printable("line 1\nline\u{1b} 2"), "line 1\nline\\u{1b} 2");
    }

    #[test]
    fn a_line_break_cannot_start_a_new_line() {
        assert_eq!(one_line("a\n[host] b\r"), "a\\n[host] b\\r");
    }
}
