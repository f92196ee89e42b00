// {{name}}: a taskhost task handler in C. `sh build.sh` builds plugins/{{name}}.wasm.
#include <stdio.h> // printf: needs the WASI preview 1 adapter build.sh adds

#include "taskhost.h"

bool exports_task_handler_http_handle(th_task *task, th_results *ret, th_error *err) {
    char name[256], json[300];
    bool ok;
    if (!th_get_string(task, "name", name, sizeof name)) {
        ok = th_fail(err, "invalid-input", "no \"name\" in the data");
    } else {
        th_progress(50);
        th_info("attempt %u of task %lld", (unsigned)task->attempt, (long long)task->task_id);
        printf("printed lines land in the run's logs too\n");
        fflush(stdout);
        th_format(json, sizeof json, "{\"hello\":\"%s\"}", name); // a string without escapes
        ok = th_ok(ret, json);
    }
    task_handler_http_task_free(task); // the callee owns its argument
    return ok;
}
