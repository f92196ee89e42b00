//! The overseer's lease when its database does not answer.

use crate::common;

use std::time::Duration;

use common::locker::Locker;
use common::{Db, Env};
use taskhost::overseer::{Overseer, OverseerConfig};

/// A holder whose renewal waits on a lock stops leading while it waits, once its last renewal
/// that answered no longer counts (two thirds of the lease after it began: the lease may lapse
/// and be taken a third later); it leads again once a renewal answers in time. Before, it went
/// on leading for as long as the database kept it waiting.
async fn a_holder_whose_renewal_does_not_answer_stops_leading_before_its_lease_could_lapse(db: Db) {
    let env = Env::on(db, &[]).await;
    let cfg = OverseerConfig { lease_ttl: Duration::from_secs(3), ..Default::default() };
    let overseer = Overseer::new(env.app.store.clone(), env.app.clock.clone(), cfg);
    let lead = overseer.leadership();
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let run = tokio::spawn(overseer.run_until(stopped));
    common::wait_until(Duration::from_secs(10), "it leads", || async { lead.is_leader() }).await;
    let locker = Locker::lock(db, &env.db_url, "task_leases").await;
    common::wait_until(Duration::from_secs(20), "it stops leading while the lock is held", || async {
        !lead.is_leader()
    })
    .await;
    locker.unlock().await;
    common::wait_until(Duration::from_secs(20), "it leads again", || async { lead.is_leader() }).await;
    stop.send(true).expect("stop");
    run.await.expect("stopped");
}

on_every_database!(a_holder_whose_renewal_does_not_answer_stops_leading_before_its_lease_could_lapse);
