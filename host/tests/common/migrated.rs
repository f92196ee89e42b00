//! A database migrated as an older version left it: the migrations before one, from a copy of
//! the folder holding only them (for tests of an upgrade).

use sqlx::Connection;

/// Run `folder`'s migrations (`sqlite`, `postgres`, `mysql`) named before `before` (`"0031"`) on
/// the database at `url`.
pub async fn migrate_before(url: &str, folder: &str, before: &str) {
    let old = tempfile::tempdir().expect("temp dir");
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../migrations").join(folder);
    for f in std::fs::read_dir(&src).expect("migrations") {
        let f = f.expect("entry").path();
        let name = f.file_name().and_then(|n| n.to_str()).expect("name").to_string();
        if name.as_str() < before {
            std::fs::copy(&f, old.path().join(&name)).expect("copy");
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
