// taskhost's C SDK: helpers over the task-handler-http bindings (gen/task_handler_http.h, made by
// `wit-bindgen c wit --world task-handler-http`), header only; workflows (children, joins, snooze,
// signals) in taskhost_workflow.h, included at the end. The handler is the bindings' export:
//
//   #include "taskhost.h"
//
//   bool exports_task_handler_http_handle(th_task *task, th_results *ret, th_error *err) {
//       char url[512];
//       bool ok;
//       th_response r;
//       if (!th_get_string(task, "url", url, sizeof url)) ok = th_fail(err, "invalid-input", "no \"url\"");
//       else if (!th_http("GET", url, NULL, NULL, 0, 10000, &r, err)) ok = false;
//       else { ok = th_raise_for_status(&r, err) && th_ok(ret, "{\"done\":true}"); th_response_free(&r); }
//       task_handler_http_task_free(task); // the callee owns its argument
//       return ok;
//   }
//
// - th_get_string / th_get_raw: a top-level key of the task's data (there is no JSON parser in
//   wasi-libc: strings with escapes are refused, raw values are the JSON text).
// - th_ok(ret, json): the results (NULL: none); th_fail / th_retry(err, code, fmt, ...): a final or a
//   retryable error, printf-style.
// - th_progress, th_partial, th_info / th_debug / th_warning / th_error_log; messages are formatted
//   by th_format (%s %.*s %d %u %lld %llu %zu %c, without stdio, which needs WASI preview 1's
//   adapter); what the handler prints to stdout with printf lands in the run's logs too (fflush it).
// - th_http: one request over wasi:http, where the operator's grant allows, its answer read whole
//   (up to TH_MAX_BODY bytes); a request that gets no answer fills err in the handler's terms, as
//   the other SDKs do (request-denied, request-timeout, response-too-large, request-failed), and
//   th_raise_for_status makes a 5xx answer http-5xx (retried), a 4xx one http-4xx (not, but 408/429);
//   th_snooze_if_busy snoozes the run on a 429 or 503 until its Retry-After.
#ifndef TASKHOST_H
#define TASKHOST_H

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "task_handler_http.h"

typedef task_handler_http_task_t th_task;
typedef task_handler_http_handler_error_t th_error;
typedef task_handler_http_option_string_t th_results;

#ifndef TH_MAX_BODY
#define TH_MAX_BODY (16u << 20)
#endif

// --- Formatting without stdio (vsnprintf pulls in WASI preview 1's files) ---

// printf-style into out (cap bytes, always NUL-terminated): %s, %.*s, %d, %u, %lld, %llu, %zu, %c and %%.
// Returns the length written.
static size_t th_vformat(char *out, size_t cap, const char *fmt, va_list args) {
    size_t at = 0;
#define TH__PUT(ch)                                                                                                \
    do {                                                                                                           \
        if (at + 1 < cap) out[at++] = (ch);                                                                        \
    } while (0)
    for (const char *f = fmt; *f; f++) {
        if (*f != '%') {
            TH__PUT(*f);
            continue;
        }
        f++;
        int precision = -1;
        if (f[0] == '.' && f[1] == '*') precision = va_arg(args, int), f += 2;
        int longs = 0;
        while (*f == 'l') longs++, f++;
        bool size = *f == 'z' && (f++, true);
        if (*f == 's') {
            const char *str = va_arg(args, const char *);
            if (!str) str = "(null)";
            // The precision first: a host string has no NUL after its last byte.
            for (int i = 0; (precision < 0 || i < precision) && str[i]; i++) TH__PUT(str[i]);
        } else if (*f == 'c') {
            TH__PUT((char)va_arg(args, int));
        } else if (*f == 'd' || *f == 'u') {
            unsigned long long v;
            bool negative = false;
            if (*f == 'd') {
                long long d = longs >= 2 ? va_arg(args, long long) : longs ? va_arg(args, long) : va_arg(args, int);
                negative = d < 0;
                v = negative ? 0ull - (unsigned long long)d : (unsigned long long)d;
            } else {
                v = size ? va_arg(args, size_t)
                    : longs >= 2 ? va_arg(args, unsigned long long)
                    : longs ? va_arg(args, unsigned long)
                            : va_arg(args, unsigned);
            }
            char digits[24];
            int k = 0;
            do digits[k++] = (char)('0' + v % 10); while (v /= 10);
            if (negative) TH__PUT('-');
            while (k) TH__PUT(digits[--k]);
        } else if (*f == '%') {
            TH__PUT('%');
        } else if (!*f) {
            break;
        }
    }
#undef TH__PUT
    if (cap) out[at] = 0;
    return at;
}

static size_t th_format(char *out, size_t cap, const char *fmt, ...) {
    va_list args;
    va_start(args, fmt);
    size_t n = th_vformat(out, cap, fmt, args);
    va_end(args);
    return n;
}

// --- Results, errors, progress, logs ---

static bool th_ok(th_results *ret, const char *json) {
    ret->is_some = json != NULL;
    if (json) task_handler_http_string_dup(&ret->val, json); // a heap copy: the host frees it
    return true;
}

// Text as a JSON string's contents into out (cap bytes, NUL-terminated, cut at a whole character):
// quotes, backslashes and controls escaped, invalid UTF-8 replaced by U+FFFD. Returns its length.
static size_t th_json_escape(char *out, size_t cap, const uint8_t *p, size_t n) {
    static const char hex[] = "0123456789abcdef";
    size_t at = 0;
    for (size_t i = 0; i < n;) {
        uint8_t c = p[i];
        size_t len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
        bool valid = len > 0 && i + len <= n;
        for (size_t k = 1; valid && k < len; k++) valid = (p[i + k] & 0xC0) == 0x80;
        char e[8];
        const char *piece = e;
        size_t plen;
        if (!valid) {
            piece = "\\ufffd", plen = 6, len = 1;
        } else if (c == '"' || c == '\\') {
            e[0] = '\\', e[1] = (char)c, plen = 2;
        } else if (c < 0x20) {
            e[0] = '\\', e[1] = 'u', e[2] = '0', e[3] = '0', e[4] = hex[c >> 4], e[5] = hex[c & 15], plen = 6;
        } else {
            piece = (const char *)p + i, plen = len;
        }
        if (at + plen + 1 > cap) break;
        memcpy(out + at, piece, plen);
        at += plen;
        i += len;
    }
    if (cap) out[at] = 0;
    return at;
}

// Make text valid UTF-8 in place (a WIT string must be): a byte that starts no whole character
// becomes '?'.
static void th__utf8(char *s) {
    for (uint8_t *p = (uint8_t *)s; *p;) {
        uint8_t c = *p;
        size_t len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
        bool valid = len > 0;
        for (size_t k = 1; valid && k < len; k++) valid = (p[k] & 0xC0) == 0x80;
        if (!valid) *p = '?', len = 1;
        p += len;
    }
}

static bool th_verror(th_error *err, bool retryable, const char *code, const char *fmt, va_list args) {
    char message[1024];
    th_vformat(message, sizeof message, fmt, args);
    th__utf8(message);
    task_handler_http_string_dup(&err->code, code);
    task_handler_http_string_dup(&err->message, message);
    err->retryable = retryable;
    return false;
}

// The run fails for good; returns false, for `return th_fail(...)`.
static bool th_fail(th_error *err, const char *code, const char *fmt, ...) {
    va_list args;
    va_start(args, fmt);
    th_verror(err, false, code, fmt, args);
    va_end(args);
    return false;
}

// The run fails and the task is retried; returns false.
static bool th_retry(th_error *err, const char *code, const char *fmt, ...) {
    va_list args;
    va_start(args, fmt);
    th_verror(err, true, code, fmt, args);
    va_end(args);
    return false;
}

static void th_progress(unsigned percent) { taskhost_plugin_host_set_progress((uint8_t)(percent > 100 ? 100 : percent)); }

// Partial results (a JSON document) on the run; false when the host refused them.
static bool th_partial(const char *json) {
    task_handler_http_string_t s, why;
    task_handler_http_string_set(&s, json);
    if (taskhost_plugin_host_set_results(&s, &why)) return true;
    task_handler_http_string_free(&why);
    return false;
}

static void th_vlog(taskhost_plugin_host_log_level_t level, const char *fmt, va_list args) {
    char line[1024];
    th_vformat(line, sizeof line, fmt, args);
    th__utf8(line);
    task_handler_http_string_t s;
    task_handler_http_string_set(&s, line);
    taskhost_plugin_host_log(level, &s);
}

#define TH_LOG_FN(name, level)                                                                                    \
    static void name(const char *fmt, ...) {                                                                       \
        va_list args;                                                                                              \
        va_start(args, fmt);                                                                                       \
        th_vlog(level, fmt, args);                                                                                 \
        va_end(args);                                                                                              \
    }
TH_LOG_FN(th_debug, TASKHOST_PLUGIN_TYPES_LOG_LEVEL_DEBUG)
TH_LOG_FN(th_info, TASKHOST_PLUGIN_TYPES_LOG_LEVEL_INFO)
TH_LOG_FN(th_warning, TASKHOST_PLUGIN_TYPES_LOG_LEVEL_WARN)
TH_LOG_FN(th_error_log, TASKHOST_PLUGIN_TYPES_LOG_LEVEL_ERROR)

// --- The task's data: a top-level key ---

static const uint8_t *th__ws(const uint8_t *p, const uint8_t *end) {
    while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')) p++;
    return p;
}

// p at an opening quote; just past the closing one, or NULL.
static const uint8_t *th__string(const uint8_t *p, const uint8_t *end) {
    for (p++; p < end; p++) {
        if (*p == '\\') p++;
        else if (*p == '"') return p + 1;
    }
    return NULL;
}

// Just past the value at p (the host checked the data is JSON), or NULL.
static const uint8_t *th__value(const uint8_t *p, const uint8_t *end) {
    if (p >= end) return NULL;
    if (*p == '"') return th__string(p, end);
    if (*p == '{' || *p == '[') {
        int depth = 0;
        while (p < end) {
            if (*p == '"') {
                if (!(p = th__string(p, end))) return NULL;
                continue;
            }
            if (*p == '{' || *p == '[') depth++;
            if (*p == '}' || *p == ']') depth--;
            p++;
            if (depth == 0) return p;
        }
        return NULL;
    }
    while (p < end && *p != ',' && *p != '}' && *p != ']' && *p != ' ' && *p != '\n' && *p != '\t' && *p != '\r') p++;
    return p;
}

// The JSON text of the data's top-level `key`; false when the data is no object or lacks it.
static bool th_get_raw(const th_task *task, const char *key, const uint8_t **value, size_t *len) {
    const uint8_t *p = task->data.ptr, *end = p + task->data.len;
    size_t klen = strlen(key);
    p = th__ws(p, end);
    if (p >= end || *p != '{') return false;
    p = th__ws(p + 1, end);
    while (p < end && *p == '"') {
        const uint8_t *k = p + 1, *after = th__string(p, end);
        if (!after) return false;
        bool match = (size_t)(after - 1 - k) == klen && memcmp(k, key, klen) == 0;
        p = th__ws(after, end);
        if (p >= end || *p != ':') return false;
        p = th__ws(p + 1, end);
        const uint8_t *v_end = th__value(p, end);
        if (!v_end) return false;
        if (match) {
            *value = p;
            *len = (size_t)(v_end - p);
            return true;
        }
        p = th__ws(v_end, end);
        if (p < end && *p == ',') p = th__ws(p + 1, end);
    }
    return false;
}

// The data's top-level string `key`, NUL-terminated into out; false when missing, not a string,
// longer than cap - 1, or holding an escape.
static bool th_get_string(const th_task *task, const char *key, char *out, size_t cap) {
    const uint8_t *v;
    size_t len;
    if (!th_get_raw(task, key, &v, &len) || len < 2 || v[0] != '"' || len - 2 >= cap) return false;
    if (memchr(v, '\\', len)) return false;
    memcpy(out, v + 1, len - 2);
    out[len - 2] = 0;
    return true;
}

// The data's top-level `key` as an unsigned integer; false when missing, not a plain number (no
// sign, fraction or exponent), or over 2^64 - 1.
static bool th_get_u64(const th_task *task, const char *key, uint64_t *out) {
    const uint8_t *v;
    size_t len;
    if (!th_get_raw(task, key, &v, &len) || len == 0) return false;
    uint64_t n = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned d = (unsigned)(v[i] - '0');
        if (d > 9 || n > (UINT64_MAX - d) / 10) return false;
        n = n * 10 + d;
    }
    *out = n;
    return true;
}

// Walks a JSON array (raw: its text, as th_get_raw gives it), an element at a time:
//   const uint8_t *at = NULL, *item; size_t item_len;
//   while (th_array_next(raw, len, &at, &item, &item_len)) { ... }
// False at its end, or when raw is no array.
static bool th_array_next(const uint8_t *raw, size_t len, const uint8_t **at, const uint8_t **item,
                          size_t *item_len) {
    const uint8_t *end = raw + len, *p = *at;
    if (!p) {
        p = th__ws(raw, end);
        if (p >= end || *p != '[') return false;
        p++;
    }
    p = th__ws(p, end);
    if (p < end && *p == ',') p = th__ws(p + 1, end);
    if (p >= end || *p == ']') return false;
    const uint8_t *v_end = th__value(p, end);
    if (!v_end) return false;
    *item = p;
    *item_len = (size_t)(v_end - p);
    *at = v_end;
    return true;
}

#include "taskhost_workflow.h"
#include "taskhost_http.h"

#endif
