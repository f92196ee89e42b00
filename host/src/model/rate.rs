//! A rate limit's arithmetic: starts per period, paced, with a burst (a generic cell rate
//! algorithm whose mark each limited claim moves on under its limit's row lock).

use std::fmt;
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};

/// Starts allowed per period, across all workers: `count` per `period`, paced evenly (one every
/// `period / count`), and up to `burst` more at once after a quiet spell. In any window of one
/// period at most `count + burst` runs start; over a long time, `count` per period.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rate {
    /// Starts per period.
    pub count: u32,
    /// The period.
    pub period: Duration,
    /// Starts allowed at once beyond the pace (0: evenly paced).
    pub burst: u32,
}

/// A grant of starts by a [`Rate`] at one moment (see [`Rate::grant`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Grant {
    /// Starts granted (0 to the number asked for).
    pub granted: u32,
    /// The rate's next pace mark once they are taken, to store back.
    pub next_on: DateTime<Utc>,
    /// When the next start is allowed once they are taken.
    pub due_on: DateTime<Utc>,
}

impl Rate {
    /// The most starts per period, and the largest burst.
    pub const MAX_COUNT: u32 = 1_000_000;
    /// The longest period.
    pub const MAX_PERIOD: Duration = Duration::from_secs(7 * 86_400);
    /// The shortest period (the database keeps microseconds, and the pace is whole ones).
    pub const MIN_PERIOD: Duration = Duration::from_millis(1);
    /// The shortest pace between two starts: 1 µs, what the database's times keep.
    const MIN_INTERVAL_US: i64 = 1;

    /// Read `N/PERIOD`: `5/1s`, `100/1m`, `5/s` (a bare unit is one of it).
    pub fn parse(text: &str) -> Result<Rate, String> {
        let bad = |why: &str| format!("\"{text}\" is not a rate ({why}): write starts/period, such as 5/1s or 100/1m");
        let (count, period) = text.trim().split_once('/').ok_or_else(|| bad("no /"))?;
        let count: u32 = count.trim().parse().map_err(|_| bad("the count is not a whole number"))?;
        let period = period.trim();
        let period = match period.starts_with(|c: char| c.is_ascii_digit()) {
            true => crate::text::parse_duration(period),
            false => crate::text::parse_duration(&format!("1{period}")),
        }
        .map_err(|e| bad(&e))?;
        Rate { count, period, burst: 0 }.checked()
    }

    /// This rate with `burst` starts allowed at once beyond the pace.
    pub fn with_burst(self, burst: u32) -> Result<Rate, String> {
        Rate { burst, ..self }.checked()
    }

    /// The rate, or what is out of range in it.
    pub fn checked(self) -> Result<Rate, String> {
        if self.count == 0 || self.count > Self::MAX_COUNT {
            return Err(format!("a rate's count is 1 to {} (not {})", Self::MAX_COUNT, self.count));
        }
        if self.period < Self::MIN_PERIOD || self.period > Self::MAX_PERIOD {
            let shown = humantime::format_duration(self.period);
            return Err(format!("a rate's period is 1ms to 7days (not {shown})"));
        }
        if self.burst > Self::MAX_COUNT {
            return Err(format!("a burst is 0 to {} (not {})", Self::MAX_COUNT, self.burst));
        }
        // The pace mark runs at most the burst's paces ahead: kept within what every database's
        // times hold.
        if i128::from(self.interval_us()) * i128::from(self.burst) > Self::MAX_PERIOD.as_micros() as i128 {
            return Err(format!("a burst of {} at this pace spans more than 7 days", self.burst));
        }
        Ok(self)
    }

    /// `N/PERIOD`, without its burst (as `parse` reads it).
    pub fn per_period(&self) -> String {
        format!("{}/{}", self.count, humantime::format_duration(self.period))
    }

    /// The pace between two starts, in microseconds, rounded up: never more starts than asked.
    pub fn interval_us(&self) -> i64 {
        let period = i64::try_from(self.period.as_micros()).unwrap_or(i64::MAX);
        (period.saturating_add(i64::from(self.count) - 1) / i64::from(self.count)).max(Self::MIN_INTERVAL_US)
    }

    /// Up to `want` starts at `now`, given the pace mark stored (`next_on`, None: never used).
    ///
    /// A generic cell rate algorithm: the mark is when the next start would be on pace; a start
    /// is allowed while the mark is at most `burst` paces ahead of now, and each start moves the
    /// mark one pace on (from now, when the mark is behind: quiet time earns no more than the
    /// burst).
    pub fn grant(&self, next_on: Option<DateTime<Utc>>, now: DateTime<Utc>, want: u32) -> Grant {
        let pace = self.interval_us();
        let slack = pace.saturating_mul(i64::from(self.burst));
        let mark = next_on.filter(|m| *m > now).unwrap_or(now);
        let ahead = (mark - now).num_microseconds().unwrap_or(i64::MAX);
        let available = if ahead > slack { 0 } else { (slack - ahead) / pace + 1 };
        let granted = u32::try_from(available.min(i64::from(want))).unwrap_or(want);
        let next_on = mark + TimeDelta::microseconds(pace.saturating_mul(i64::from(granted)));
        let due_on = (next_on - TimeDelta::microseconds(slack)).max(now);
        Grant { granted, next_on, due_on }
    }
}

impl fmt::Display for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.per_period())?;
        if self.burst > 0 {
            write!(f, " (burst {})", self.burst)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(ms: i64) -> DateTime<Utc> {
        DateTime::<Utc>::UNIX_EPOCH + TimeDelta::milliseconds(ms)
    }

    #[test]
    fn rates_read_as_an_operator_writes_them() {
        let five = Rate::parse("5/1s").expect("5/1s");
        assert_eq!((five.count, five.period, five.burst), (5, Duration::from_secs(1), 0));
        assert_eq!(Rate::parse("5/s"), Ok(five));
        assert_eq!(Rate::parse(" 100 / 1m ").map(|r| r.period), Ok(Duration::from_secs(60)));
        assert_eq!(five.to_string(), "5/1s");
        assert_eq!(five.with_burst(3).map(|r| r.to_string()), Ok("5/1s (burst 3)".into()));
        for bad in ["5", "0/1s", "x/1s", "5/0s", "5/500ns", "5/999us", "5/8days", "5/1parsec", "-1/1s"] {
            assert!(Rate::parse(bad).is_err(), "{bad} was taken");
        }
        assert!(five.with_burst(Rate::MAX_COUNT + 1).is_err());
        let weekly = Rate::parse("1/7days").expect("weekly");
        assert!(weekly.with_burst(1).is_ok() && weekly.with_burst(2).is_err(), "a burst past 7 days of pace");
    }

    #[test]
    fn a_paced_rate_grants_one_start_a_pace_and_never_more_in_a_period() {
        let rate = Rate::parse("5/1s").expect("rate");
        assert_eq!(rate.interval_us(), 200_000);
        let first = rate.grant(None, at(0), 16);
        assert_eq!((first.granted, first.next_on, first.due_on), (1, at(200), at(200)));
        assert_eq!(rate.grant(Some(first.next_on), at(199), 16).granted, 0);
        // Claims every 10 ms for 3 seconds: starts in any one-second window at most 5.
        let (mut mark, mut starts) = (None, Vec::new());
        for ms in (0..3000).step_by(10) {
            let g = rate.grant(mark, at(ms), 16);
            if g.granted > 0 {
                mark = Some(g.next_on);
                starts.extend(std::iter::repeat_n(ms, g.granted as usize));
            }
        }
        assert_eq!(starts.len(), 15);
        for (i, s) in starts.iter().enumerate() {
            assert!(starts[i..].iter().take_while(|t| **t < s + 1000).count() <= 5, "{starts:?}");
        }
    }

    #[test]
    fn a_burst_is_granted_after_a_quiet_spell_and_the_pace_holds_after_it() {
        let rate = Rate::parse("5/1s").and_then(|r| r.with_burst(3)).expect("rate");
        let g = rate.grant(None, at(0), 16);
        assert_eq!((g.granted, g.next_on, g.due_on), (4, at(800), at(200)));
        assert_eq!(rate.grant(Some(g.next_on), at(100), 16).granted, 0);
        assert_eq!(rate.grant(Some(g.next_on), at(200), 16).granted, 1);
        // A long quiet spell earns no more than the burst.
        assert_eq!(rate.grant(Some(g.next_on), at(60_000), 16).granted, 4);
        // Asking for fewer takes fewer.
        let two = rate.grant(None, at(0), 2);
        assert_eq!((two.granted, two.next_on, two.due_on), (2, at(400), at(0)));
    }

    #[test]
    fn an_uneven_pace_is_rounded_up_so_no_period_sees_more() {
        let rate = Rate::parse("3/1s").expect("rate");
        assert_eq!(rate.interval_us(), 333_334);
        assert_eq!(Rate::parse("1000000/1s").map(|r| r.interval_us()), Ok(1));
    }
}
