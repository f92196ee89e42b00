//! Flow-control limits of a queue or a handler, across all workers: runs in flight at most
//! (`max_running`), starts per period (`rate_limit`, with an optional burst: [`Rate`]) and, on
//! a queue, runs in flight and starts per period of each key (`max_running_per_key`,
//! `rate_limit_per_key`) and the fuel a turn of its keys buys (`fuel_per_turn`); and a key's
//! weight, its share
//! against other keys. Kept in the database (`task_run_limits`): the operator's file sets them
//! at a worker's start, `taskhost limits set` and the API change them live, and every claim
//! reads them.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{OnSuccess, Rate};

/// The limits on one queue, handler or key; a field left `None` does not limit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Limit {
    /// Runs in flight at once, on all workers together (a queue, a handler).
    pub max_running: Option<u32>,
    /// Starts per period, on all workers together (a queue, a handler).
    pub rate: Option<Rate>,
    /// Runs in flight at once of each key, on all workers together (a queue).
    pub max_running_per_key: Option<u32>,
    /// Starts per period of each key, on all workers together (a queue): each key of the queue
    /// is paced apart.
    pub rate_per_key: Option<Rate>,
    /// Its share against other keys: a key of weight 3 is given three turns to a key of
    /// weight 1's (a key; [`DEFAULT_WEIGHT`] unless set).
    pub weight: Option<u32>,
    /// The fuel one turn of a key buys (a queue): a key's turns are spaced by the fuel its runs
    /// burn on average, so a key whose runs burn ten times another's is given a tenth of the
    /// turns (see `store::transitions::fair`).
    pub fuel_per_turn: Option<u64>,
    /// What a success does with its task (a queue): kept, or deleted where nothing reads it
    /// again (see `store::transitions::ends`).
    pub on_success: OnSuccess,
}

/// A key's weight unless one is set.
pub const DEFAULT_WEIGHT: u32 = 1;

impl Limit {
    /// The largest `max_running`.
    pub const MAX_RUNNING: u32 = 1_000_000;
    /// The largest weight (a turn is spaced by 1 µs / weight, in whole nanoseconds).
    pub const MAX_WEIGHT: u32 = 1_000;
    /// The least `fuel_per_turn` (about 0.2 ms of guest work): a key's turns, spaced at most a
    /// millisecond apart (a thousand turns' worth of fuel a run), come due faster than its runs
    /// could take them.
    pub const MIN_FUEL_PER_TURN: u64 = 1_000_000;
    /// The largest `fuel_per_turn`.
    pub const MAX_FUEL_PER_TURN: u64 = 1_000_000_000_000_000;

    /// Whether it limits anything.
    pub fn is_some(&self) -> bool {
        self.max_running.is_some()
            || self.rate.is_some()
            || self.max_running_per_key.is_some()
            || self.rate_per_key.is_some()
            || self.weight.is_some()
            || self.fuel_per_turn.is_some()
            || self.on_success == OnSuccess::Delete
    }

    /// Whether its queue's or handler's claims must count and pace (a cap or a rate, of its own
    /// or per key): the limited claim. A weight and a fuel per turn only space turns at an add.
    pub fn limits_claims(&self) -> bool {
        self.max_running.is_some() || self.rate.is_some() || self.is_per_key()
    }

    /// Whether it limits each key of its queue apart (a cap or a rate per key).
    pub fn is_per_key(&self) -> bool {
        self.max_running_per_key.is_some() || self.rate_per_key.is_some()
    }

    /// Whether it holds what its scope takes: a key a weight only, a queue or a handler no weight,
    /// and only a queue a cap or a rate per key and a fuel per turn.
    pub fn check_for(&self, scope: LimitScope) -> Result<(), String> {
        let queue_only = self.is_per_key() || self.fuel_per_turn.is_some() || self.on_success == OnSuccess::Delete;
        let fits = match scope {
            LimitScope::Key => self.max_running.is_none() && self.rate.is_none() && !queue_only,
            LimitScope::Queue => self.weight.is_none(),
            LimitScope::Handler => self.weight.is_none() && !queue_only,
        };
        match (fits, scope) {
            (true, _) => Ok(()),
            (false, LimitScope::Key) => Err("a key takes a weight only (its queue caps, paces and weighs each key: \
                 max_running_per_key, rate_limit_per_key, fuel_per_turn; and deletes its successes: on_success)"
                .into()),
            (false, LimitScope::Queue) => Err("a queue takes no weight (a key does: key:NAME)".into()),
            (false, LimitScope::Handler) => Err("a handler takes max_running and a rate only".into()),
        }
    }

    /// A `fuel_per_turn` checked.
    pub fn fuel_per_turn(n: i128) -> Result<u64, String> {
        match u64::try_from(n) {
            Ok(n) if (Self::MIN_FUEL_PER_TURN..=Self::MAX_FUEL_PER_TURN).contains(&n) => Ok(n),
            _ => Err(format!(
                "fuel_per_turn = {n} is out of range ({} to {})",
                Self::MIN_FUEL_PER_TURN,
                Self::MAX_FUEL_PER_TURN
            )),
        }
    }

    /// A weight checked.
    pub fn weight(n: i64) -> Result<u32, String> {
        match u32::try_from(n) {
            Ok(n) if (1..=Self::MAX_WEIGHT).contains(&n) => Ok(n),
            _ => Err(format!("weight = {n} is out of range (1 to {})", Self::MAX_WEIGHT)),
        }
    }

    /// A configuration section's `max_running`, `rate_limit` and `rate_burst`, checked.
    pub fn from_settings(max_running: Option<i64>, rate: Option<&str>, burst: Option<i64>) -> Result<Limit, String> {
        let rate = Self::rate_setting(rate, burst, "")?;
        Ok(Limit { max_running: max_running.map(Limit::max_running).transpose()?, rate, ..Limit::default() })
    }

    /// A section's `rate_limit{suffix}` with its `rate_burst{suffix}`, checked.
    pub fn rate_setting(rate: Option<&str>, burst: Option<i64>, suffix: &str) -> Result<Option<Rate>, String> {
        match (rate, burst) {
            (None, None) => Ok(None),
            (None, Some(_)) => Err(format!("rate_burst{suffix} needs a rate_limit{suffix}")),
            (Some(r), burst) => {
                let burst =
                    u32::try_from(burst.unwrap_or(0)).map_err(|_| format!("rate_burst{suffix} is 0 or more"))?;
                let rate = Rate::parse(r).and_then(|r| r.with_burst(burst));
                Ok(Some(rate.map_err(|e| format!("rate_limit{suffix}: {e}"))?))
            }
        }
    }

    /// A `max_running` checked: 0 would hold the tasks forever (pausing says so plainly).
    pub fn max_running(n: i64) -> Result<u32, String> {
        match u32::try_from(n) {
            Ok(n) if (1..=Self::MAX_RUNNING).contains(&n) => Ok(n),
            _ if n == 0 => {
                Err("max_running = 0 would never run a task: pause the queue instead (taskhost pause)".into())
            }
            _ => Err(format!("max_running = {n} is out of range (1 to {})", Self::MAX_RUNNING)),
        }
    }
}

/// A live change to a limit (`taskhost limits set`, the API's `PUT /limits/{name}`): a field
/// given sets its value (`null` takes it out), a field left out stays as it is.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
#[cfg_attr(feature = "serve", derive(utoipa::ToSchema))]
pub struct LimitChange {
    /// Runs in flight at once, on all workers together (1 to 1,000,000; null: no limit).
    #[serde(default, deserialize_with = "given")]
    #[cfg_attr(feature = "serve", schema(value_type = Option<u32>))]
    pub max_running: Option<Option<u32>>,
    /// Starts per period, on all workers together, as `N/PERIOD` (`5/1s`; null: no limit).
    #[serde(default, deserialize_with = "given")]
    #[cfg_attr(feature = "serve", schema(value_type = Option<String>))]
    pub rate_limit: Option<Option<String>>,
    /// With a rate: starts allowed at once beyond its pace (0 to 1,000,000).
    pub rate_burst: Option<u32>,
    /// A queue's runs in flight of each key at once (1 to 1,000,000; null: no limit).
    #[serde(default, deserialize_with = "given")]
    #[cfg_attr(feature = "serve", schema(value_type = Option<u32>))]
    pub max_running_per_key: Option<Option<u32>>,
    /// A queue's starts per period of each key, as `N/PERIOD` (`5/1s`; null: no limit).
    #[serde(default, deserialize_with = "given")]
    #[cfg_attr(feature = "serve", schema(value_type = Option<String>))]
    pub rate_limit_per_key: Option<Option<String>>,
    /// With a rate per key: starts each key may take at once beyond its pace (0 to 1,000,000).
    pub rate_burst_per_key: Option<u32>,
    /// A key's weight: its turns to a weight-1 key's one (1 to 1,000; null: 1).
    #[serde(default, deserialize_with = "given")]
    #[cfg_attr(feature = "serve", schema(value_type = Option<u32>))]
    pub weight: Option<Option<u32>>,
    /// A queue's fuel a turn of a key buys: its keys' turns spaced by the fuel their runs burn
    /// (1,000,000 to 10^15; null: turns counted by tasks).
    #[serde(default, deserialize_with = "given")]
    #[cfg_attr(feature = "serve", schema(value_type = Option<u64>))]
    pub fuel_per_turn: Option<Option<u64>>,
    /// What a queue's successes do with their tasks: `keep` (as by default) or `delete`.
    pub on_success: Option<OnSuccess>,
}

/// A field given, even as `null` (Some(None)), told apart from one left out (None).
fn given<'de, D: serde::Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Option<Option<T>>, D::Error> {
    Option::<T>::deserialize(d).map(Some)
}

impl LimitChange {
    /// Apply the change to `limit`, or say what is wrong with it.
    pub fn apply(&self, limit: &mut Limit) -> Result<(), String> {
        if *self == LimitChange::default() {
            return Err(
                "nothing to change: give a max running, a rate, a burst, a cap or a rate per key, a weight or a fuel \
                 per turn, or on_success"
                    .into(),
            );
        }
        if let Some(max) = self.max_running {
            limit.max_running = max.map(|n| Limit::max_running(i64::from(n))).transpose()?;
        }
        if let Some(max) = self.max_running_per_key {
            limit.max_running_per_key = max.map(|n| Limit::max_running(i64::from(n))).transpose()?;
        }
        if let Some(weight) = self.weight {
            limit.weight = weight.map(|n| Limit::weight(i64::from(n))).transpose()?;
        }
        if let Some(fuel) = self.fuel_per_turn {
            limit.fuel_per_turn = fuel.map(|n| Limit::fuel_per_turn(i128::from(n))).transpose()?;
        }
        if let Some(on_success) = self.on_success {
            limit.on_success = on_success;
        }
        change_rate(&mut limit.rate, self.rate_limit.as_ref(), self.rate_burst, "")?;
        change_rate(&mut limit.rate_per_key, self.rate_limit_per_key.as_ref(), self.rate_burst_per_key, "_per_key")
    }
}

/// A rate changed: its text given (None: taken out), its burst given; a burst kept when only the
/// rate changes (a burst given with the rate is checked against it alone, not the one it replaces).
fn change_rate(
    rate: &mut Option<Rate>,
    text: Option<&Option<String>>,
    burst: Option<u32>,
    suffix: &str,
) -> Result<(), String> {
    if let Some(text) = text {
        let kept = burst.unwrap_or(rate.map_or(0, |r| r.burst));
        *rate = text.as_deref().map(|r| Rate::parse(r).and_then(|r| r.with_burst(kept))).transpose()?;
    }
    if let Some(burst) = burst {
        let r = rate.ok_or_else(|| format!("rate_burst{suffix} needs a rate_limit{suffix}"))?;
        *rate = Some(r.with_burst(burst)?);
    }
    Ok(())
}

/// What a limit is on: its row's name is `queue:NAME`, `handler:NAME` or `key:NAME`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "serve", derive(utoipa::ToSchema))]
pub enum LimitScope {
    /// The runs of one queue.
    Queue,
    /// The runs of one handler, whatever their queue.
    Handler,
    /// The tasks of one key (a tenant), whatever their queue.
    Key,
}

impl LimitScope {
    /// Its prefix in a limit's name.
    pub fn as_str(self) -> &'static str {
        match self {
            LimitScope::Queue => "queue",
            LimitScope::Handler => "handler",
            LimitScope::Key => "key",
        }
    }

    /// `queue:NAME`, `handler:NAME` or `key:NAME`, read.
    pub fn parse_name(name: &str) -> Result<(LimitScope, &str), String> {
        let bad = || format!("\"{name}\" names no limit: write queue:NAME, handler:NAME or key:NAME");
        let (scope, rest) = name.split_once(':').ok_or_else(bad)?;
        let scope = match scope {
            "queue" => LimitScope::Queue,
            "handler" => LimitScope::Handler,
            "key" => LimitScope::Key,
            _ => return Err(bad()),
        };
        let refusal = match scope {
            LimitScope::Queue => super::queue_refusal(rest),
            LimitScope::Handler => {
                (!super::valid_handler_name(rest)).then(|| "1 to 128 letters, digits, - and _".to_string())
            }
            LimitScope::Key => super::key_refusal(rest),
        };
        if let Some(reason) = refusal {
            return Err(format!("\"{rest}\" is no {} name: {reason}", scope.as_str()));
        }
        Ok((scope, rest))
    }

    /// The name of the limit on `name`.
    pub fn name(self, name: &str) -> String {
        format!("{}:{name}", self.as_str())
    }
}

/// The limits in force, per queue, handler and key, as a worker last read them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunLimits {
    /// Queue name → its limits.
    pub queues: BTreeMap<String, Limit>,
    /// Handler name → its limits.
    pub handlers: BTreeMap<String, Limit>,
    /// Key → its weight (read where keyed tasks are added, not by claims).
    pub keys: BTreeMap<String, Limit>,
}

impl RunLimits {
    /// Whether no limit is set.
    pub fn is_empty(&self) -> bool {
        self.queues.is_empty() && self.handlers.is_empty() && self.keys.is_empty()
    }

    /// The limits of one scope.
    pub fn of(&self, scope: LimitScope) -> &BTreeMap<String, Limit> {
        match scope {
            LimitScope::Queue => &self.queues,
            LimitScope::Handler => &self.handlers,
            LimitScope::Key => &self.keys,
        }
    }

    /// Set (or, with nothing limited, take out) the limit on `name` of `scope`.
    pub fn set(&mut self, scope: LimitScope, name: &str, limit: Limit) {
        let all = match scope {
            LimitScope::Queue => &mut self.queues,
            LimitScope::Handler => &mut self.handlers,
            LimitScope::Key => &mut self.keys,
        };
        if limit.is_some() {
            all.insert(name.to_string(), limit);
        } else {
            all.remove(name);
        }
    }

    /// Whether a claim of `queues` and `handlers` (None: any) touches a limit on claims.
    pub fn apply_to(&self, queues: &[String], handlers: Option<&[String]>) -> bool {
        queues.iter().any(|q| self.limits_claims_of(q))
            || match handlers {
                Some(hs) => hs.iter().any(|h| self.handlers.get(h).is_some_and(Limit::limits_claims)),
                None => self.handlers.values().any(Limit::limits_claims),
            }
    }

    /// Whether a claim of `queues` and `handlers` touches a cap on runs in flight (a queue's, a
    /// handler's or a queue's per key: room it lacks frees when a run ends, anywhere) or a queue
    /// weighed by fuel (whose keys' turns may come due a millisecond apart, after a claim): what
    /// nothing notifies, and an idle worker polls for.
    pub fn wants_short_poll(&self, queues: &[String], handlers: &[String]) -> bool {
        let capped =
            |l: &Limit| l.max_running.is_some() || l.max_running_per_key.is_some() || l.fuel_per_turn.is_some();
        queues.iter().any(|q| self.queues.get(q).is_some_and(capped))
            || handlers.iter().any(|h| self.handlers.get(h).is_some_and(capped))
    }

    /// Whether the claims of `queue` are limited ([`Limit::limits_claims`]).
    pub fn limits_claims_of(&self, queue: &str) -> bool {
        self.queues.get(queue).is_some_and(Limit::limits_claims)
    }

    /// Whether `queue`'s successes delete their tasks.
    pub fn deletes_successes(&self, queue: &str) -> bool {
        self.queues.get(queue).is_some_and(|l| l.on_success == OnSuccess::Delete)
    }

    /// The fuel a turn of `queue`'s keys buys, where it weighs its keys by fuel.
    pub fn fuel_per_turn(&self, queue: &str) -> Option<u64> {
        self.queues.get(queue).and_then(|l| l.fuel_per_turn)
    }
}

#[cfg(test)]
#[path = "limits_tests.rs"]
mod tests;
