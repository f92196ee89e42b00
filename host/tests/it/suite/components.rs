//! The store suite's cases for components published into the database (`taskhost deploy`).

use super::*;
use sha2::{Digest, Sha256};
use taskhost::store::components::{NewVersion, ReleaseAction, PIECE_BYTES};

/// Bytes that differ from piece to piece (a piece put back in the wrong place would show).
fn component(len: usize, seed: u8) -> Vec<u8> {
    (0..len).map(|i| (i as u64).wrapping_mul(2_654_435_761).wrapping_add(u64::from(seed)) as u8).collect()
}

fn digest(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

fn version<'a>(handler: &'a str, bytes: &'a [u8], digest: &'a str, manifest: Option<&'a str>) -> NewVersion<'a> {
    NewVersion { handler, bytes, digest, manifest, by: "ops@host-a" }
}

/// A deploy stores a component in pieces and reads it back whole; deploying it again changes
/// nothing, and with a new manifest releases it again; each deploy makes its version active; a
/// rollback goes to the version active before, or to the one a digest's start names; versions
/// and releases are listed newest first; the release mark moves with each release.
pub async fn deployed_versions_are_stored_in_pieces_released_in_order_and_rolled_back(store: SharedStore) {
    assert_eq!(store.release_mark().await.expect("mark"), 0);
    assert!(store.active_versions().await.expect("active").is_empty());
    // Two and a half pieces: more than one statement's value on a small MySQL packet.
    let big = component(PIECE_BYTES * 5 / 2, 1);
    let small = component(1000, 2);
    let (d_big, d_small) = (digest(&big), digest(&small));
    let first = store.deploy(&version("mail", &big, &d_big, None), t0()).await.expect("deploy");
    assert!(first.stored && first.release.is_some(), "{first:?}");
    let read = store.component(&d_big, big.len() as u64).await.expect("read").expect("stored");
    assert!(read == big, "the component read back differs ({} bytes of {})", read.len(), big.len());
    let refused = store.component(&d_big, big.len() as u64 - 1).await;
    assert!(refused.is_err(), "a component over the bound is refused before it is read");
    assert_eq!(store.component(&"0".repeat(64), 1 << 30).await.expect("read"), None);
    let mark = store.release_mark().await.expect("mark");
    assert_eq!(Some(mark), first.release);

    let again = store.deploy(&version("mail", &big, &d_big, None), t0() + secs(1)).await.expect("deploy");
    assert_eq!((again.release, again.stored), (None, false), "the same version again changes nothing");
    assert_eq!(store.release_mark().await.expect("mark"), mark);

    // The same bytes as another handler: stored once, released for that handler.
    let other = store.deploy(&version("digest", &big, &d_big, None), t0() + secs(2)).await.expect("deploy");
    assert!(!other.stored && other.release.is_some(), "{other:?}");

    let manifest = "[limits]\nfuel = 1000000\n";
    let second =
        store.deploy(&version("mail", &small, &d_small, Some(manifest)), t0() + secs(3)).await.expect("deploy");
    assert!(second.stored && second.release > other.release, "{second:?}");
    let active = store.active_versions().await.expect("active");
    let mail = active.iter().find(|a| a.handler == "mail").expect("mail is active");
    assert_eq!((mail.digest.as_str(), mail.manifest.as_deref()), (d_small.as_str(), Some(manifest)));
    assert_eq!(active.iter().map(|a| a.handler.as_str()).collect::<Vec<_>>(), ["digest", "mail"]);

    let versions = store.versions("mail").await.expect("versions");
    let listed: Vec<(&str, bool, i64)> = versions.iter().map(|v| (v.digest.as_str(), v.active, v.size)).collect();
    assert_eq!(listed, [(d_small.as_str(), true, 1000), (d_big.as_str(), false, big.len() as i64)]);
    assert_eq!(versions[1].deployed_by, "ops@host-a");
    assert_eq!(versions[1].deployed_on, t0());

    // A new manifest for the active version is a release of its own: workers see the change.
    let relimited = "[limits]\nfuel = 2000000\n";
    let third =
        store.deploy(&version("mail", &small, &d_small, Some(relimited)), t0() + secs(4)).await.expect("deploy");
    assert!(third.release > second.release && !third.stored, "{third:?}");

    let back = store.rollback("mail", None, "ops@host-b", t0() + secs(5)).await.expect("rollback");
    assert_eq!(
        (back.digest.as_str(), back.action, back.released_by.as_str()),
        (d_big.as_str(), ReleaseAction::Rollback, "ops@host-b")
    );
    let active = store.active_versions().await.expect("active");
    assert_eq!(active.iter().find(|a| a.handler == "mail").map(|a| a.digest.as_str()), Some(d_big.as_str()));
    assert_eq!(store.release_mark().await.expect("mark"), back.id);
    let forward = store.rollback("mail", Some(&d_small[..8]), "ops", t0() + secs(6)).await.expect("to a prefix");
    assert_eq!(forward.digest, d_small);

    let refusals = [
        (store.rollback("mail", Some(&d_small[..10]), "ops", t0()).await, "is the active version already"),
        (store.rollback("mail", Some("ffff0000"), "ops", t0()).await, "no version ffff0000"),
        (store.rollback("nobody", None, "ops", t0()).await, "nothing deployed"),
        (store.rollback("digest", None, "ops", t0()).await, "no earlier version"),
    ];
    for (refused, says) in refusals {
        let message = refused.expect_err("refused").to_string();
        assert!(message.contains(says), "{message:?} should say {says:?}");
    }
    let releases = store.releases("mail", 10).await.expect("releases");
    let actions: Vec<ReleaseAction> = releases.iter().map(|r| r.action).collect();
    use ReleaseAction::{Deploy, Rollback};
    assert_eq!(actions, [Rollback, Rollback, Deploy, Deploy, Deploy]);
    assert_eq!(store.releases("mail", 2).await.expect("releases").len(), 2);
    assert!(store.version("mail", &d_big).await.expect("version").is_some_and(|v| !v.active));
    assert_eq!(store.version_digests("mail").await.expect("digests"), {
        let mut both = vec![d_big.clone(), d_small.clone()];
        both.sort();
        both
    });
    assert_eq!(store.version("mail", &"0".repeat(64)).await.expect("version"), None);
}

/// Each claim reads the version its run runs from the handler's newest release, in the claim
/// itself: a run claimed after a release runs the version it released; a task pinned to a version
/// runs that one; a handler never deployed names none.
pub async fn a_claim_names_the_version_its_handlers_newest_release_made_active(store: SharedStore) {
    let (v1, v2) = (component(300, 3), component(400, 4));
    let (d1, d2) = (digest(&v1), digest(&v2));
    store.deploy(&version("mail", &v1, &d1, None), t0()).await.expect("deploy");
    let tasks = vec![NewTask::new("mail", "{}"), NewTask::new("mail", "{}"), NewTask::new("file", "{}")];
    store.add_tasks(&tasks, t0()).await.expect("add");
    let r = runner(&store, t0()).await;
    let queues = ["default".to_string()];
    let first = store.claim(r, &queues, 1, t0() + secs(1), DAY).await.expect("claim");
    assert_eq!(first.iter().map(|c| c.digest.as_deref()).collect::<Vec<_>>(), [Some(d1.as_str())]);
    store.deploy(&version("mail", &v2, &d2, None), t0() + secs(2)).await.expect("deploy");
    let rest = store.claim(r, &queues, 10, t0() + secs(3), DAY).await.expect("claim");
    let named: Vec<(&str, Option<&str>)> = rest.iter().map(|c| (c.handler.as_str(), c.digest.as_deref())).collect();
    assert_eq!(named, [("mail", Some(d2.as_str())), ("file", None)]);

    let refused = store.add_tasks(&[NewTask::new("mail", "{}").with_version(&d1[..12])], t0()).await;
    assert!(refused.is_err(), "the start of a digest is resolved by the client, never stored");
    store.add_tasks(&[NewTask::new("mail", "{}").with_version(&d1)], t0() + secs(4)).await.expect("add");
    let pinned = store.claim(r, &queues, 10, t0() + secs(5), DAY).await.expect("claim");
    assert_eq!(pinned.iter().map(|c| c.digest.as_deref()).collect::<Vec<_>>(), [Some(d1.as_str())]);
    let task = store.get_task(pinned[0].task_id).await.expect("get").expect("task");
    assert_eq!(task.version.as_deref(), Some(d1.as_str()));
    let listed = store.versions("mail").await.expect("versions");
    let counts: Vec<(bool, i64)> = listed.iter().map(|v| (v.digest == d1, v.pinned)).collect();
    assert_eq!(counts, [(false, 0), (true, 1)], "the running pinned task counts");
}

/// Two deploys of the same component at once both succeed, and it is stored once.
pub async fn deploys_of_one_component_at_once_store_it_once(a: SharedStore, b: SharedStore) {
    let bytes = component(PIECE_BYTES + 10, 5);
    let d = digest(&bytes);
    let (one, two) = (version("one", &bytes, &d, None), version("two", &bytes, &d, None));
    let (x, y) = tokio::join!(a.deploy(&one, t0()), b.deploy(&two, t0()));
    let (x, y) = (x.expect("first deploy"), y.expect("second deploy"));
    assert!(x.stored != y.stored, "stored once: {x:?} {y:?}");
    assert_eq!(a.component(&d, 1 << 30).await.expect("read").as_deref(), Some(&bytes[..]));
}

/// The overseer's retirement deletes a version superseded before the retention, and its
/// component once no version is of it; it keeps the active version whatever its age, a version
/// superseded since, and one an unfinished task is pinned to (until that task is finished); the
/// releases stay, and a rollback cannot go to a deleted version.
pub async fn versions_superseded_before_the_retention_are_retired_unless_active_or_pinned(store: SharedStore) {
    let (a, b, c) = (component(PIECE_BYTES + 1, 7), component(500, 8), component(600, 9));
    let (da, db, dc) = (digest(&a), digest(&b), digest(&c));
    store.deploy(&version("mail", &a, &da, None), t0()).await.expect("deploy");
    // The same bytes in another handler, active there: its component stays.
    store.deploy(&version("file", &a, &da, None), t0() + secs(5)).await.expect("deploy");
    store.deploy(&version("mail", &b, &db, None), t0() + secs(10)).await.expect("deploy");
    store.deploy(&version("mail", &c, &dc, None), t0() + secs(20)).await.expect("deploy");
    let pinned = store.add_tasks(&[NewTask::new("mail", "{}").with_version(&db)], t0() + secs(21)).await.expect("add");

    let retired = store.retire_versions(t0() + secs(15), 10).await.expect("retire");
    assert_eq!((retired.versions, retired.components), (1, 0), "the first version alone; its bytes serve file");
    assert_eq!(store.component(&da, 1 << 30).await.expect("read").as_deref(), Some(&a[..]));
    let after = store.retire_versions(t0() + secs(86_400), 10).await.expect("retire");
    assert_eq!(after.versions, 0, "the active version and the pinned one stay");

    store.cancel_tasks(&[pinned[0].id], t0() + secs(30)).await.expect("cancel");
    let retired = store.retire_versions(t0() + secs(86_400), 10).await.expect("retire");
    assert_eq!((retired.versions, retired.components, retired.bytes), (1, 1, 500), "{retired:?}");
    assert_eq!(store.component(&db, 1 << 30).await.expect("read"), None, "its component went with it");
    let kept: Vec<String> = store.versions("mail").await.expect("versions").into_iter().map(|v| v.digest).collect();
    assert_eq!(kept, std::slice::from_ref(&dc));
    assert_eq!(store.releases("mail", 10).await.expect("releases").len(), 3, "the history stays");
    let back = store.rollback("mail", None, "ops", t0() + secs(86_400)).await;
    assert!(matches!(back, Err(taskhost::Error::NoVersion { .. })), "{back:?}");
    assert_eq!(store.active_versions().await.expect("active").len(), 2);
    assert_eq!(store.retire_versions(t0() + secs(400 * 86_400), 10).await.expect("retire").versions, 0);
}
