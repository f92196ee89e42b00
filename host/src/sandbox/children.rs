//! What a run queues (`enqueue`): its children, each checked as it comes (the checks every task
//! passes, [`NewTask::check`]) and all of them bounded (how many, how much data, how deep), held
//! until the run ends and written with its end only if it ends well.

use chrono::{DateTime, Utc};

use super::bindings::taskhost::plugin::types;
use crate::model::{valid_handler_name, NewTask, TaskId};

/// Data a run's children may hold in all: what a run can make the host keep until it ends.
pub const MAX_CHILDREN_BYTES: usize = 64 << 20;

/// The longest a child may be due after its parent's run ends (a year).
pub const MAX_DELAY_MS: u64 = 31_557_600_000;

/// When a queued task is due, as its run asked; made a time when the run ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Due {
    /// When the run that queued it ends.
    AtTheEnd,
    /// This many milliseconds after the run that queued it ends.
    AfterMs(u64),
    /// At this time.
    At(DateTime<Utc>),
}

impl Due {
    /// The time it is due, for a run that ended at `end`.
    pub fn at(self, end: DateTime<Utc>) -> DateTime<Utc> {
        match self {
            Due::AtTheEnd => end,
            Due::AfterMs(ms) => chrono::Duration::try_milliseconds(i64::try_from(ms).unwrap_or(i64::MAX))
                .and_then(|d| end.checked_add_signed(d))
                .unwrap_or(end),
            Due::At(at) => at,
        }
    }
}

/// A task a run queued, and when it is due.
#[derive(Debug, Clone)]
pub struct Child {
    /// The task (its parent, the run's task, and depth are written by the store).
    pub task: NewTask,
    /// When it is due.
    pub due: Due,
    /// The numbers of the run's earlier tasks it runs after (`enqueue-after`), in order, once each.
    pub after: Vec<u32>,
}

/// Dependencies one run's tasks may name in all: a join over as many tasks as `max_children`
/// allows at most, without making the store write rows by the billion.
pub const MAX_RUN_AFTER: usize = 100_000;

/// The longest chain of joins a run may queue (a join after a join after ...): a part that dies
/// cancels the chain one link a statement round, in the transaction of its end.
pub const MAX_JOIN_CHAIN: u32 = 100;

/// The rules of a run's `enqueue` besides its handler's limits: whose children they are, and the
/// operator's `[tasks]` bounds.
#[derive(Debug, Clone, Copy)]
pub struct Queueing {
    /// The run's task: the children's parent.
    pub parent: TaskId,
    /// How deep the parent is (0: queued by a caller).
    pub depth: u32,
    /// Children of a task this deep or deeper are refused (`[tasks] max_depth`).
    pub max_depth: u32,
    /// A child's data at most (`[tasks] max_data_bytes`).
    pub max_data_bytes: usize,
}

impl Default for Queueing {
    fn default() -> Self {
        Queueing {
            parent: 0,
            depth: 0,
            max_depth: crate::model::DEFAULT_MAX_DEPTH,
            max_data_bytes: crate::model::DEFAULT_MAX_DATA_BYTES,
        }
    }
}

/// The tasks one run queued so far.
#[derive(Debug, Default)]
pub struct Children {
    list: Vec<Child>,
    bytes: usize,
    after: usize,
    /// Each task's place in a chain of joins: 0 for one after none, else one more than the
    /// highest of those it runs after.
    chain: Vec<u32>,
}

impl Children {
    /// Check `asked`, to run after the run's tasks numbered `after` (unless they end badly and it
    /// runs anyway), and keep it; its number among the run's, or why it is refused (one line).
    pub(crate) fn add(
        &mut self,
        asked: types::NewTask,
        mut after: Vec<u32>,
        run_anyway: bool,
        rules: &Queueing,
        max_children: usize,
    ) -> Result<u32, String> {
        // Counted before sorting: the guest's list is bounded only by hostcall fuel.
        if after.len() > crate::model::MAX_AFTER {
            return Err(format!("{} tasks to run after, over the most, {}", after.len(), crate::model::MAX_AFTER));
        }
        after.sort_unstable();
        after.dedup();
        if let Some(&n) = after.last().filter(|&&n| n as usize >= self.list.len()) {
            return Err(format!("this run has queued no task {n} yet: a task runs after tasks queued before it"));
        }
        let link = match after.iter().filter_map(|&k| self.chain.get(k as usize)).max() {
            Some(&longest) => longest + 1,
            None => 0,
        };
        if link > MAX_JOIN_CHAIN {
            return Err(format!(
                "this task would end a chain of {link} joins, over the most a run may queue, {MAX_JOIN_CHAIN}"
            ));
        }
        if self.after + after.len() > MAX_RUN_AFTER {
            return Err(format!("this run's tasks would run after over {MAX_RUN_AFTER} others in all"));
        }
        if self.list.len() >= max_children {
            return Err(format!("this run queued {max_children} tasks already, the most [limits] max_children allows"));
        }
        if rules.depth >= rules.max_depth {
            let depth = rules.depth;
            return Err(format!(
                "this task is {depth} deep under tasks queued by runs, the most [tasks] max_depth allows"
            ));
        }
        if !valid_handler_name(&asked.handler) {
            let name = crate::text::bounded(&asked.handler, 128, "…");
            return Err(format!("{name:?} cannot name a handler: letters, digits, '-' and '_'"));
        }
        let bytes = asked.data.len() + asked.handler.len() + asked.queue.as_ref().map_or(0, String::len);
        let bytes = bytes + asked.unique_key.as_ref().map_or(0, String::len);
        if self.bytes.saturating_add(bytes) > MAX_CHILDREN_BYTES {
            return Err(format!("this run's tasks would hold over {MAX_CHILDREN_BYTES} bytes of data in all"));
        }
        let due = match asked.due {
            None => Due::AtTheEnd,
            Some(types::Due::AfterMs(ms)) if ms > MAX_DELAY_MS => {
                return Err(format!("a delay of {ms} ms is over the longest, a year"));
            }
            Some(types::Due::AfterMs(ms)) => Due::AfterMs(ms),
            Some(types::Due::AtMs(ms)) => match DateTime::from_timestamp_millis(ms) {
                Some(at) => Due::At(at),
                None => return Err(format!("{ms} ms since 1970 is not a time")),
            },
        };
        let mut task = NewTask::new(asked.handler, asked.data);
        if let Some(queue) = asked.queue {
            task.queue = queue;
        }
        task.priority = asked.priority.unwrap_or(0);
        task.unique_key = asked.unique_key;
        if let Some(n) = asked.max_attempts {
            task.max_attempts = n;
        }
        task.queued_by = Some(format!("task {}", rules.parent));
        task.check(rules.max_data_bytes).map_err(|e| e.to_string())?;
        // Set past the check: its `after` is filled in (numbers made ids) when it is written.
        task.run_anyway = run_anyway && !after.is_empty();
        let n = u32::try_from(self.list.len()).unwrap_or(u32::MAX);
        self.bytes += bytes;
        self.after += after.len();
        self.chain.push(link);
        self.list.push(Child { task, due, after });
        Ok(n)
    }

    /// The children, handed over when the run ends.
    pub(crate) fn take(&mut self) -> Vec<Child> {
        (self.bytes, self.after) = (0, 0);
        self.chain.clear();
        std::mem::take(&mut self.list)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn asked(handler: &str) -> types::NewTask {
        types::NewTask {
            handler: handler.into(),
            data: "{}".into(),
            queue: None,
            priority: None,
            due: None,
            unique_key: None,
            max_attempts: None,
        }
    }

    #[test]
    fn a_task_runs_only_after_tasks_its_run_queued_before_it() {
        let (mut kids, rules) = (Children::default(), Queueing::default());
        assert_eq!(kids.add(asked("a"), vec![], false, &rules, 10), Ok(0));
        assert_eq!(kids.add(asked("b"), vec![], false, &rules, 10), Ok(1));
        let err = kids.add(asked("j"), vec![0, 2], false, &rules, 10).expect_err("2 is not queued yet");
        assert!(err.contains("no task 2"), "{err}");
        assert_eq!(kids.add(asked("j"), vec![1, 0, 1], true, &rules, 10), Ok(2));
        let taken = kids.take();
        assert_eq!(taken[2].after, vec![0, 1], "in order, once each");
        assert!(taken[2].task.run_anyway && taken[2].task.after.is_empty(), "ids are filled in when written");
        assert!(!taken[0].task.run_anyway);
    }

    #[test]
    fn the_dependencies_of_a_runs_tasks_are_bounded() {
        let (mut kids, rules) = (Children::default(), Queueing::default());
        for _ in 0..crate::model::MAX_AFTER + 1 {
            kids.add(asked("a"), vec![], false, &rules, 200_000).expect("part");
        }
        let all: Vec<u32> = (0..=crate::model::MAX_AFTER as u32).collect();
        let err = kids.add(asked("j"), all.clone(), false, &rules, 200_000).expect_err("too many");
        assert!(err.contains("over the most"), "{err}");
        let most = &all[..crate::model::MAX_AFTER];
        for _ in 0..MAX_RUN_AFTER / crate::model::MAX_AFTER {
            kids.add(asked("j"), most.to_vec(), false, &rules, 200_000).expect("a join");
        }
        let err = kids.add(asked("j"), vec![0], false, &rules, 200_000).expect_err("too many in all");
        assert!(err.contains(&format!("over {MAX_RUN_AFTER}")), "{err}");
    }

    #[test]
    fn a_chain_of_joins_is_bounded() {
        let (mut kids, rules) = (Children::default(), Queueing::default());
        let first = kids.add(asked("a"), vec![], false, &rules, 1000).expect("part");
        let mut last = first;
        for _ in 0..MAX_JOIN_CHAIN {
            // Each after the one before it, and after the first (which does not lengthen it).
            last = kids.add(asked("j"), vec![last, first], false, &rules, 1000).expect("a link");
        }
        let err = kids.add(asked("j"), vec![last], false, &rules, 1000).expect_err("one link too many");
        assert!(err.contains(&format!("chain of {}", MAX_JOIN_CHAIN + 1)), "{err}");
        assert_eq!(kids.add(asked("k"), vec![first], false, &rules, 1000), Ok(MAX_JOIN_CHAIN + 1), "a short one");
    }
}
