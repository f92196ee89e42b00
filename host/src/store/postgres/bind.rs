//! PostgreSQL's spelling of the shared statements: `$n` placeholders, lists as arrays.

use std::fmt::Write as _;

use sqlx::postgres::PgArguments;
use sqlx::Arguments;

use crate::error::{Error, Result};
use crate::store::sql::{render, Arg, Slot};

/// A shared statement in PostgreSQL's spelling, with its arguments (those up to the highest
/// placeholder it uses: PostgreSQL refuses arguments a statement does not use).
pub(super) fn bind<'a>(sql: &str, args: &[Arg<'a>]) -> Result<(String, PgArguments)> {
    let mut used = 0;
    let sql = render(sql, args, |out, slot| {
        let _ = match slot {
            Slot::One(i) => {
                used = used.max(i + 1);
                write!(out, "${}", i + 1)
            }
            Slot::List { index, negated } => {
                used = used.max(index + 1);
                let test = if negated { "<> ALL" } else { "= ANY" };
                write!(out, "{test}(${})", index + 1)
            }
        };
        Ok(())
    })?;
    let mut bound = PgArguments::default();
    for arg in &args[..used] {
        let added = match *arg {
            Arg::Int(v) => bound.add(v),
            Arg::Text(v) => bound.add(v),
            Arg::Time(t) => bound.add(t),
            Arg::MaybeTime(t) => bound.add(t),
            Arg::Ints(l) => bound.add(l),
            Arg::Texts(l) => bound.add(l),
            Arg::Bytes(b) => bound.add(b),
        };
        added.map_err(|e| Error::invalid("argument", e.to_string()))?;
    }
    Ok((sql, bound))
}
