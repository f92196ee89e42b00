// Calls a webhook with taskhost's C SDK: POSTs the task's "payload" as JSON to its "url" (a GET when it
// has none) and returns the status and the answer. A 429 or 503 answer snoozes the task until its
// Retry-After, another 5xx is retried, a 4xx is not. The URL must be granted to this handler in the operator's configuration ([handlers.c-webhook.grants.http]).
#include "taskhost.h"

bool exports_task_handler_http_handle(th_task *task, th_results *ret, th_error *err) {
    char url[512], timeout[32] = "30", out[8192];
    const uint8_t *payload, *t;
    size_t payload_len, t_len;
    th_response r;
    bool ok = false, busy = false;
    if (!th_get_string(task, "url", url, sizeof url)) {
        ok = th_fail(err, "invalid-input", "data has no \"url\"");
    } else {
        bool post = th_get_raw(task, "payload", &payload, &payload_len) && strncmp((const char *)payload, "null", 4);
        if (th_get_raw(task, "timeout", &t, &t_len)) th_format(timeout, sizeof timeout, "%.*s", (int)t_len, t);
        th_info("calling %s", url);
        if (th_http(post ? "POST" : "GET", url, post ? "application/json" : NULL, payload, post ? payload_len : 0,
                    (unsigned)(strtod(timeout, NULL) * 1000), &r, err)) {
            // 429, 503: snoozed (the run ends ok, no results); other 5xx: retried; 4xx: failed.
            if (!th_snooze_if_busy(&r, &busy, err)) {
                ok = false; // the snooze refused: err says why
            } else if (busy) {
                ok = th_ok(ret, NULL);
            } else if ((ok = th_raise_for_status(&r, err))) {
                th_progress(100);
                size_t n = th_format(out, sizeof out, "{\"status\":%u,", r.status);
                if (!strcmp(r.content_type, "application/json") && r.len < sizeof out - 40) {
                    th_format(out + n, sizeof out - n, "\"json\":%s}", (const char *)r.body);
                } else {
                    n += th_format(out + n, sizeof out - n, "\"response\":\"");
                    n += th_json_escape(out + n, sizeof out - n - 2, r.body, r.len < 1000 ? r.len : 1000);
                    th_format(out + n, sizeof out - n, "\"}");
                }
                th_ok(ret, out);
            }
            th_response_free(&r);
        }
    }
    task_handler_http_task_free(task); // the callee owns its argument
    return ok;
}
