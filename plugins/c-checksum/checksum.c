// A task handler in C: Adler-32 and FNV-1a checksums of the task's data.
//
// Bindings in gen/ come from `wit-bindgen c ../../wit --world task-handler --out-dir gen`; the
// component is built by plugins/build.sh (clang-19 for wasm32-wasi, then `wasm-tools component new`).
// Reports progress per 10% of the input, partial results half way and a log line; fails with a
// non-retryable `invalid-input` error when the data is the JSON string "fail".
#include <string.h>

#include "task_handler.h"

// Appends the decimal form of n at *at. No stdio: it would pull in WASI preview1 imports.
static char *put_u64(char *at, uint64_t n) {
    char digits[20];
    int k = 0;
    do {
        digits[k++] = (char)('0' + n % 10);
        n /= 10;
    } while (n);
    while (k) *at++ = digits[--k];
    return at;
}

static char *put_str(char *at, const char *s) {
    size_t n = strlen(s);
    memcpy(at, s, n);
    return at + n;
}

static void set_string(task_handler_string_t *s, const char *text) {
    task_handler_string_dup(s, text); // heap copy: the host frees what we return
}

bool exports_task_handler_handle(task_handler_task_t *task, task_handler_option_string_t *ret,
                                 task_handler_handler_error_t *err) {
    const uint8_t *p = task->data.ptr;
    size_t len = task->data.len;
    bool ok = true;

    if (len == 6 && memcmp(p, "\"fail\"", 6) == 0) {
        set_string(&err->code, "invalid-input");
        set_string(&err->message, "asked to fail");
        err->retryable = false;
        ok = false;
    } else {
        uint32_t a = 1, b = 0, fnv = 2166136261u;
        size_t step = len / 10 ? len / 10 : 1;
        for (size_t i = 0; i < len; i++) {
            a = (a + p[i]) % 65521;
            b = (b + a) % 65521;
            fnv = (fnv ^ p[i]) * 16777619u;
            if ((i + 1) % step == 0) {
                taskhost_plugin_host_set_progress((uint8_t)((i + 1) * 100 / len > 99 ? 99 : (i + 1) * 100 / len));
            }
            if (i + 1 == len / 2) {
                char partial[64];
                char *at = put_str(partial, "{\"bytes_so_far\":");
                at = put_str(put_u64(at, i + 1), "}");
                *at = 0;
                task_handler_string_t json, refused;
                task_handler_string_set(&json, partial);
                if (!taskhost_plugin_host_set_results(&json, &refused)) {
                    task_handler_string_free(&refused);
                }
            }
        }
        char out[128];
        char *at = put_u64(put_str(out, "{\"bytes\":"), len);
        at = put_u64(put_str(at, ",\"adler32\":"), (b << 16) | a);
        at = put_u64(put_str(at, ",\"fnv1a\":"), fnv);
        *put_str(at, "}") = 0;
        char line[96];
        at = put_u64(put_str(line, "checksummed "), len);
        at = put_u64(put_str(at, " bytes (attempt "), task->attempt);
        *put_str(at, ")") = 0;
        task_handler_string_t msg;
        task_handler_string_set(&msg, line);
        taskhost_plugin_host_log(TASKHOST_PLUGIN_TYPES_LOG_LEVEL_INFO, &msg);
        taskhost_plugin_host_set_progress(100);
        ret->is_some = true;
        set_string(&ret->val, out);
    }
    task_handler_task_free(task); // the callee owns its argument
    return ok;
}
