// {{name}}: a taskhost task handler in C. `sh build.sh` builds plugins/{{name}}.wasm.
#include <stdio.h>

#include "task_handler.h"

static bool fail(task_handler_handler_error_t *err, const char *code, const char *message) {
    task_handler_string_dup(&err->code, code); // heap copies: the host frees them
    task_handler_string_dup(&err->message, message);
    err->retryable = false;
    return false;
}

bool exports_task_handler_handle(task_handler_task_t *task, task_handler_option_string_t *ret,
                                 task_handler_handler_error_t *err) {
    bool ok;
    if (task->data.len == 0 || task->data.ptr[0] != '{') {
        ok = fail(err, "invalid-input", "the data is not a JSON object");
    } else {
        taskhost_plugin_host_set_progress(50);
        printf("attempt %u of task %lld\n", (unsigned)task->attempt, (long long)task->task_id);
        fflush(stdout); // printed lines land in the run's logs
        char json[64];
        snprintf(json, sizeof json, "{\"bytes\":%zu}", task->data.len);
        ret->is_some = true;
        task_handler_string_dup(&ret->val, json);
        ok = true;
    }
    task_handler_task_free(task); // the callee owns its argument
    return ok;
}
