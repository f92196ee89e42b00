//! What the event stream's reader last saw, and what changed at its next look.
//!
//! A look reads five parts (see [`Store::glimpse`](crate::store::Store::glimpse)); each task in
//! them is told when it differs from what the look before saw of it, or was not seen then. A
//! task that was running, awaiting a retry or asked for, and is in no part now, is read again by
//! id to tell where it went (scheduled again after a failure or a put-back, waiting for a
//! signal). The newest tasks are read again for [`OVERLAP`] after the newest seen, so one whose
//! write committed up to that late after its id is not missed. The finished are read from the
//! newest end seen on; the [`OVERLAP`] before it is only counted (how many ends, the sums of their
//! ids and attempts: one row back a state) and read again when that differs from the ends the view saw
//! there, so an end committed up to that late after its time is told without a second of ends
//! read again at each look (at 15,000 ends a second that read was cut at every look).
//! A part cut at its limit moves the look on past what it read (no overlap), and when the
//! finished were cut, or more than [`MAX_TOLD`] tasks changed at once, the streams are told
//! they lagged: a client then reads again what it shows.

use std::collections::{HashMap, HashSet, VecDeque};
use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio::time::Instant;

use super::Told;
use crate::error::Result;
use crate::model::TaskId;
use crate::store::{Brief, Look, SharedStore};

/// How long a new or finished task is read again after the newest seen.
pub const OVERLAP: Duration = Duration::from_secs(1);
/// Rows of each part a look reads.
const LIMIT: u32 = 5_000;
/// Tasks told changed in one look, at most; past it the streams are told they lagged instead.
pub const MAX_TOLD: usize = 5_000;

/// What the reader last saw.
#[derive(Default)]
pub(super) struct View {
    /// Each task seen at the last look, as it was.
    known: HashMap<TaskId, Brief>,
    /// The tasks whose absence at a look means they changed: running, awaiting a retry, asked.
    tracked: HashSet<TaskId>,
    /// The newest id seen at each look of the last [`OVERLAP`] (and one before).
    newest: VecDeque<(Instant, TaskId)>,
    /// The finished are read from this end on (the database's clock), and whether it is where a
    /// cut part ended (read on from there, no overlap).
    finished: Option<DateTime<Utc>>,
    finished_cut: bool,
    /// The ends seen within [`OVERLAP`] before the newest end seen: each task's end, and the
    /// attempt of the run that ended it.
    ends: HashMap<TaskId, End>,
    /// Whether a first look was made (it tells nothing changed).
    primed: bool,
}

impl View {
    pub fn primed(&self) -> bool {
        self.primed
    }

    /// Look, and tell what changed since the look before, in id order. Nothing is changed in
    /// the view unless the whole look succeeds.
    pub async fn look(&mut self, store: &SharedStore, asked: Vec<TaskId>, fresh: &HashSet<TaskId>) -> Result<Told> {
        let overlap = chrono::Duration::from_std(OVERLAP).unwrap_or_default();
        if !self.primed {
            self.newest = VecDeque::from([(Instant::now(), store.newest_task_id().await?)]);
            self.finished = Some(store.server_time().await?.unwrap_or_else(Utc::now));
            self.finished_cut = true;
        }
        // Read from a cut on; else counted for the overlap before the newest end seen.
        let window = self.finished.filter(|_| !self.finished_cut).map(|t| (t - overlap, t));
        let look = Look {
            newer_than: Some(self.since()),
            running: true,
            finished_after: self.finished,
            finished_until: None,
            finished_window: window,
            ids: asked,
            limit: LIMIT,
        };
        let mut glimpse = store.glimpse(&look).await?;
        let (late, mut ends, late_cut) = self.late_ends(store, window, glimpse.window).await?;
        glimpse.finished.extend(late);
        let full = |part: &[Brief]| part.len() >= LIMIT as usize;
        // Past a running part cut at its limit, no absence means anything.
        let running_cut = full(&glimpse.running) || full(&glimpse.retrying);
        let new_cut = glimpse.new.last().map(|b| b.id).filter(|_| full(&glimpse.new));
        let newest = glimpse.new.iter().map(|b| b.id).max();
        let ended = glimpse.finished.iter().filter_map(|b| b.finished_on).max();
        // Ends may have been missed: more since the last look than a look reads, or more in the
        // window read again.
        let ends_cut = glimpse.finished_cut.is_some() || late_cut;
        let tracked: HashSet<TaskId> =
            glimpse.running.iter().chain(&glimpse.retrying).chain(&glimpse.asked).map(|b| b.id).collect();
        let only_asked = only_asked(&glimpse);
        // Read later, so truer: the finished last.
        let mut seen: HashMap<TaskId, Brief> = HashMap::new();
        for part in [glimpse.new, glimpse.running, glimpse.retrying, glimpse.asked, glimpse.finished] {
            seen.extend(part.into_iter().map(|b| (b.id, b)));
        }
        let gone: Vec<TaskId> = match running_cut {
            true => Vec::new(),
            false => self.tracked.iter().copied().filter(|id| !seen.contains_key(id)).take(LIMIT as usize).collect(),
        };
        if !gone.is_empty() {
            // A task deleted meanwhile is not found, and not told.
            let again = store.glimpse(&Look { ids: gone, limit: LIMIT, ..Look::default() }).await?;
            seen.extend(again.asked.into_iter().map(|b| (b.id, b)));
        }
        // Every end seen, whichever part found it: the window's counts take them all.
        ends.extend(seen.values().filter_map(|b| b.finished_on.map(|t| (b.id, (t, b.attempt)))));
        let told = self.tell(&seen, fresh, &only_asked, ends_cut);
        // The look succeeded: the view moves on.
        let now = Instant::now();
        match new_cut {
            // Read on from the cut: the overlap matters only at the newest.
            Some(cut) => self.newest = VecDeque::from([(now, cut)]),
            None => {
                let before = self.newest.back().map_or(0, |(_, id)| *id);
                self.newest.push_back((now, newest.map_or(before, |n| n.max(before))));
                while self.newest.get(1).is_some_and(|(at, _)| now - *at >= OVERLAP) {
                    self.newest.pop_front();
                }
            }
        }
        match glimpse.finished_cut {
            Some(cut) => (self.finished, self.finished_cut) = (Some(cut), true),
            None => (self.finished, self.finished_cut) = (self.finished.max(ended), false),
        }
        // Kept for the overlap before the newest end: the next look's window.
        if let Some(newest) = self.finished {
            ends.retain(|_, (t, _)| *t > newest - overlap);
        }
        self.ends = ends;
        self.known = seen;
        self.tracked = tracked;
        self.primed = true;
        Ok(told)
    }

    /// What a look that saw `seen` tells: the tasks changed since the last look (none on the
    /// first), those `fresh` asks for, and whether ends may have been missed (`ends_cut`, or more
    /// changed than a look tells). A task the view did not know, read only because a stream asked
    /// for it (`only_asked`: not new, running, retrying or ended since), is told to the streams
    /// that asked, not to the others as changed: a task ended long ago was told to every stream
    /// whenever one asked for it.
    fn tell(
        &self,
        seen: &HashMap<TaskId, Brief>,
        fresh: &HashSet<TaskId>,
        only_asked: &HashSet<TaskId>,
        ends_cut: bool,
    ) -> Told {
        let mut told = Told { lagged: self.primed && ends_cut, ..Told::default() };
        for b in seen.values() {
            let known = self.known.get(&b.id);
            if self.primed && known != Some(b) && (known.is_some() || !only_asked.contains(&b.id)) {
                told.changed.push(b.clone().into());
            }
            if fresh.contains(&b.id) {
                told.fresh.push(b.clone().into());
            }
        }
        told.changed.sort_by_key(|s| s.brief.id);
        if told.changed.len() > MAX_TOLD {
            told.changed = Vec::new();
            told.lagged = true;
        }
        told
    }

    /// When the ends the database counts in `window` (`found`) differ from those the view saw
    /// there (one committed late, or one gone: deleted, replayed), the window read again: the
    /// ends not seen before, the view's ends with the window's as they are now, and whether the
    /// read was cut (some may be missed).
    async fn late_ends(
        &self,
        store: &SharedStore,
        window: Option<(DateTime<Utc>, DateTime<Utc>)>,
        found: Option<(u64, i64, i64)>,
    ) -> Result<(Vec<Brief>, HashMap<TaskId, End>, bool)> {
        let mut ends = self.ends.clone();
        let (Some((after, until)), Some(found)) = (window, found) else { return Ok((Vec::new(), ends, false)) };
        if found == window_sums(&ends, after, until) {
            return Ok((Vec::new(), ends, false));
        }
        let again = Look { finished_after: Some(after), finished_until: Some(until), limit: LIMIT, ..Look::default() };
        let again = store.glimpse(&again).await?;
        let cut = again.finished_cut.is_some();
        if !cut {
            ends.retain(|_, (t, _)| *t <= after || *t > until);
        }
        let mut late = Vec::new();
        for b in again.finished {
            match b.finished_on.map(|t| (t, b.attempt)) {
                Some(end) if self.ends.get(&b.id) == Some(&end) => drop(ends.insert(b.id, end)),
                _ => late.push(b),
            }
        }
        Ok((late, ends, cut))
    }

    /// The id the newest tasks are read from: the newest seen at least [`OVERLAP`] ago.
    fn since(&self) -> TaskId {
        self.newest.front().map_or(0, |(_, id)| *id)
    }
}

/// A task's end: when, and the attempt of the run that ended it.
type End = (DateTime<Utc>, u32);

/// How many of `ends` fall after `after` and up to `until`, the sum of their ids and of their
/// attempts: as [`Glimpse::window`](crate::store::Glimpse::window) counts the database's.
fn window_sums(ends: &HashMap<TaskId, End>, after: DateTime<Utc>, until: DateTime<Utc>) -> (u64, i64, i64) {
    let within = ends.iter().filter(|(_, (t, _))| *t > after && *t <= until);
    within.fold((0, 0, 0), |(n, ids, attempts), (id, (_, attempt))| {
        (n + 1, ids.wrapping_add(*id), attempts.wrapping_add(i64::from(*attempt)))
    })
}

/// The tasks a look read only because a stream asked for them by id (not new, running, retrying
/// or ended since): nothing says they changed.
fn only_asked(glimpse: &crate::store::Glimpse) -> HashSet<TaskId> {
    let parts = [&glimpse.new, &glimpse.running, &glimpse.retrying, &glimpse.finished];
    let by_change: HashSet<TaskId> = parts.iter().flat_map(|p| p.iter().map(|b| b.id)).collect();
    glimpse.asked.iter().map(|b| b.id).filter(|id| !by_change.contains(id)).collect()
}
