//! Uniqueness over time: how long, and in which states, a task's unique key stays taken. A key is
//! held while its task is unfinished; [`UniqueStates`] keeps it after the task ends too, and a
//! period (`--unique-for`) lets it go once that long has passed since the task was queued,
//! whatever its state.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// In which of its states a task keeps its unique key taken.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "serve", derive(utoipa::ToSchema))]
#[serde(rename_all = "lowercase")]
pub enum UniqueStates {
    /// While it is unfinished (waiting, scheduled, running, awaiting a retry): the default.
    #[default]
    Unfinished,
    /// Unfinished, or succeeded: "once, unless it failed" (a dead or cancelled task lets it go).
    Succeeded,
    /// In every state, finished ones included: "once, ever" (or for the period).
    Any,
}

impl UniqueStates {
    /// Every choice, in the order of the hold's length.
    pub const ALL: [UniqueStates; 3] = [UniqueStates::Unfinished, UniqueStates::Succeeded, UniqueStates::Any];

    /// Its name, as the command line, the API and the database write it.
    pub const fn as_str(self) -> &'static str {
        match self {
            UniqueStates::Unfinished => "unfinished",
            UniqueStates::Succeeded => "succeeded",
            UniqueStates::Any => "any",
        }
    }
}

impl std::fmt::Display for UniqueStates {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for UniqueStates {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        UniqueStates::ALL.into_iter().find(|u| u.as_str() == s).ok_or_else(|| {
            let names: Vec<&str> = UniqueStates::ALL.iter().map(|u| u.as_str()).collect();
            format!("{s:?} is not one of {}", names.join(", "))
        })
    }
}

/// The longest period a key may be held for: a hundred years of 365.25 days, as `100y` reads and
/// PostgreSQL's `interval '100 years'` is (beyond, hold it in any state).
pub const MAX_UNIQUE_FOR: Duration = Duration::from_secs(3_155_760_000);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_choice_reads_back_from_its_name_and_nothing_else_does() {
        for u in UniqueStates::ALL {
            assert_eq!(u.as_str().parse::<UniqueStates>(), Ok(u));
        }
        let refused = "done".parse::<UniqueStates>().expect_err("refused");
        assert!(refused.contains("unfinished, succeeded, any"), "{refused}");
    }

    #[test]
    fn a_hundred_years_as_written_is_the_longest_period_a_key_is_held() {
        let held = |period: &str| {
            let mut t = crate::model::NewTask::new("h", "{}");
            t.unique_key = Some("k".into());
            t.unique_for = Some(crate::text::parse_duration(period).expect("a duration"));
            t.check(1024).is_ok()
        };
        assert!(held("100y") && held("1s"));
        assert!(!held("100y 1s") && !held("999ms"));
    }
}
