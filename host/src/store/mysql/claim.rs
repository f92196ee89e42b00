//! MySQL's claim: the due tasks locked and read, the runner's row checked, run ids taken from the
//! counter, then the tasks marked running by their ids (see `store::transitions`).

use super::*;

/// Most queues a claim picks from one by one; past it, one pick of them all (sorted).
const PICK_EACH_MOST: usize = 32;

impl MySqlDb {
    pub(super) async fn claim_once(&self, req: &ClaimRequest<'_>) -> Result<Vec<ClaimedRun>> {
        let mut tx = self.begin().await?;
        let out = self.claim_in(&mut tx, req, None).await?;
        super::super::dialect::end_claim(self, tx, out).await
    }

    /// The claim inside `tx`; of the tasks `only` when given (the limited claim holds them locked).
    pub(super) async fn claim_in(
        &self,
        tx: &mut Tx<MySql>,
        req: &ClaimRequest<'_>,
        only: Option<&[TaskId]>,
    ) -> Result<Vec<ClaimedRun>> {
        let now = req.now;
        let picked = self.pick(tx, req, only).await?;
        // In claim order (read_all sorts), the first `limit` of them all.
        let mut claimed = ClaimedTask::read_all(&picked, now)?;
        claimed.truncate(req.limit as usize);
        if claimed.is_empty() {
            return Ok(Vec::new());
        }
        // Its runner's row, shared-locked and only while it is running: a claim that reaches the
        // server after an overseer timed the runner out (a retransmission after a partition)
        // claims nothing, and one before makes the time-out wait for it and then see its runs.
        // After the pick, which may wait on another session's locks: the runner's heartbeats
        // must not wait behind it.
        let me = format!("SELECT id FROM task_runners WHERE id = $1 AND status = {RUNNER_RUNNING} LOCK IN SHARE MODE");
        if self.rows(Some(&mut *tx), &me, args![req.runner]).await?.is_empty() {
            return Ok(Vec::new());
        }
        // Each task's run is made here, on the task's row (see `store::transitions`), its id
        // taken from the counter and its timeout reckoned here.
        let first = self.take_run_ids(tx, claimed.len()).await?;
        let mut last = std::collections::HashMap::with_capacity(picked.len());
        for r in &picked {
            last.insert(r.try_get::<i64, _>("id")?, r.try_get::<i64, _>("run_attempt")?);
        }
        // One statement for each timeout the runs have (almost always one), the run ids given by
        // each task's place in its list: a `JSON_TABLE` of ids and timeouts joined to the tasks
        // cost the server about a quarter more a row.
        let mut groups: std::collections::BTreeMap<DateTime<Utc>, Vec<TaskId>> = Default::default();
        for c in &claimed {
            groups.entry(c.timeout_on(now, req.default_timeout)).or_default().push(c.task_id);
        }
        let mark = format!(
            "UPDATE task_queue SET {} WHERE id IN ($6)",
            transitions::claimed_task("$1 + FIND_IN_SET(id, $2)", "$3", "$4", "$5")
        );
        let mut started = std::collections::HashMap::with_capacity(claimed.len());
        let mut next = first;
        for (timeout, all) in &groups {
            // In chunks well within MySQL's 65,535 placeholders a statement.
            for ids in all.chunks(10_000) {
                for (id, run) in ids.iter().zip(next..) {
                    started.insert(*id, (run, last.get(id).copied().unwrap_or(0) + 1));
                }
                let listed = ids.iter().map(i64::to_string).collect::<Vec<_>>().join(",");
                let values = args![next - 1, listed.as_str(), req.runner, now, *timeout, ids];
                self.exec(Some(&mut *tx), &mark, values).await?;
                next += ids.len() as i64;
            }
        }
        // Each run's version, read now (a plain read after the marks, so it sees every release
        // committed before it), not in the pick: a locking read would lock the releases too.
        let ids: Vec<TaskId> = claimed.iter().map(|c| c.task_id).collect();
        let digests = format!("SELECT id, {} FROM task_queue WHERE id IN ($1)", transitions::RUN_DIGEST);
        let mut of = std::collections::HashMap::with_capacity(ids.len());
        for r in self.rows(Some(&mut *tx), &digests, args![&ids]).await? {
            of.insert(r.try_get::<i64, _>("id")?, r.text("run_digest")?);
        }
        for c in &mut claimed {
            c.digest = of.remove(&c.task_id).flatten();
        }
        transitions::claimed_runs(req, claimed, started)
    }

    /// The due tasks a claim may take, locked: of each of a few queues apart, in claim order by
    /// the claim index (`queue IN (…)` of several sorted, and locked, every due task of them), or
    /// of them all at once. The rows picked and not taken (at most the limit a queue) stay locked
    /// until the end of this short transaction.
    async fn pick(
        &self,
        tx: &mut Tx<MySql>,
        req: &ClaimRequest<'_>,
        only: Option<&[TaskId]>,
    ) -> Result<Vec<<MySql as sqlx::Database>::Row>> {
        let of_handlers = if req.handlers.is_some() { " AND task_handler_class IN ($4)" } else { "" };
        let only_these = if only.is_some() { " AND id IN ($5)" } else { "" };
        let pick = format!(
            "SELECT {CLAIM_COLUMNS}, run_attempt, NULL AS run_digest FROM task_queue
             WHERE {} AND queue IN ($1){of_handlers}{only_these} AND scheduled_on <= $2 AND {}
             ORDER BY priority, scheduled_on, id LIMIT $3 FOR UPDATE SKIP LOCKED",
            transitions::is::<MySqlDb>(TaskState::Scheduled),
            transitions::NOT_PAUSED
        );
        let each = (2..=PICK_EACH_MOST).contains(&req.queues.len());
        let lists: Vec<&[String]> = if each { req.queues.chunks(1).collect() } else { vec![req.queues] };
        let mut picked = Vec::new();
        for queues in lists {
            let values = [
                Arg::Texts(queues),
                Arg::Time(req.now),
                Arg::from(req.limit),
                Arg::Texts(req.handlers.unwrap_or_default()),
                Arg::Ints(only.unwrap_or_default()),
            ];
            picked.extend(self.rows(Some(&mut *tx), &pick, &values).await?);
        }
        Ok(picked)
    }
}
