// taskhost's C SDK: helpers over the task-handler-http bindings (gen/task_handler_http.h, made by
// `wit-bindgen c wit --world task-handler-http`), header only. The handler is the bindings' export:
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
//   th_raise_for_status makes a 5xx answer http-5xx (retried), a 4xx one http-4xx (not, but 408/429).
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
            for (int i = 0; str[i] && (precision < 0 || i < precision); i++) TH__PUT(str[i]);
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
    while (p < end && *p != ',' && *p != '}' && *p != ']' && *p != ' ' && *p != '\n') p++;
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

// --- HTTP ---

typedef struct {
    const char *method, *url;
    unsigned status;
    char content_type[128];
    uint8_t *body; // NUL-terminated, len bytes before it
    size_t len;
} th_response;

static void th_response_free(th_response *r) {
    free(r->body);
    r->body = NULL;
}

static bool th__failed(th_error *err, const char *method, const char *url, const wasi_http_types_error_code_t *code,
                       const char *text) {
    switch (code ? code->tag : 255) {
    case WASI_HTTP_TYPES_ERROR_CODE_HTTP_REQUEST_DENIED:
        return th_fail(err, "request-denied", "%s %s: not granted to this handler by the operator", method, url);
    case WASI_HTTP_TYPES_ERROR_CODE_DNS_TIMEOUT:
    case WASI_HTTP_TYPES_ERROR_CODE_CONNECTION_TIMEOUT:
    case WASI_HTTP_TYPES_ERROR_CODE_CONNECTION_READ_TIMEOUT:
    case WASI_HTTP_TYPES_ERROR_CODE_CONNECTION_WRITE_TIMEOUT:
    case WASI_HTTP_TYPES_ERROR_CODE_HTTP_RESPONSE_TIMEOUT:
        return th_retry(err, "request-timeout", "%s %s: timed out", method, url);
    case WASI_HTTP_TYPES_ERROR_CODE_HTTP_RESPONSE_BODY_SIZE:
        return th_fail(err, "response-too-large", "%s %s: the response is over this handler's limit", method, url);
    case 255: // a body that broke off: wasi:http gives text, no code
        if (strstr(text, "body size exceeds limit"))
            return th_fail(err, "response-too-large", "%s %s: the response is over this handler's limit", method, url);
        if (strstr(text, "timeout") || strstr(text, "timed out"))
            return th_retry(err, "request-timeout", "%s %s: reading the response: %s", method, url, text);
        return th_retry(err, "request-failed", "%s %s: reading the response: %s", method, url, text);
    default:
        return th_retry(err, "request-failed", "%s %s: wasi:http error %u", method, url, (unsigned)code->tag);
    }
}

static void th__header(wasi_http_types_own_fields_t headers, const char *name, const char *value) {
    task_handler_http_string_t n;
    task_handler_http_string_set(&n, name);
    wasi_http_types_field_value_t v = {(uint8_t *)value, strlen(value)};
    wasi_http_types_header_error_t e;
    wasi_http_types_method_fields_append(wasi_http_types_borrow_fields(headers), &n, &v, &e);
}

// Reads the answer's body into r (at most TH_MAX_BODY bytes); false with err on a broken body.
static bool th__read(wasi_http_types_borrow_incoming_response_t resp, th_response *r, th_error *err) {
    wasi_http_types_own_incoming_body_t incoming;
    if (!wasi_http_types_method_incoming_response_consume(resp, &incoming))
        return th_retry(err, "request-failed", "%s %s: no body", r->method, r->url);
    bool ok = true;
    size_t cap = 4096;
    r->body = malloc(cap + 1);
    r->len = 0;
    wasi_http_types_own_input_stream_t in;
    if (r->body && wasi_http_types_method_incoming_body_stream(wasi_http_types_borrow_incoming_body(incoming), &in)) {
        for (;;) {
            task_handler_http_list_u8_t got;
            wasi_io_streams_stream_error_t e;
            if (!wasi_io_streams_method_input_stream_blocking_read(wasi_io_streams_borrow_input_stream(in), 65536,
                                                                   &got, &e)) {
                if (e.tag == WASI_IO_STREAMS_STREAM_ERROR_LAST_OPERATION_FAILED) {
                    wasi_http_types_error_code_t code;
                    task_handler_http_string_t text;
                    wasi_io_error_borrow_error_t b = wasi_io_error_borrow_error(e.val.last_operation_failed);
                    wasi_io_error_method_error_to_debug_string(b, &text);
                    char t[300];
                    th_format(t, sizeof t, "%.*s", (int)(text.len < 299 ? text.len : 299), (const char *)text.ptr);
                    task_handler_http_string_free(&text);
                    ok = wasi_http_types_http_error_code(b, &code) ? th__failed(err, r->method, r->url, &code, t)
                                                                    : th__failed(err, r->method, r->url, NULL, t);
                    wasi_io_error_error_drop_own(e.val.last_operation_failed);
                }
                break; // closed: the whole answer is read
            }
            if (r->len + got.len > TH_MAX_BODY) {
                task_handler_http_list_u8_free(&got);
                ok = th_fail(err, "response-too-large", "%s %s: over %u bytes", r->method, r->url, TH_MAX_BODY);
                break;
            }
            while (r->len + got.len > cap) cap *= 2;
            uint8_t *grown = realloc(r->body, cap + 1);
            if (!grown) {
                task_handler_http_list_u8_free(&got);
                ok = th_fail(err, "response-too-large", "%s %s: out of memory", r->method, r->url);
                break;
            }
            r->body = grown;
            memcpy(r->body + r->len, got.ptr, got.len);
            r->len += got.len;
            task_handler_http_list_u8_free(&got);
        }
        wasi_io_streams_input_stream_drop_own(in); // the stream before its body
    }
    wasi_http_types_future_trailers_drop_own(wasi_http_types_static_incoming_body_finish(incoming));
    if (r->body) r->body[r->len] = 0;
    if (!ok) th_response_free(r);
    return ok;
}

// One request: `body` (body_len bytes, may be NULL) sent with `content_type` (NULL: none);
// timeout_ms to connect, to the first byte and between bytes (0: the host's limits only). On
// success r holds the answer (free it with th_response_free); else err says why.
static bool th_http(const char *method, const char *url, const char *content_type, const uint8_t *body,
                    size_t body_len, unsigned timeout_ms, th_response *r, th_error *err) {
    memset(r, 0, sizeof *r);
    r->method = method;
    r->url = url;
    bool https = strncmp(url, "https://", 8) == 0;
    if (!https && strncmp(url, "http://", 7) != 0)
        return th_fail(err, "request-failed", "%s %s: not an http:// or https:// URL", method, url);
    const char *authority = url + (https ? 8 : 7);
    const char *path = strchr(authority, '/');
    if (!path) path = authority + strlen(authority);

    wasi_http_types_own_fields_t headers = wasi_http_types_constructor_fields();
    th__header(headers, "user-agent", "taskhost");
    if (content_type) th__header(headers, "content-type", content_type);
    char length[24];
    th_format(length, sizeof length, "%zu", body_len);
    if (body_len || !strcmp(method, "POST") || !strcmp(method, "PUT") || !strcmp(method, "PATCH"))
        th__header(headers, "content-length", length);
    wasi_http_types_own_outgoing_request_t request = wasi_http_types_constructor_outgoing_request(headers);
    wasi_http_types_borrow_outgoing_request_t q = wasi_http_types_borrow_outgoing_request(request);
    wasi_http_types_method_t m = {.tag = WASI_HTTP_TYPES_METHOD_OTHER};
    const char *names[] = {"GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH"};
    for (uint8_t i = 0; i < sizeof names / sizeof *names; i++)
        if (!strcmp(method, names[i])) m.tag = i;
    if (m.tag == WASI_HTTP_TYPES_METHOD_OTHER) task_handler_http_string_set(&m.val.other, method);
    wasi_http_types_scheme_t scheme = {.tag = https ? WASI_HTTP_TYPES_SCHEME_HTTPS : WASI_HTTP_TYPES_SCHEME_HTTP};
    task_handler_http_string_t auth = {(uint8_t *)authority, (size_t)(path - authority)};
    task_handler_http_string_t path_query = {(uint8_t *)(*path ? path : "/"), *path ? strlen(path) : 1};
    wasi_http_types_method_outgoing_request_set_method(q, &m);
    wasi_http_types_method_outgoing_request_set_scheme(q, &scheme);
    wasi_http_types_method_outgoing_request_set_authority(q, &auth);
    wasi_http_types_method_outgoing_request_set_path_with_query(q, &path_query);
    wasi_http_types_own_outgoing_body_t outgoing;
    wasi_http_types_method_outgoing_request_body(q, &outgoing);
    wasi_http_types_own_request_options_t options = wasi_http_types_constructor_request_options();
    if (timeout_ms) {
        wasi_http_types_borrow_request_options_t o = wasi_http_types_borrow_request_options(options);
        wasi_http_types_duration_t ns = (wasi_http_types_duration_t)timeout_ms * 1000000u;
        wasi_http_types_method_request_options_set_connect_timeout(o, &ns);
        wasi_http_types_method_request_options_set_first_byte_timeout(o, &ns);
        wasi_http_types_method_request_options_set_between_bytes_timeout(o, &ns);
    }
    wasi_http_types_own_future_incoming_response_t future;
    wasi_http_types_error_code_t code;
    if (!wasi_http_outgoing_handler_handle(request, &options, &future, &code)) {
        wasi_http_types_outgoing_body_drop_own(outgoing);
        return th__failed(err, method, url, &code, "");
    }
    // The body goes in writes of at most 4 KiB, then is finished.
    wasi_http_types_own_output_stream_t stream;
    if (wasi_http_types_method_outgoing_body_write(wasi_http_types_borrow_outgoing_body(outgoing), &stream)) {
        for (size_t off = 0; off < body_len;) {
            size_t n = body_len - off < 4096 ? body_len - off : 4096;
            task_handler_http_list_u8_t chunk = {(uint8_t *)body + off, n};
            wasi_io_streams_stream_error_t e;
            if (!wasi_io_streams_method_output_stream_blocking_write_and_flush(
                    wasi_io_streams_borrow_output_stream(stream), &chunk, &e)) {
                if (e.tag == WASI_IO_STREAMS_STREAM_ERROR_LAST_OPERATION_FAILED)
                    wasi_io_error_error_drop_own(e.val.last_operation_failed);
                break; // the answer says why (a refusal, a bound)
            }
            off += n;
        }
        wasi_io_streams_output_stream_drop_own(stream); // the stream before its body
    }
    wasi_http_types_static_outgoing_body_finish(outgoing, NULL, &code);

    wasi_http_types_borrow_future_incoming_response_t f = wasi_http_types_borrow_future_incoming_response(future);
    wasi_http_types_own_pollable_t ready = wasi_http_types_method_future_incoming_response_subscribe(f);
    wasi_io_poll_method_pollable_block(wasi_io_poll_borrow_pollable(ready));
    wasi_io_poll_pollable_drop_own(ready); // the pollable before its future
    wasi_http_types_result_result_own_incoming_response_error_code_void_t got;
    bool have = wasi_http_types_method_future_incoming_response_get(f, &got);
    wasi_http_types_future_incoming_response_drop_own(future);
    if (!have || got.is_err) return th_retry(err, "request-failed", "%s %s: no response", method, url);
    if (got.val.ok.is_err) return th__failed(err, method, url, &got.val.ok.val.err, "");

    wasi_http_types_own_incoming_response_t response = got.val.ok.val.ok;
    wasi_http_types_borrow_incoming_response_t resp = wasi_http_types_borrow_incoming_response(response);
    r->status = wasi_http_types_method_incoming_response_status(resp);
    wasi_http_types_own_headers_t fields = wasi_http_types_method_incoming_response_headers(resp);
    wasi_http_types_list_tuple2_field_name_field_value_t entries;
    wasi_http_types_method_fields_entries(wasi_http_types_borrow_fields(fields), &entries);
    for (size_t i = 0; i < entries.len; i++) {
        wasi_http_types_tuple2_field_name_field_value_t *h = &entries.ptr[i];
        if (h->f0.len == 12 && !strncasecmp((const char *)h->f0.ptr, "content-type", 12)) {
            size_t n = h->f1.len < sizeof r->content_type - 1 ? h->f1.len : sizeof r->content_type - 1;
            memcpy(r->content_type, h->f1.ptr, n);
            r->content_type[n] = 0;
        }
    }
    wasi_http_types_list_tuple2_field_name_field_value_free(&entries);
    wasi_http_types_fields_drop_own(fields); // the headers before their response
    bool ok = th__read(resp, r, err);
    wasi_http_types_incoming_response_drop_own(response);
    return ok;
}

// False with err for a 4xx or 5xx answer: http-5xx (retried), http-4xx (not, but 408 and 429).
static bool th_raise_for_status(const th_response *r, th_error *err) {
    if (r->status < 400) return true;
    bool retry = r->status >= 500 || r->status == 408 || r->status == 429;
    const char *code = r->status >= 500 ? "http-5xx" : "http-4xx";
    int n = (int)(r->len < 500 ? r->len : 500);
    char message[900];
    th_format(message, sizeof message, "%s %s answered %u: %.*s", r->method, r->url, r->status, n,
              r->body ? (const char *)r->body : "");
    return retry ? th_retry(err, code, "%s", message) : th_fail(err, code, "%s", message);
}

#endif
