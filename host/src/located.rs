//! Where a TOML error is: its line and column, and the key whose value it is in, as
//! `[table] key`. An operator's file or a manifest with a wrong type, a duplicate key or a syntax
//! error gets one line that says where to look.

use toml::de::{DeTable, DeValue};
use toml::Spanned;

/// `line L, column C: [table] key: message` (the key when the error is inside a value).
pub fn describe(e: &toml::de::Error, text: &str) -> String {
    describe_message(e, text, e.message().trim())
}

/// The same with the message given (a manifest's, with quoted values left out).
pub fn describe_message(e: &toml::de::Error, text: &str, message: &str) -> String {
    let message = crate::text::one_line(message);
    let Some(span) = e.span() else { return message };
    let at = span.start;
    match key_at(text, at) {
        Some(key) => format!("{}: {key}: {message}", position(text, at)),
        None => format!("{}: {message}", position(text, at)),
    }
}

/// `line L, column C` of the key at `path` (`["worker", "concurrency"]`), if the text has it.
pub fn key_position(text: &str, path: &[&str]) -> Option<String> {
    let doc = DeTable::parse(text).ok()?;
    let (last, tables) = path.split_last()?;
    let mut table = doc.get_ref();
    for name in tables {
        match find(table, name).map(|(_, v)| v.get_ref()) {
            Some(DeValue::Table(t)) => table = t,
            _ => return None,
        }
    }
    let (key, _) = find(table, last)?;
    Some(position(text, key.span().start))
}

/// `message` (`[table.sub] key: why`, or `[table.sub]: why`, as a check after reading says it)
/// with the line and column of its key, or of its table, put first where the text has them.
pub fn locate_message(text: &str, message: &str) -> String {
    let Some((table, rest)) = message.strip_prefix('[').and_then(|m| m.split_once(']')) else {
        return message.to_string();
    };
    let mut path: Vec<&str> = table.split('.').collect();
    // The key: a name right after the table, followed by `:` or ` =`.
    let after = rest.strip_prefix(' ').unwrap_or("");
    let end = after.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(after.len());
    let (key, tail) = after.split_at(end);
    let table_at = key_position(text, &path);
    if !key.is_empty() && (tail.starts_with(':') || tail.starts_with(" =")) {
        path.push(key);
    }
    // The key's place, else (a word that is no key of the table) the table's.
    match key_position(text, &path).or(table_at) {
        Some(at) => format!("{at}: {message}"),
        None => message.to_string(),
    }
}

type Entry<'t, 'i> = (&'t Spanned<toml::de::DeString<'i>>, &'t Spanned<DeValue<'i>>);

fn find<'t, 'i>(table: &'t DeTable<'i>, name: &str) -> Option<Entry<'t, 'i>> {
    table.iter().find(|(k, _)| k.get_ref().as_ref() == name)
}

/// `line L, column C` of byte `at`.
fn position(text: &str, at: usize) -> String {
    let head = text.get(..at).unwrap_or(text);
    let line = head.bytes().filter(|&b| b == b'\n').count() + 1;
    let column = head.chars().rev().take_while(|&c| c != '\n').count() + 1;
    format!("line {line}, column {column}")
}

/// The innermost key whose value holds byte `at`, written `[table.sub] key`; None when the text
/// does not parse (a syntax error) or `at` is in no value.
fn key_at(text: &str, at: usize) -> Option<String> {
    let doc = DeTable::parse(text).ok()?;
    let mut path = Vec::new();
    let mut best = None;
    walk_table(doc.get_ref(), at, &mut path, &mut best);
    let path = best?;
    let (key, table) = path.split_last()?;
    let key = if table.is_empty() { key.clone() } else { format!("[{}] {key}", table.join(".")) };
    // A manifest's keys are the plugin author's: one short line.
    Some(crate::text::bounded(&crate::text::one_line(&key), 200, "…"))
}

fn walk_table(table: &DeTable<'_>, at: usize, path: &mut Vec<String>, best: &mut Option<Vec<String>>) {
    for (key, value) in table {
        path.push(key.get_ref().to_string());
        // An unknown key: the error is at the key itself.
        holds(key.span(), at, path, best);
        walk_value(value, at, path, best);
        path.pop();
    }
}

/// Deeper keys come later in the walk: the last that holds `at` is the innermost.
fn holds(span: std::ops::Range<usize>, at: usize, path: &[String], best: &mut Option<Vec<String>>) {
    if span.start <= at && at < span.end.max(span.start + 1) && best.as_ref().is_none_or(|b| b.len() <= path.len()) {
        *best = Some(path.to_vec());
    }
}

fn walk_value(value: &Spanned<DeValue<'_>>, at: usize, path: &mut Vec<String>, best: &mut Option<Vec<String>>) {
    holds(value.span(), at, path, best);
    match value.get_ref() {
        DeValue::Table(t) => walk_table(t, at, path, best),
        DeValue::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                if let Some(last) = path.last_mut() {
                    let was = std::mem::replace(last, format!("{last}[{i}]"));
                    walk_value(item, at, path, best);
                    if let Some(last) = path.last_mut() {
                        *last = was;
                    }
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_checks_message_is_placed_at_its_key_or_else_at_its_table() {
        let text = "[worker]\nconcurrency = 2\n\n[queues.payments]\nmax_running = 0\n";
        let at = |m: &str| locate_message(text, m);
        assert_eq!(
            at("[queues.payments] max_running = 0 is out"),
            "line 5, column 1: [queues.payments] max_running = 0 is out"
        );
        assert_eq!(at("[queues.payments] rate_limit: bad"), "line 4, column 9: [queues.payments] rate_limit: bad");
        assert_eq!(at("[queues.payments]: no name"), "line 4, column 9: [queues.payments]: no name");
        assert_eq!(at("[queues.other] max_running: 0"), "[queues.other] max_running: 0", "no such table");
        assert_eq!(at("no table named"), "no table named");
    }

    fn error_of(text: &str) -> String {
        #[derive(Debug, serde::Deserialize)]
        #[allow(dead_code)]
        struct File {
            limits: Option<Limits>,
            handlers: Option<toml::Table>,
        }
        #[derive(Debug, serde::Deserialize)]
        #[allow(dead_code)]
        struct Limits {
            memory_mb: Option<u64>,
        }
        match toml::from_str::<File>(text) {
            Ok(_) => String::new(),
            Err(e) => describe(&e, text),
        }
    }

    #[test]
    fn a_wrong_type_names_its_line_column_table_and_key() {
        let e = error_of("# the operator's\n[limits]\nmemory_mb = \"64\"\n");
        assert_eq!(e, "line 3, column 13: [limits] memory_mb: invalid type: string \"64\", expected u64");
    }

    #[test]
    fn a_syntax_error_and_a_duplicate_key_name_their_line() {
        let e = error_of("[limits]\nmemory_mb = 64\nmemory_mb = 65\n");
        assert!(e.starts_with("line 3, column 1: ") && e.contains("duplicate key"), "{e}");
        let e = error_of("[limits\nmemory_mb = 64\n");
        assert!(e.starts_with("line 1, column "), "{e}");
    }
}
