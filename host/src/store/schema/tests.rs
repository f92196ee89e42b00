//! Unit tests of the parent module.

use super::*;
use crate::model::RunStatus;

#[test]
fn the_index_of_finished_tasks_has_the_condition_the_queries_repeat() {
    let done = INDEXES.iter().find(|i| i.name == "task_queue_done").and_then(|i| i.filter);
    assert_eq!(done, Some(crate::store::sql::DONE));
}

/// Index conditions repeat the migrations' SQL, so status words stand there as literals; each
/// must still be a status of the enum.
#[test]
fn every_status_word_in_an_index_condition_is_a_status() {
    let mut words = Vec::new();
    for i in INDEXES {
        let generated = match i.mysql {
            OnMySql::Generated { expression, .. } => Some(expression),
            _ => None,
        };
        for text in i.filter.into_iter().chain(generated) {
            words.extend(text.split('\'').skip(1).step_by(2).map(str::to_string));
        }
    }
    assert!(words.len() >= 6, "{words:?}");
    for w in &words {
        assert!(w.parse::<RunStatus>().is_ok(), "{w:?} in an index condition is not a run status");
    }
}
