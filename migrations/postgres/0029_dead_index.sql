-- Dead letters by when they died, as `task_queue_done` has the succeeded and cancelled: the event
-- stream reads the tasks finished since its last look (issue 50). Only a task given up on enters
-- it, so the hot path (claims, successes) never writes it.
CREATE INDEX task_queue_dead ON task_queue (finished_on) WHERE gave_up_on IS NOT NULL;
