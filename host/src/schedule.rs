//! Periodic tasks. A schedule names a cron expression (five fields, or six with seconds first;
//! `@hourly` and the like too) in a time zone, and the task to queue at each of its slots: a
//! handler, its data, a queue and a priority. The overseer's `schedules` service queues each due
//! slot once, however many overseers run (the schedule's row is locked while its slot is queued,
//! in the same transaction as the task); a task queued for a slot is due at the slot's time.
//!
//! When no overseer ran for a while (every worker down), the slots missed meanwhile are queued as
//! one task for the latest of them ([`Missed::Once`], the default), or passed over
//! ([`Missed::Skip`]: a slot is queued only within [`SKIP_AFTER`] of its time).

use std::str::FromStr;

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::error::{Error, Result};

/// Longest schedule name, in bytes.
pub const MAX_NAME_BYTES: usize = 128;

/// With [`Missed::Skip`], a slot older than this when the overseer first sees it is passed over.
pub const SKIP_AFTER: chrono::Duration = chrono::Duration::seconds(60);

/// What to do with slots missed while no overseer ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Default)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "serve", derive(utoipa::ToSchema))]
pub enum Missed {
    /// Queue one task for the latest missed slot.
    #[default]
    Once,
    /// Queue nothing for them: the next slot runs as usual.
    Skip,
}

impl Missed {
    /// The word stored and written in the configuration.
    pub const fn as_str(self) -> &'static str {
        match self {
            Missed::Once => "once",
            Missed::Skip => "skip",
        }
    }
}

impl FromStr for Missed {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "once" => Ok(Missed::Once),
            "skip" => Ok(Missed::Skip),
            other => Err(Error::invalid("missed", format!("{other:?}: use once or skip"))),
        }
    }
}

/// A schedule to create.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "serve", derive(utoipa::ToSchema))]
pub struct NewSchedule {
    /// Its name, unique.
    pub name: String,
    /// When: a cron expression (five fields, or six with seconds).
    pub cron: String,
    /// An IANA time zone (`Europe/Paris`), or `UTC`.
    pub time_zone: String,
    /// The handler of the tasks it queues.
    pub handler: String,
    /// Their data (a JSON document).
    pub data: String,
    /// Their queue.
    pub queue: String,
    /// Their priority.
    pub priority: i32,
    /// What to do about slots missed while no overseer ran.
    pub missed: Missed,
}

impl NewSchedule {
    /// Every `cron` slot in UTC: `{}` to `handler` on the default queue.
    pub fn new(name: impl Into<String>, cron: impl Into<String>, handler: impl Into<String>) -> Self {
        NewSchedule {
            name: name.into(),
            cron: cron.into(),
            time_zone: "UTC".into(),
            handler: handler.into(),
            data: "{}".into(),
            queue: crate::model::DEFAULT_QUEUE.into(),
            priority: 0,
            missed: Missed::Once,
        }
    }
}

/// A schedule as stored: what it was made with, and its state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "serve", derive(utoipa::ToSchema))]
pub struct Schedule {
    /// What it was made with.
    #[serde(flatten)]
    pub spec: NewSchedule,
    /// Since when it is paused (it queues nothing); None: it is not.
    pub paused_on: Option<DateTime<Utc>>,
    /// Declared in the operator's configuration file (or by [`crate::client::Client::declare_schedules`]):
    /// kept in line with it by the overseer, not removed by hand.
    pub declared: bool,
    /// The latest slot queued or passed over.
    pub last_slot: DateTime<Utc>,
    /// When it was made.
    pub created_on: DateTime<Utc>,
}

/// What [`crate::store::Store::sync_schedules`] changed, by schedule name.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Synced {
    /// Schedules made.
    pub added: Vec<String>,
    /// Schedules changed.
    pub updated: Vec<String>,
    /// Schedules removed.
    pub removed: Vec<String>,
}

impl Synced {
    /// Whether nothing changed.
    pub fn is_empty(&self) -> bool {
        self.added.is_empty() && self.updated.is_empty() && self.removed.is_empty()
    }
}

/// The fields of a cron expression, with their ranges, when it has five (or six, seconds first).
const FIELDS: [(&str, u32, u32); 6] = [
    ("second", 0, 59),
    ("minute", 0, 59),
    ("hour", 0, 23),
    ("day of month", 1, 31),
    ("month", 1, 12),
    ("day of week", 0, 7),
];

/// Five or six fields, each number within its field's range; the error names the field. (The
/// rest, names and `L`/`W`/`#`, is croner's to judge.)
fn check_fields(cron: &str) -> std::result::Result<(), String> {
    if cron.trim_start().starts_with('@') {
        return Ok(());
    }
    let fields: Vec<&str> = cron.split_whitespace().collect();
    let named = match fields.len() {
        5 => &FIELDS[1..],
        6 => &FIELDS[..],
        n => {
            return Err(format!(
                "{n} fields: a cron expression has 5 (minute hour day-of-month month day-of-week) or 6 (seconds first)"
            ))
        }
    };
    for (field, &(name, min, max)) in fields.iter().zip(named) {
        for part in field.split([',', '-']) {
            let (base, step) = part.split_once('/').map_or((part, None), |(b, s)| (b, Some(s)));
            if let Ok(n) = base.parse::<u32>() {
                if n < min || n > max {
                    return Err(format!("{name} field {field:?}: {n} is out of range ({min} to {max})"));
                }
            }
            if let Some(Ok(n)) = step.map(str::parse::<u32>) {
                if n == 0 || n > max.max(1) {
                    return Err(format!("{name} field {field:?}: a step of {n} is out of range (1 to {})", max.max(1)));
                }
            }
        }
    }
    Ok(())
}

/// A cron expression in a time zone, checked.
#[derive(Debug, Clone)]
pub struct Slots {
    cron: croner::Cron,
    zone: chrono_tz::Tz,
}

impl Slots {
    /// Check `cron` and `time_zone`; one line naming what is wrong otherwise.
    pub fn new(cron: &str, time_zone: &str) -> Result<Slots> {
        let zone = time_zone.parse::<chrono_tz::Tz>().map_err(|_| {
            Error::invalid("time zone", format!("{time_zone:?} is not an IANA time zone (e.g. Europe/Paris, UTC)"))
        })?;
        let bad = |why: String| Error::invalid("cron expression", format!("{cron:?}: {why}"));
        check_fields(cron).map_err(bad)?;
        let cron = croner::Cron::from_str(cron).map_err(|e| bad(e.to_string()))?;
        Ok(Slots { cron, zone })
    }

    /// The latest slot at or before `t`.
    pub fn latest(&self, t: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let local = t.with_timezone(&self.zone);
        self.cron.find_previous_occurrence(&local, true).ok().map(|s| s.with_timezone(&Utc))
    }

    /// The first slot after `t`.
    pub fn next(&self, t: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let local = t.with_timezone(&self.zone);
        self.cron.find_next_occurrence(&local, false).ok().map(|s| s.with_timezone(&Utc))
    }
}

/// What a schedule's overseer does at some time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Plan {
    /// The slot to queue a task for, if any.
    pub queue: Option<DateTime<Utc>>,
    /// The schedule's new `last_slot`; None: unchanged.
    pub last_slot: Option<DateTime<Utc>>,
}

/// What a schedule's overseer does at `now`.
pub fn plan(s: &Schedule, now: DateTime<Utc>) -> Result<Plan> {
    let slots = Slots::new(&s.spec.cron, &s.spec.time_zone)?;
    let Some(latest) = slots.latest(now).filter(|l| *l > s.last_slot) else {
        return Ok(Plan { queue: None, last_slot: None });
    };
    let queue = match s.spec.missed {
        Missed::Once => true,
        Missed::Skip => now - latest <= SKIP_AFTER,
    };
    Ok(Plan { queue: queue.then_some(latest), last_slot: Some(latest) })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).map(|t| t.with_timezone(&Utc)).unwrap_or_default()
    }

    #[test]
    fn slots_follow_the_time_zone() {
        let slots = Slots::new("0 9 * * *", "Europe/Paris").expect("valid");
        assert_eq!(slots.latest(at("2026-07-01T12:00:00Z")), Some(at("2026-07-01T07:00:00Z")), "09:00 CEST");
        assert_eq!(slots.next(at("2026-12-01T12:00:00Z")), Some(at("2026-12-02T08:00:00Z")), "09:00 CET");
        let seconds = Slots::new("*/10 * * * * *", "UTC").expect("six fields: seconds");
        assert_eq!(seconds.next(at("2026-01-01T00:00:01Z")), Some(at("2026-01-01T00:00:10Z")));
    }

    #[test]
    fn a_bad_expression_or_zone_is_named() {
        let err = |cron: &str| Slots::new(cron, "UTC").err().map(|e| e.to_string()).unwrap_or_default();
        assert!(err("61 * * * *").ends_with(r#""61 * * * *": minute field "61": 61 is out of range (0 to 59)"#));
        assert!(err("0 9 * 13 *").ends_with(r#"month field "13": 13 is out of range (1 to 12)"#));
        assert!(err("*/0 * * * * *").ends_with(r#"second field "*/0": a step of 0 is out of range (1 to 59)"#));
        assert!(err("0 9 * *").contains("4 fields: a cron expression has 5 (minute hour"), "{}", err("0 9 * *"));
        assert!(err("0 0 9 * * * 2027").contains("7 fields"));
        assert!(err("0 9 * * MON-FRI").is_empty() && err("@daily").is_empty() && err("0 9 1-5,10 * *").is_empty());
        let err = Slots::new("* * * * *", "Mars/Olympus").err().map(|e| e.to_string()).unwrap_or_default();
        assert!(err.contains("Mars/Olympus"), "{err}");
    }

    #[test]
    fn missed_slots_are_queued_once_or_skipped() {
        let mut s = Schedule {
            spec: NewSchedule::new("n", "*/5 * * * *", "h"),
            paused_on: None,
            declared: false,
            last_slot: at("2026-01-01T00:00:00Z"),
            created_on: at("2026-01-01T00:00:00Z"),
        };
        let now = at("2026-01-01T01:02:00Z");
        let latest = Some(at("2026-01-01T01:00:00Z"));
        let p = |queue, last_slot| Plan { queue, last_slot };
        assert_eq!(plan(&s, now).expect("plan"), p(latest, latest));
        s.spec.missed = Missed::Skip;
        assert_eq!(plan(&s, now).expect("plan"), p(None, latest), "two minutes late: passed over");
        assert_eq!(plan(&s, at("2026-01-01T01:00:30Z")).expect("plan"), p(latest, latest), "on time");
        s.last_slot = at("2026-01-01T01:00:00Z");
        assert_eq!(plan(&s, now).expect("plan"), p(None, None), "nothing new");
    }
}
