//! The tests that stop their database server: workers under partitions, slow and lossy links,
//! kills and a server restart ([`partitions`]), and workers whose server stops and starts under
//! them ([`restarts`]) or under a deploy ([`deploys`]). They run on a PostgreSQL cluster and a MariaDB instance of their own
//! (`scripts/own-servers.sh`, started by `scripts/test-services.sh`), so the rest of the suite runs
//! beside them; and in one test, so that they take turns on those servers holding one test thread
//! (a test waiting for its turn would hold another).

mod deploys;
mod fan_out;
mod limited;
mod partitions;
mod restarts;
mod witness;

use crate::common::Db;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partitions_then_server_restarts_on_postgres_then_mysql() {
    partitions::chaos(Db::Postgres).await;
    partitions::chaos(Db::MySql).await;
    restarts::survives_a_restart(Db::Postgres).await;
    restarts::survives_a_restart(Db::MySql).await;
    deploys::a_deploy_cut_off_by_a_restart_leaves_nothing_half_done(Db::Postgres).await;
    deploys::a_deploy_cut_off_by_a_restart_leaves_nothing_half_done(Db::MySql).await;
}
