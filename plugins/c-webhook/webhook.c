// Calls a webhook, in C: POSTs the task's "payload" as JSON to its "url" and returns the status
// and the start of the response. A 5xx answer is a retryable failure, a 4xx one is not. The URL
// must be granted to this handler in the operator's configuration ([handlers.c-webhook.grants.http]).
//
// Task data: {"url": "https://hooks.example.com/x", "payload": {...}}.
//
// Bindings in gen/ come from `wit-bindgen c wit --world task-handler-http --out-dir gen`: taskhost's
// world plus wasi:http/outgoing-handler (in taskhost's tree that wit/ is plugins/py-webhook/wit).
// Raw wasi:http, one blocking request; no stdio, so no WASI preview 1 import.
#include <stdlib.h>
#include <string.h>

#include "task_handler_http.h"

typedef task_handler_http_string_t str_t;

// Most bytes of the answer kept in the results.
#define KEEP 1000

static bool fail(task_handler_http_handler_error_t *err, const char *code, const char *message, bool retryable) {
    task_handler_http_string_dup(&err->code, code); // heap copies: the host frees what we return
    task_handler_http_string_dup(&err->message, message);
    err->retryable = retryable;
    return false;
}

// --- Just enough JSON to find a top-level key of an object (wasi-libc has no parser) ---

static const uint8_t *skip_ws(const uint8_t *p, const uint8_t *end) {
    while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')) p++;
    return p;
}

// p at an opening quote; returns just past the closing one, or NULL.
static const uint8_t *skip_string(const uint8_t *p, const uint8_t *end) {
    for (p++; p < end; p++) {
        if (*p == '\\') p++;
        else if (*p == '"') return p + 1;
    }
    return NULL;
}

// Returns just past the value starting at p (the host checked the data is valid JSON), or NULL.
static const uint8_t *skip_value(const uint8_t *p, const uint8_t *end) {
    if (p >= end) return NULL;
    if (*p == '"') return skip_string(p, end);
    if (*p == '{' || *p == '[') {
        int depth = 0;
        while (p < end) {
            if (*p == '"') {
                p = skip_string(p, end);
                if (!p) return NULL;
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

// The value of `key` in the object `data`: its first and one-past-last byte.
static bool find_key(const uint8_t *p, const uint8_t *end, const char *key, const uint8_t **v, const uint8_t **v_end) {
    size_t klen = strlen(key);
    p = skip_ws(p, end);
    if (p >= end || *p != '{') return false;
    p = skip_ws(p + 1, end);
    while (p < end && *p == '"') {
        const uint8_t *k = p + 1, *after = skip_string(p, end);
        if (!after) return false;
        bool match = (size_t)(after - 1 - k) == klen && memcmp(k, key, klen) == 0;
        p = skip_ws(after, end);
        if (p >= end || *p != ':') return false;
        p = skip_ws(p + 1, end);
        const uint8_t *value_end = skip_value(p, end);
        if (!value_end) return false;
        if (match) {
            *v = p;
            *v_end = value_end;
            return true;
        }
        p = skip_ws(value_end, end);
        if (p < end && *p == ',') p = skip_ws(p + 1, end);
    }
    return false;
}

// --- Output ---

typedef struct {
    char *at, *end;
} out_t;

static void put(out_t *o, const char *s, size_t n) {
    if (n > (size_t)(o->end - o->at)) n = (size_t)(o->end - o->at);
    memcpy(o->at, s, n);
    o->at += n;
}

static void put_s(out_t *o, const char *s) { put(o, s, strlen(s)); }

static void put_u(out_t *o, unsigned n) {
    char d[12];
    int k = 0;
    do d[k++] = (char)('0' + n % 10); while (n /= 10);
    while (k) put(o, &d[--k], 1);
}

// Text as a JSON string's contents: quotes, backslashes and controls escaped, invalid UTF-8
// (or a character cut at the end) replaced by U+FFFD.
static void put_json_text(out_t *o, const uint8_t *p, size_t n) {
    static const char hex[] = "0123456789abcdef";
    for (size_t i = 0; i < n;) {
        uint8_t c = p[i];
        size_t len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
        bool valid = len > 0 && i + len <= n;
        for (size_t k = 1; valid && k < len; k++) valid = (p[i + k] & 0xC0) == 0x80;
        if (!valid) {
            put_s(o, "\\ufffd");
            i++;
        } else if (c == '"' || c == '\\') {
            char e[2] = {'\\', (char)c};
            put(o, e, 2);
            i++;
        } else if (c < 0x20) {
            char e[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
            put(o, e, 6);
            i++;
        } else {
            put(o, (const char *)p + i, len);
            i += len;
        }
    }
}

static const char *error_name(uint8_t tag) {
    switch (tag) {
    case WASI_HTTP_TYPES_ERROR_CODE_DNS_ERROR: return "DNS-error";
    case WASI_HTTP_TYPES_ERROR_CODE_DESTINATION_IP_PROHIBITED: return "destination-IP-prohibited";
    case WASI_HTTP_TYPES_ERROR_CODE_CONNECTION_REFUSED: return "connection-refused";
    case WASI_HTTP_TYPES_ERROR_CODE_CONNECTION_TIMEOUT: return "connection-timeout";
    case WASI_HTTP_TYPES_ERROR_CODE_CONNECTION_LIMIT_REACHED: return "connection-limit-reached";
    case WASI_HTTP_TYPES_ERROR_CODE_TLS_CERTIFICATE_ERROR: return "TLS-certificate-error";
    case WASI_HTTP_TYPES_ERROR_CODE_HTTP_REQUEST_DENIED: return "HTTP-request-denied";
    case WASI_HTTP_TYPES_ERROR_CODE_HTTP_REQUEST_BODY_SIZE: return "HTTP-request-body-size";
    case WASI_HTTP_TYPES_ERROR_CODE_HTTP_RESPONSE_BODY_SIZE: return "HTTP-response-body-size";
    case WASI_HTTP_TYPES_ERROR_CODE_HTTP_RESPONSE_TIMEOUT: return "HTTP-response-timeout";
    default: return "another wasi:http error";
    }
}

static bool request_failed(task_handler_http_handler_error_t *err, const char *url, uint8_t tag) {
    char message[600];
    out_t o = {message, message + sizeof message - 1};
    put_s(&o, "POST ");
    put_s(&o, url);
    put_s(&o, ": ");
    put_s(&o, error_name(tag));
    *o.at = 0;
    // A refused or failed request: the host's log says which, and why.
    return fail(err, "request-failed", message, true);
}

static void add_header(wasi_http_types_own_fields_t headers, const char *name, const char *value) {
    str_t n;
    task_handler_http_string_set(&n, name);
    wasi_http_types_field_value_t v = {(uint8_t *)value, strlen(value)};
    wasi_http_types_header_error_t e;
    wasi_http_types_method_fields_append(wasi_http_types_borrow_fields(headers), &n, &v, &e);
}

// POSTs `body` to the URL; on success sets *status and the answer's first KEEP bytes.
static bool post(const char *url, const uint8_t *body, size_t body_len, unsigned *status, uint8_t *answer,
                 size_t *answer_len, task_handler_http_handler_error_t *err) {
    bool https = strncmp(url, "https://", 8) == 0;
    if (!https && strncmp(url, "http://", 7) != 0) return fail(err, "invalid-input", "url is not http(s)://...", false);
    const char *authority = url + (https ? 8 : 7);
    const char *path = strchr(authority, '/');
    if (!path) path = authority + strlen(authority);

    wasi_http_types_own_fields_t headers = wasi_http_types_constructor_fields();
    char length[24];
    out_t o = {length, length + sizeof length - 1};
    put_u(&o, (unsigned)body_len);
    *o.at = 0;
    add_header(headers, "content-type", "application/json");
    add_header(headers, "content-length", length);
    wasi_http_types_own_outgoing_request_t request = wasi_http_types_constructor_outgoing_request(headers);
    wasi_http_types_borrow_outgoing_request_t r = wasi_http_types_borrow_outgoing_request(request);
    wasi_http_types_method_t method = {.tag = WASI_HTTP_TYPES_METHOD_POST};
    wasi_http_types_scheme_t scheme = {.tag = https ? WASI_HTTP_TYPES_SCHEME_HTTPS : WASI_HTTP_TYPES_SCHEME_HTTP};
    str_t auth = {(uint8_t *)authority, (size_t)(path - authority)};
    str_t path_query = {(uint8_t *)(*path ? path : "/"), *path ? strlen(path) : 1};
    wasi_http_types_method_outgoing_request_set_method(r, &method);
    wasi_http_types_method_outgoing_request_set_scheme(r, &scheme);
    wasi_http_types_method_outgoing_request_set_authority(r, &auth);
    wasi_http_types_method_outgoing_request_set_path_with_query(r, &path_query);
    wasi_http_types_own_outgoing_body_t outgoing;
    wasi_http_types_method_outgoing_request_body(r, &outgoing);

    wasi_http_types_own_future_incoming_response_t future;
    wasi_http_types_error_code_t code;
    if (!wasi_http_outgoing_handler_handle(request, NULL, &future, &code)) {
        wasi_http_types_outgoing_body_drop_own(outgoing);
        return request_failed(err, url, code.tag);
    }
    // The body goes in writes of at most 4 KiB, then is finished.
    wasi_http_types_own_output_stream_t stream;
    if (wasi_http_types_method_outgoing_body_write(wasi_http_types_borrow_outgoing_body(outgoing), &stream)) {
        for (size_t off = 0; off < body_len;) {
            size_t n = body_len - off < 4096 ? body_len - off : 4096;
            task_handler_http_list_u8_t chunk = {(uint8_t *)body + off, n};
            wasi_io_streams_stream_error_t stream_error;
            if (!wasi_io_streams_method_output_stream_blocking_write_and_flush(
                    wasi_io_streams_borrow_output_stream(stream), &chunk, &stream_error)) {
                if (stream_error.tag == WASI_IO_STREAMS_STREAM_ERROR_LAST_OPERATION_FAILED)
                    wasi_io_error_error_drop_own(stream_error.val.last_operation_failed);
                break; // the response says why (a refusal, a bound)
            }
            off += n;
        }
        wasi_io_streams_output_stream_drop_own(stream);
    }
    wasi_http_types_static_outgoing_body_finish(outgoing, NULL, &code);

    wasi_http_types_borrow_future_incoming_response_t f = wasi_http_types_borrow_future_incoming_response(future);
    wasi_http_types_own_pollable_t ready = wasi_http_types_method_future_incoming_response_subscribe(f);
    wasi_io_poll_method_pollable_block(wasi_io_poll_borrow_pollable(ready));
    wasi_io_poll_pollable_drop_own(ready);
    wasi_http_types_result_result_own_incoming_response_error_code_void_t got;
    bool have = wasi_http_types_method_future_incoming_response_get(f, &got);
    wasi_http_types_future_incoming_response_drop_own(future);
    if (!have || got.is_err) return fail(err, "request-failed", "the response was not ready", true);
    if (got.val.ok.is_err) return request_failed(err, url, got.val.ok.val.err.tag);

    wasi_http_types_own_incoming_response_t response = got.val.ok.val.ok;
    wasi_http_types_borrow_incoming_response_t resp = wasi_http_types_borrow_incoming_response(response);
    *status = wasi_http_types_method_incoming_response_status(resp);
    *answer_len = 0;
    wasi_http_types_own_incoming_body_t incoming;
    if (wasi_http_types_method_incoming_response_consume(resp, &incoming)) {
        wasi_http_types_own_input_stream_t in;
        if (wasi_http_types_method_incoming_body_stream(wasi_http_types_borrow_incoming_body(incoming), &in)) {
            while (*answer_len < KEEP) {
                task_handler_http_list_u8_t read;
                wasi_io_streams_stream_error_t stream_error;
                if (!wasi_io_streams_method_input_stream_blocking_read(
                        wasi_io_streams_borrow_input_stream(in), KEEP - *answer_len, &read, &stream_error)) {
                    if (stream_error.tag == WASI_IO_STREAMS_STREAM_ERROR_LAST_OPERATION_FAILED)
                        wasi_io_error_error_drop_own(stream_error.val.last_operation_failed);
                    break; // closed: the whole answer is read
                }
                memcpy(answer + *answer_len, read.ptr, read.len);
                *answer_len += read.len;
                task_handler_http_list_u8_free(&read);
            }
            wasi_io_streams_input_stream_drop_own(in);
        }
        wasi_http_types_incoming_body_drop_own(incoming);
    }
    wasi_http_types_incoming_response_drop_own(response);
    return true;
}

bool exports_task_handler_http_handle(task_handler_http_task_t *task, task_handler_http_option_string_t *ret,
                                      task_handler_http_handler_error_t *err) {
    const uint8_t *data = task->data.ptr, *end = data + task->data.len;
    const uint8_t *url_at, *url_end, *payload = (const uint8_t *)"null", *payload_end = payload + 4;
    bool ok = false;
    char url[512];
    if (!find_key(data, end, "url", &url_at, &url_end) || *url_at != '"' || url_end - url_at < 2) {
        ok = fail(err, "invalid-input", "data has no \"url\"", false);
    } else if ((size_t)(url_end - url_at - 2) >= sizeof url || memchr(url_at, '\\', (size_t)(url_end - url_at))) {
        ok = fail(err, "invalid-input", "\"url\" is too long, or holds an escape", false);
    } else {
        memcpy(url, url_at + 1, (size_t)(url_end - url_at - 2));
        url[url_end - url_at - 2] = 0;
        find_key(data, end, "payload", &payload, &payload_end);
        unsigned status = 0;
        uint8_t answer[KEEP];
        size_t answer_len = 0;
        ok = post(url, payload, (size_t)(payload_end - payload), &status, answer, &answer_len, err);
        if (ok) {
            static char out[64 + 6 * KEEP + 600];
            out_t o = {out, out + sizeof out - 1};
            if (status >= 400) {
                put_s(&o, "POST ");
                put_s(&o, url);
                put_s(&o, " answered ");
                put_u(&o, status);
                put_s(&o, ": ");
                put_json_text(&o, answer, answer_len); // a message is a string: valid UTF-8, no NUL
                *o.at = 0;
                ok = fail(err, status >= 500 ? "http-5xx" : "http-4xx", out, status >= 500);
            } else {
                put_s(&o, "{\"status\":");
                put_u(&o, status);
                put_s(&o, ",\"response\":\"");
                put_json_text(&o, answer, answer_len);
                put_s(&o, "\"}");
                *o.at = 0;
                ret->is_some = true;
                task_handler_http_string_dup(&ret->val, out);
            }
        }
    }
    task_handler_http_task_free(task); // the callee owns its argument
    return ok;
}
