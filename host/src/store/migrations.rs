//! Each database's migrations, built into the library from `migrations/<database>/`.
//!
//! sqlx's `migrate!` macro embeds them too, but its macro crate compiles every database driver
//! (SQLite's C library with it) a second time, for the compiler: minutes of a first build, and
//! again for each feature set checked. Here each file is named in [`embedded!`] and read by
//! `include_str!`, and resolved as sqlx resolves a directory (`<VERSION>_<DESCRIPTION>.sql`): the
//! same versions, descriptions and checksums, so a database migrated by either agrees with the
//! other. A test compares the two, and finds a file in the directory left out of a list.

use std::borrow::Cow;

use futures::future::BoxFuture;
use sqlx::error::BoxDynError;
use sqlx::migrate::{Migration, MigrationSource, MigrationType};

/// One database's migrations: each file's name and text, and the files a server of another
/// flavor runs in their place (MySQL beside MariaDB), by the same names.
#[derive(Debug, Clone, Copy)]
pub struct Embedded(pub &'static [(&'static str, &'static str)], pub &'static [(&'static str, &'static str)]);

/// The migrations of `migrations/$dir`, each file named.
macro_rules! embedded {
    ($dir:literal: $($file:literal),* $(,)?) => {
        Embedded(&[$((
            $file,
            include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/../migrations/", $dir, "/", $file)),
        )),*], &[])
    };
}

/// The migrations of `migrations/sqlite/`.
#[cfg(feature = "sqlite")]
pub const SQLITE: Embedded = embedded!("sqlite":
    "0001_tables.sql",
    "0002_leases.sql",
    "0003_runner_handlers.sql",
    "0004_parity.sql",
    "0005_registration.sql",
    "0006_queue_pauses.sql",
    "0007_schedules.sql",
    "0008_cancelled.sql",
    "0009_declared_schedules.sql",
    "0010_stats.sql",
    "0011_run_limits.sql",
    "0012_runs_without_task_key.sql",
    "0013_runs_made_by_claims.sql",
    "0014_running_run_on_its_task.sql",
    "0015_runner_queues.sql",
    "0016_snoozes.sql",
    "0017_children.sql",
    "0018_dependencies.sql",
    "0019_signals.sql",
    "0020_stats_snoozed.sql",
    "0021_unique_over_time.sql",
    "0022_flow_limits.sql",
    "0023_fair_shares.sql",
    "0024_key_index.sql",
    "0025_rate_per_key.sql",
    "0026_key_fuel.sql",
    "0027_components.sql",
    "0028_sql_add.sql",
    "0029_dead_index.sql",
    "0030_succeeded_run_on_its_task.sql",
    "0031_sql_add_options.sql",
    "0032_key_turns_laid.sql",
    "0033_key_relays.sql",
    "0034_key_index_scheduled.sql",
    "0035_key_relays_per_turn.sql",
    "0036_sql_add_utf8.sql",
    "0037_sql_add_data_limit.sql",
    "0038_sql_add_utf8_bounds.sql",
    "0039_sql_add_limit_as_number.sql",
    "0040_sql_add_days_that_exist.sql",
    "0041_sql_add_key_unicode_space.sql",
    "0042_sql_add_names_unpadded.sql",
    "0043_delete_on_success.sql",
    "0044_sql_after_keeps.sql",
    "0045_sql_after_a_deleted_task.sql",
    "0046_sql_add_without_copies.sql",
    "0047_status_check_by_comparisons.sql",
    "0048_sql_add_in_one_trigger.sql",
);

/// The migrations of `migrations/postgres/`.
#[cfg(feature = "postgres")]
pub const POSTGRES: Embedded = embedded!("postgres":
    "0001_tables.sql",
    "0002_leases.sql",
    "0003_claim_indexes.sql",
    "0004_runner_handlers.sql",
    "0005_registration.sql",
    "0006_queue_pauses.sql",
    "0007_schedules.sql",
    "0008_cancelled.sql",
    "0009_declared_schedules.sql",
    "0010_stats.sql",
    "0011_run_limits.sql",
    "0012_runs_without_task_key.sql",
    "0013_runs_made_by_claims.sql",
    "0014_running_run_on_its_task.sql",
    "0015_runner_queues.sql",
    "0016_snoozes.sql",
    "0017_children.sql",
    "0018_dependencies.sql",
    "0019_signals.sql",
    "0020_stats_snoozed.sql",
    "0021_unique_over_time.sql",
    "0022_flow_limits.sql",
    "0023_fair_shares.sql",
    "0024_key_index.sql",
    "0025_rate_per_key.sql",
    "0026_key_fuel.sql",
    "0027_components.sql",
    "0028_sql_add.sql",
    "0029_dead_index.sql",
    "0030_succeeded_run_on_its_task.sql",
    "0031_sql_add_options.sql",
    "0032_key_turns_laid.sql",
    "0033_key_relays.sql",
    "0034_key_index_scheduled.sql",
    "0035_key_relays_per_turn.sql",
    "0036_sql_add_data_limit.sql",
    "0037_sql_add_limit_definer.sql",
    "0038_sql_add_key_unicode_space.sql",
    "0039_sql_add_names_unpadded.sql",
    "0040_delete_on_success.sql",
    "0041_sql_after_keeps.sql",
    "0042_sql_after_locks_deleting_only.sql",
    "0043_sql_after_a_deleted_task.sql",
    "0044_sql_add_json_data.sql",
);

/// The migrations of `migrations/mysql/`.
#[cfg(feature = "mysql")]
pub const MYSQL: Embedded = embedded!("mysql":
    "0001_tables.sql",
    "0002_leases.sql",
    "0003_runner_handlers.sql",
    "0004_parity.sql",
    "0005_registration.sql",
    "0006_queue_pauses.sql",
    "0007_schedules.sql",
    "0008_cancelled.sql",
    "0009_declared_schedules.sql",
    "0010_stats.sql",
    "0011_run_limits.sql",
    "0012_runs_without_task_key.sql",
    "0013_status_indexes.sql",
    "0014_runs_made_by_claims.sql",
    "0015_running_run_on_its_task.sql",
    "0016_runner_queues.sql",
    "0017_snoozes.sql",
    "0018_children.sql",
    "0019_dependencies.sql",
    "0020_signals.sql",
    "0021_stats_snoozed.sql",
    "0022_unique_over_time.sql",
    "0023_flow_limits.sql",
    "0024_fair_shares.sql",
    "0025_key_index.sql",
    "0026_rate_per_key.sql",
    "0027_key_fuel.sql",
    "0028_components.sql",
    "0029_sql_add.sql",
    "0030_succeeded_run_on_its_task.sql",
    "0031_sql_add_options.sql",
    "0032_sql_add_fast.sql",
    "0033_key_turns_laid.sql",
    "0034_sql_add_escaped_names.sql",
    "0035_key_relays.sql",
    "0036_key_relays_per_turn.sql",
    "0037_sql_add_fast_key.sql",
    "0038_sql_add_fast_options.sql",
    "0039_sql_add_data_limit.sql",
    "0040_sql_add_limit_unlocked.sql",
    "0041_sql_add_names_unpadded.sql",
    "0042_delete_on_success.sql",
    "0043_sql_after_keeps.sql",
    "0044_sql_after_locks_deleting_only.sql",
    "0045_deps_after_by_met.sql",
    "0046_sql_after_a_deleted_task.sql",
    "0047_sql_add_mysql.sql",
    "0048_sql_add_mysql_fixes.sql",
    "0049_sql_add_queue_priority.sql",
    "0050_sql_add_time_and_after.sql",
    "0051_sql_add_id_and_time.sql",
);

/// The files of `migrations/mysql-only/`: MySQL runs each in place of the file of
/// `migrations/mysql/` of its name, where MariaDB's SQL is not MySQL's (a redefined column's
/// CHECK, the `taskhost_add` procedures). Each names a file of [`MYSQL`] (a test checks), so both flavors have one list of
/// versions and descriptions; a database's checksums are its flavor's.
#[cfg(feature = "mysql")]
pub const MYSQL_ONLY: Embedded = embedded!("mysql-only":
    "0008_cancelled.sql",
    "0017_snoozes.sql",
    "0019_dependencies.sql",
    "0029_sql_add.sql",
    "0031_sql_add_options.sql",
    "0032_sql_add_fast.sql",
    "0034_sql_add_escaped_names.sql",
    "0037_sql_add_fast_key.sql",
    "0038_sql_add_fast_options.sql",
    "0039_sql_add_data_limit.sql",
    "0040_sql_add_limit_unlocked.sql",
    "0041_sql_add_names_unpadded.sql",
    "0043_sql_after_keeps.sql",
    "0044_sql_after_locks_deleting_only.sql",
    "0046_sql_after_a_deleted_task.sql",
    "0047_sql_add_mysql.sql",
    "0048_sql_add_mysql_fixes.sql",
    "0049_sql_add_queue_priority.sql",
    "0050_sql_add_time_and_after.sql",
    "0051_sql_add_id_and_time.sql",
);

impl Embedded {
    /// These migrations with `other`'s files run in place of those of their names.
    pub const fn replaced_by(self, other: Embedded) -> Embedded {
        Embedded(self.0, other.0)
    }

    /// Each migration as sqlx reads it from a directory, by version.
    pub fn migrations(self) -> Result<Vec<Migration>, BoxDynError> {
        let mut out = Vec::with_capacity(self.0.len());
        for &(file, sql) in self.0 {
            let sql = self.1.iter().find(|(f, _)| *f == file).map_or(sql, |&(_, other)| other);
            let named = || format!("migration {file}: not named <VERSION>_<DESCRIPTION>.sql");
            let (version, rest) = file.split_once('_').filter(|(_, r)| r.ends_with(".sql")).ok_or_else(named)?;
            let version: i64 = version.parse().map_err(|_| named())?;
            let kind = MigrationType::from_filename(rest);
            let description = rest.trim_end_matches(kind.suffix()).replace('_', " ");
            let no_tx = sql.starts_with("-- no-transaction");
            out.push(Migration::new(version, Cow::Owned(description), kind, Cow::Borrowed(sql), no_tx));
        }
        if let Some((file, _)) = self.1.iter().find(|(f, _)| !self.0.iter().any(|(g, _)| g == f)) {
            return Err(format!("migration {file} replaces no migration of its name").into());
        }
        out.sort_by_key(|m| m.version);
        Ok(out)
    }
}

impl MigrationSource<'static> for Embedded {
    fn resolve(self) -> BoxFuture<'static, Result<Vec<Migration>, BoxDynError>> {
        Box::pin(async move { self.migrations() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn same_as_the_directory(dir: &str, embedded: Embedded) {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../migrations").join(dir);
        let from_dir = sqlx::migrate::resolve_blocking(&path).expect("the directory resolves");
        let from_dir: Vec<&Migration> = from_dir.iter().map(|(m, _)| m).collect();
        let ours = embedded.migrations().expect("resolves");
        assert_eq!(ours.len(), from_dir.len(), "{dir}: a file of the directory is not in the list, or one too many");
        for (a, b) in ours.iter().zip(from_dir) {
            let key = |m: &Migration| (m.version, m.description.to_string(), m.checksum.to_vec(), m.no_tx);
            assert_eq!(key(a), key(b), "{dir}: migration {}", b.version);
            assert_eq!(a.migration_type, b.migration_type, "{dir}: migration {}", b.version);
        }
    }

    #[cfg(feature = "sqlite")]
    #[test]
    fn the_sqlite_migrations_built_in_are_those_of_the_directory_as_sqlx_reads_it() {
        same_as_the_directory("sqlite", SQLITE);
    }

    #[cfg(feature = "postgres")]
    #[test]
    fn the_postgres_migrations_built_in_are_those_of_the_directory_as_sqlx_reads_it() {
        same_as_the_directory("postgres", POSTGRES);
    }

    #[cfg(feature = "mysql")]
    #[test]
    fn the_mysql_migrations_built_in_are_those_of_the_directory_as_sqlx_reads_it() {
        same_as_the_directory("mysql", MYSQL);
        same_as_the_directory("mysql-only", MYSQL_ONLY);
    }

    #[cfg(feature = "mysql")]
    #[test]
    fn mysql_runs_its_own_files_in_place_of_mariadbs_by_name_and_the_same_versions() {
        let maria = MYSQL.migrations().expect("resolves");
        let mysql = MYSQL.replaced_by(MYSQL_ONLY).migrations().expect("resolves");
        assert_eq!(maria.len(), mysql.len());
        for (a, b) in maria.iter().zip(&mysql) {
            assert_eq!((a.version, &a.description), (b.version, &b.description));
            let replaced = MYSQL_ONLY.0.iter().any(|(f, _)| f.starts_with(&format!("{:04}_", a.version)));
            assert_eq!(a.checksum != b.checksum, replaced, "migration {}", a.version);
        }
        let stray = Embedded(MYSQL.0, &[("0999_nothing.sql", "DO 0;")]);
        assert!(stray.migrations().is_err(), "a file replacing no migration is refused");
    }
}
