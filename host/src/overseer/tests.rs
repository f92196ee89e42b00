//! Unit tests of the parent module.

use super::*;

#[test]
fn ago_saturates_at_the_earliest_time_rather_than_overflowing() {
    let now = DateTime::<Utc>::from_timestamp(1_800_000_000, 0).unwrap_or_default();
    assert_eq!(ago(now, Duration::from_secs(60)), now - chrono::Duration::seconds(60));
    assert_eq!(ago(now, Duration::MAX), DateTime::<Utc>::MIN_UTC);
    assert_eq!(ago(now, Duration::from_secs(u64::from(u32::MAX) * 1_000_000)), DateTime::<Utc>::MIN_UTC);
}
