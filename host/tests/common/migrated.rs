//! A database migrated as an older version left it: the migrations before one, from a copy of
//! the folder holding only them (for tests of an upgrade).

use sqlx::Connection;

/// Run `folder`'s migrations (`sqlite`, `postgres`, `mysql`) named before `before` (`"0031"`) on
/// the database at `url`; on MySQL (not MariaDB) with `mysql-only`'s files in place of theirs, as
/// the store runs them.
pub async fn migrate_before(url: &str, folder: &str, before: &str) {
    let old = tempfile::tempdir().expect("temp dir");
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../migrations");
    let mut folders = vec![folder];
    if folder == "mysql" && !is_mariadb(url).await {
        folders.push("mysql-only");
    }
    for src in folders {
        for f in std::fs::read_dir(root.join(src)).expect("migrations") {
            let f = f.expect("entry").path();
            let name = f.file_name().and_then(|n| n.to_str()).expect("name").to_string();
            if name.as_str() < before {
                std::fs::copy(&f, old.path().join(&name)).expect("copy");
            }
        }
    }
    let old = sqlx::migrate::Migrator::new(old.path()).await.expect("old migrations");
    match folder {
        "sqlite" => old.run(&mut sqlx::SqliteConnection::connect(url).await.expect("connect")).await,
        "postgres" => old.run(&mut sqlx::PgConnection::connect(url).await.expect("connect")).await,
        _ => old.run(&mut sqlx::MySqlConnection::connect(url).await.expect("connect")).await,
    }
    .expect("the old migrations");
}

/// Whether the MySQL-protocol server at `url` is MariaDB (as the store tells them apart).
pub async fn is_mariadb(url: &str) -> bool {
    let mut c = sqlx::MySqlConnection::connect(url).await.expect("connect");
    let v: String = sqlx::query_scalar("SELECT VERSION()").fetch_one(&mut c).await.expect("version");
    v.contains("MariaDB")
}
