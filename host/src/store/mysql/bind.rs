//! MySQL's spelling of the shared statements: `?` placeholders, lists spread one value each.

use std::fmt::Write as _;

use sqlx::mysql::MySqlArguments;
use sqlx::Arguments;

use crate::error::Result;
use crate::store::sql::{render, Arg, Slot};

fn add<'a>(bound: &mut MySqlArguments, arg: Arg<'a>) -> std::result::Result<(), String> {
    let added = match arg {
        Arg::Int(v) => bound.add(v),
        Arg::Text(v) => bound.add(v),
        // As DATETIME, not as TIMESTAMP (chrono's `DateTime<Utc>` binds as one): MariaDB turns a
        // TIMESTAMP past 2038-01-19 into NULL, and a task to run in 2099 would be refused.
        Arg::Time(t) => bound.add(t.naive_utc()),
        Arg::MaybeTime(t) => bound.add(t.map(|t| t.naive_utc())),
        Arg::Bytes(b) => bound.add(b),
        Arg::Ints(_) | Arg::Texts(_) => return Err("a list bound as one value".into()),
    };
    added.map_err(|e| e.to_string())
}

/// A shared statement in MySQL's spelling, its arguments bound in the order they stand.
pub(super) fn bind<'a>(sql: &str, args: &[Arg<'a>]) -> Result<(String, MySqlArguments)> {
    let mut bound = MySqlArguments::default();
    let sql = render(sql, args, |out, slot| match slot {
        Slot::One(i) => {
            out.push('?');
            add(&mut bound, args[i])
        }
        Slot::List { index, negated } => {
            let not = if negated { "NOT " } else { "" };
            let items: Vec<Arg<'a>> = match args[index] {
                Arg::Ints(l) => l.iter().map(|v| Arg::Int(Some(*v))).collect(),
                Arg::Texts(l) => l.iter().map(|v| Arg::Text(Some(v))).collect(),
                _ => Vec::new(),
            };
            if items.is_empty() {
                // An empty list: in it is never true, not in it always.
                let _ = write!(out, "{not}IN (SELECT NULL FROM DUAL WHERE FALSE)");
                return Ok(());
            }
            let _ = write!(out, "{not}IN ({})", vec!["?"; items.len()].join(", "));
            items.into_iter().try_for_each(|item| add(&mut bound, item))
        }
    })?;
    Ok((sql, bound))
}
