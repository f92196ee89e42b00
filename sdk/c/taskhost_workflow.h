// taskhost's C SDK, workflows (taskhost:plugin@0.2.0; included by taskhost.h): tasks a run queues
// (its children, and joins after them), what a join reads of the tasks it runs after, snoozes and
// signals. Each refusal fills err with the code the other SDKs use:
//
//   uint32_t parts[3];
//   for (int i = 0; i < 3; i++) {
//       char data[32];
//       th_format(data, sizeof data, "{\"item\":%d}", i);
//       if (!th_enqueue("resize", data, NULL, &parts[i], err)) return false;
//   }
//   th_enqueue_opts join = {.after = parts, .after_len = 3};
//   if (!th_enqueue("collect", "{}", &join, NULL, err)) return false;
//
// - th_enqueue: a task queued when this run ends well (returns ok or snoozes), so a retried run
//   never queues it twice; refused, enqueue-refused (final) with the host's reason.
// - th_dependencies: the tasks this one runs after, with their results (dependencies-unread,
//   retried, when the database could not be read); free with th_dependencies_free.
// - th_snooze: once the handler returns ok, the run ends snoozed and the task is due again later.
// - th_await_signal: a signal's data once sent; TH_SIGNAL_NOT_YET: return ok and the run ends
//   waiting for it (the task runs again when it is sent, or at the timeout).
#ifndef TASKHOST_WORKFLOW_H
#define TASKHOST_WORKFLOW_H

// What th_enqueue takes beyond a handler and data; zeroed (or a NULL pointer), the defaults.
typedef struct {
    const char *queue;       // NULL: `default`
    const char *unique_key;  // NULL: none
    bool has_priority;       // false: priority 0
    int32_t priority;        // lower runs first
    uint64_t delay_ms;       // due this long after this run ends (by the database's clock)
    int64_t at_ms;           // without delay_ms, nonzero: due at this time (ms since 1970-01-01 UTC)
    uint32_t max_attempts;   // 0: the default (5)
    const uint32_t *after;   // waiting until each of these succeeded: numbers th_enqueue gave
    size_t after_len;        //   this run's earlier tasks (at most 10,000)
    bool run_anyway;         // run once those ended, however they ended
} th_enqueue_opts;

// Fills err from the host's refusal `why` (and frees it); returns false.
static bool th__refused(th_error *err, bool retryable, const char *code, task_handler_http_string_t *why) {
    if (retryable) th_retry(err, code, "%.*s", (int)why->len, (const char *)why->ptr);
    else th_fail(err, code, "%.*s", (int)why->len, (const char *)why->ptr);
    task_handler_http_string_free(why);
    return false;
}

static void th__opt_string(task_handler_http_option_string_t *o, const char *s) {
    o->is_some = s != NULL;
    if (s) task_handler_http_string_set(&o->val, s);
}

// Queue a task of `handler` with `data` (a JSON document), this run's child; opts may be NULL. Its
// number among this run's tasks goes to *number (may be NULL), for a later task's `after`.
static bool th_enqueue(const char *handler, const char *data, const th_enqueue_opts *opts, uint32_t *number,
                       th_error *err) {
    static const th_enqueue_opts none;
    const th_enqueue_opts *o = opts ? opts : &none;
    taskhost_plugin_host_new_task_t t;
    memset(&t, 0, sizeof t);
    task_handler_http_string_set(&t.handler, handler);
    task_handler_http_string_set(&t.data, data);
    th__opt_string(&t.queue, o->queue);
    th__opt_string(&t.unique_key, o->unique_key);
    t.priority.is_some = o->has_priority;
    t.priority.val = o->priority;
    if (o->delay_ms) {
        t.due.is_some = true;
        t.due.val.tag = TASKHOST_PLUGIN_TYPES_DUE_AFTER_MS;
        t.due.val.val.after_ms = o->delay_ms;
    } else if (o->at_ms) {
        t.due.is_some = true;
        t.due.val.tag = TASKHOST_PLUGIN_TYPES_DUE_AT_MS;
        t.due.val.val.at_ms = o->at_ms;
    }
    t.max_attempts.is_some = o->max_attempts != 0;
    t.max_attempts.val = o->max_attempts;
    uint32_t n = 0;
    task_handler_http_string_t why;
    bool ok;
    if (o->after_len || o->run_anyway) {
        task_handler_http_list_u32_t after = {(uint32_t *)o->after, o->after_len};
        ok = taskhost_plugin_host_enqueue_after(&t, &after, o->run_anyway, &n, &why);
    } else {
        ok = taskhost_plugin_host_enqueue(&t, &n, &why);
    }
    if (!ok) return th__refused(err, false, "enqueue-refused", &why);
    if (number) *number = n;
    return true;
}

// The tasks this one runs after: deps->ptr[i] for i < deps->len, each with task_id, handler (a
// string: ptr, len), succeeded, results (is_some, val: the JSON text) and results_left_out.
typedef taskhost_plugin_host_list_dependency_t th_dependencies_t;

static bool th_dependencies(th_dependencies_t *deps, th_error *err) {
    task_handler_http_string_t why;
    return taskhost_plugin_host_dependencies(deps, &why) || th__refused(err, true, "dependencies-unread", &why);
}

static void th_dependencies_free(th_dependencies_t *deps) {
    // wit-bindgen 0.63's free of a dependency leaves its results (an option<string> first met in
    // wasi:http gets no free of its own there): freed here.
    for (size_t i = 0; i < deps->len; i++) {
        if (deps->ptr[i].results.is_some) task_handler_http_string_free(&deps->ptr[i].results.val);
        deps->ptr[i].results.is_some = false;
    }
    taskhost_plugin_host_list_dependency_free(deps);
}

// Once the handler returns ok, this run ends snoozed: the task is due again `ms` after (at least a
// second, at most 30 days), using no attempt. False with err (invalid-snooze) when refused.
static bool th_snooze(uint64_t ms, th_error *err) {
    task_handler_http_string_t why;
    return taskhost_plugin_host_snooze(ms, &why) || th__refused(err, false, "invalid-snooze", &why);
}

typedef enum { TH_SIGNAL_DELIVERED, TH_SIGNAL_NOT_YET, TH_SIGNAL_TIMED_OUT, TH_SIGNAL_FAILED } th_signal;

// Wait for the signal `name` sent to this task, for at most timeout_ms from the wait's start.
// TH_SIGNAL_DELIVERED: *data is its JSON text, NUL-terminated (free() it). TH_SIGNAL_NOT_YET:
// return ok from the handler and the run ends waiting. TH_SIGNAL_TIMED_OUT: the wait ran out.
// TH_SIGNAL_FAILED: err says why (invalid-signal-wait; signal-unread, retried).
static th_signal th_await_signal(const char *name, uint64_t timeout_ms, char **data, th_error *err) {
    task_handler_http_string_t n, why;
    taskhost_plugin_host_signal_t found;
    task_handler_http_string_set(&n, name);
    *data = NULL;
    if (!taskhost_plugin_host_await_signal(&n, timeout_ms, &found, &why)) {
        // The host's words for a database it could not read: the one refusal worth a retry.
        static const char unread[] = "could not be looked up";
        bool retry = false;
        for (size_t i = 0; !retry && i + sizeof unread - 1 <= why.len; i++)
            retry = !memcmp(why.ptr + i, unread, sizeof unread - 1);
        th__refused(err, retry, retry ? "signal-unread" : "invalid-signal-wait", &why);
        return TH_SIGNAL_FAILED;
    }
    switch (found.tag) {
    case TASKHOST_PLUGIN_TYPES_SIGNAL_DELIVERED:
        *data = malloc(found.val.delivered.len + 1);
        if (*data) {
            memcpy(*data, found.val.delivered.ptr, found.val.delivered.len);
            (*data)[found.val.delivered.len] = '\0';
        }
        taskhost_plugin_host_signal_free(&found);
        if (*data) return TH_SIGNAL_DELIVERED;
        th_retry(err, "out-of-memory", "no memory for the signal %s's data", name);
        return TH_SIGNAL_FAILED;
    case TASKHOST_PLUGIN_TYPES_SIGNAL_NOT_YET:
        return TH_SIGNAL_NOT_YET;
    default:
        return TH_SIGNAL_TIMED_OUT;
    }
}

#endif
