//! The schema's parts: column kinds, columns, tables and indexes (see the parent module).

/// A column's kind; see the module's table for each database's type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A 64-bit key, generated.
    Id,
    /// A 64-bit integer.
    Int,
    /// A UTC time, to the microsecond.
    Time,
    /// Text of at most this many characters (indexed on MySQL).
    Str(u32),
    /// Text of any length.
    Text,
    /// Bytes (a piece of a component).
    Bytes,
}

/// A column, as every database must have it.
#[derive(Debug, Clone, Copy)]
pub struct Column {
    /// Its name.
    pub name: &'static str,
    /// Its kind.
    pub kind: Kind,
    /// Whether it may be NULL.
    pub nullable: bool,
    /// The default, as SQL text without quotes or casts (`'running'` is `running`).
    pub default: Option<&'static str>,
}

/// A table, as every database must have it.
#[derive(Debug, Clone, Copy)]
pub struct Table {
    /// Its name.
    pub name: &'static str,
    /// Its columns, in order.
    pub columns: &'static [Column],
}

/// How an index is built on MySQL, which has no partial indexes.
#[derive(Debug, Clone, Copy)]
pub enum OnMySql {
    /// The same columns (the index has no filter).
    Same,
    /// These columns instead (the filter's status column first).
    Columns(&'static [&'static str]),
    /// An index on this generated column, NULL outside the filter, then on `then`; the queries
    /// name the column (MariaDB uses such an index only then: see
    /// [`crate::store::dialect::Dialect::AWAITING_RETRY`]).
    Generated {
        /// The generated column (stored).
        column: &'static str,
        /// Its kind.
        kind: Kind,
        /// What it holds.
        expression: &'static str,
        /// The index's further columns.
        then: &'static [&'static str],
    },
    /// No index: the one named serves its queries (it leads with the same status).
    Covered(&'static str),
}

/// An index, as every database must have it.
#[derive(Debug, Clone, Copy)]
pub struct Index {
    /// Its name.
    pub name: &'static str,
    /// Its table.
    pub table: &'static str,
    /// Its columns, in order.
    pub columns: &'static [&'static str],
    /// Whether it is unique.
    pub unique: bool,
    /// PostgreSQL and SQLite: the partial index's condition, as written in the migrations.
    pub filter: Option<&'static str>,
    /// What stands for it on MySQL, which has no partial indexes.
    pub mysql: OnMySql,
}

pub(super) const fn col(name: &'static str, kind: Kind) -> Column {
    Column { name, kind, nullable: false, default: None }
}

pub(super) const fn null(name: &'static str, kind: Kind) -> Column {
    Column { name, kind, nullable: true, default: None }
}

pub(super) const fn def(name: &'static str, kind: Kind, default: &'static str) -> Column {
    Column { name, kind, nullable: false, default: Some(default) }
}
