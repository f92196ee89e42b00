// Fans out with taskhost's C SDK: queues one task of `handler` (default `echo`) for each item of the
// task's `items`, `{"item": ITEM}` each, `delay` seconds after this run ends when given. The children
// are written with this run's end, only if it ends well. With `"join": true`, one more task of this
// handler after all of them (`run_anyway` even if some die), which collects their results: a fan-out
// and join. With `"approval": NAME`, it first waits for that signal (`approval_timeout` seconds,
// default a day), then fans out and returns the signal's data as `approval`; no signal in time, it
// fails `not-approved`.
#include "taskhost.h"

// The most a join may run after (the host's own bound on `after`); the operator's max_children
// bounds what a run queues below that.
#define MAX_PARTS 10000

// Whether the data's `key` is there and not null, false, 0 or "" (what the other examples skip).
static bool given(const th_task *task, const char *key) {
    static const char *none[] = {"null", "false", "0", "\"\""};
    const uint8_t *v;
    size_t len;
    if (!th_get_raw(task, key, &v, &len)) return false;
    for (size_t i = 0; i < sizeof none / sizeof *none; i++)
        if (len == strlen(none[i]) && !memcmp(v, none[i], len)) return false;
    return true;
}

// The join's run: how many it ran after, how many succeeded, and their results in order.
static bool collect(th_results *ret, th_error *err) {
    th_dependencies_t deps;
    if (!th_dependencies(&deps, err)) return false;
    size_t cap = 64, n = 0, succeeded = 0;
    for (size_t i = 0; i < deps.len; i++) cap += (deps.ptr[i].results.is_some ? deps.ptr[i].results.val.len : 0) + 8;
    char *out = malloc(cap);
    bool ok = out != NULL;
    if (ok) {
        n += th_format(out + n, cap - n, "{\"results\":[");
        for (size_t i = 0; i < deps.len; i++) {
            const taskhost_plugin_host_dependency_t *d = &deps.ptr[i];
            succeeded += d->succeeded;
            const char *sep = i ? "," : "";
            if (d->results.is_some) {
                n += th_format(out + n, cap - n, "%s%.*s", sep, (int)d->results.val.len, (const char *)d->results.val.ptr);
            } else {
                n += th_format(out + n, cap - n, "%snull", sep);
            }
        }
        th_format(out + n, cap - n, "],\"tasks\":%zu,\"succeeded\":%zu}", deps.len, succeeded);
        ok = th_ok(ret, out);
        free(out);
    } else {
        th_retry(err, "out-of-memory", "no memory for %zu results", deps.len);
    }
    th_dependencies_free(&deps);
    return ok;
}

static bool fan_out(th_task *task, th_results *ret, th_error *err) {
    const uint8_t *items, *item, *at = NULL;
    size_t items_len, item_len;
    if (given(task, "collect")) return collect(ret, err);
    if (!th_get_raw(task, "items", &items, &items_len) || items[0] != '[')
        return th_fail(err, "invalid-input", "data has no \"items\" list");
    char name[129], *approval = NULL;
    bool wait = given(task, "approval");
    if (wait && !th_get_string(task, "approval", name, sizeof name))
        return th_fail(err, "invalid-input", "\"approval\" is not a signal's name (a string of at most 128 bytes)");
    if (wait) {
        uint64_t timeout = 86400; // whole seconds
        if (given(task, "approval_timeout") && !th_get_u64(task, "approval_timeout", &timeout))
            return th_fail(err, "invalid-input", "\"approval_timeout\" is not a whole number of seconds");
        switch (th_await_signal(name, timeout < UINT64_MAX / 1000 ? timeout * 1000 : UINT64_MAX, &approval, err)) {
        case TH_SIGNAL_DELIVERED: break;
        case TH_SIGNAL_NOT_YET: return th_ok(ret, NULL); // ends waiting for it
        case TH_SIGNAL_TIMED_OUT: return th_fail(err, "not-approved", "no \"%s\" signal in time", name);
        default: return false;
        }
    }
    char handler[129] = "echo", data[4096];
    if (given(task, "handler") && !th_get_string(task, "handler", handler, sizeof handler))
        return th_fail(err, "invalid-input", "\"handler\" is not a handler's name");
    th_enqueue_opts child = {0};
    uint64_t delay = 0; // whole seconds
    if (given(task, "delay") && !th_get_u64(task, "delay", &delay))
        return th_fail(err, "invalid-input", "\"delay\" is not a whole number of seconds");
    child.delay_ms = delay < UINT64_MAX / 1000 ? delay * 1000 : UINT64_MAX;
    static uint32_t parts[MAX_PARTS];
    size_t queued = 0;
    bool ok = true;
    while (ok && th_array_next(items, items_len, &at, &item, &item_len)) {
        if (queued == MAX_PARTS) {
            ok = th_fail(err, "invalid-input", "more than %d items", MAX_PARTS);
        } else if (th_format(data, sizeof data, "{\"item\":%.*s}", (int)item_len, item) >= sizeof data - 1) {
            ok = th_fail(err, "invalid-input", "item %zu is over %zu bytes", queued, sizeof data - 12);
        } else {
            ok = th_enqueue(handler, data, &child, &parts[queued], err);
            queued += ok;
        }
    }
    if (ok && given(task, "join")) {
        th_enqueue_opts join = {.after = parts, .after_len = queued};
        join.run_anyway = given(task, "run_anyway");
        th_format(handler, sizeof handler, "%.*s", (int)task->handler.len, (const char *)task->handler.ptr);
        ok = th_enqueue(handler, "{\"collect\":true}", &join, NULL, err);
    }
    if (ok) {
        size_t cap = (approval ? strlen(approval) : 0) + 64;
        char *out = malloc(cap);
        if (!out) {
            ok = th_retry(err, "out-of-memory", "no memory for the results");
        } else {
            if (approval) th_format(out, cap, "{\"queued\":%zu,\"approval\":%s}", queued, approval);
            else th_format(out, cap, "{\"queued\":%zu}", queued);
            ok = th_ok(ret, out);
            free(out);
        }
    }
    free(approval);
    return ok;
}

bool exports_task_handler_http_handle(th_task *task, th_results *ret, th_error *err) {
    bool ok = fan_out(task, ret, err);
    task_handler_http_task_free(task); // the callee owns its argument
    return ok;
}
