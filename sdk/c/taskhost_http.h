// taskhost's C SDK, HTTP (included by taskhost.h): one request over wasi:http under the
// operator's grant, its answer read whole.
#ifndef TASKHOST_HTTP_H
#define TASKHOST_HTTP_H

// --- HTTP ---

typedef struct {
    const char *method, *url;
    unsigned status;
    char content_type[128];
    char retry_after[64]; // its Retry-After header, or ""
    char date[64];        // its Date header, or ""
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

// A header's value into out (cap bytes, NUL-terminated, cut to fit).
static void th__keep(char *out, size_t cap, const uint8_t *value, size_t len) {
    size_t n = len < cap - 1 ? len : cap - 1;
    memcpy(out, value, n);
    out[n] = 0;
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
            th__keep(r->content_type, sizeof r->content_type, h->f1.ptr, h->f1.len);
        } else if (h->f0.len == 11 && !strncasecmp((const char *)h->f0.ptr, "retry-after", 11)) {
            th__keep(r->retry_after, sizeof r->retry_after, h->f1.ptr, h->f1.len);
        } else if (h->f0.len == 4 && !strncasecmp((const char *)h->f0.ptr, "date", 4)) {
            th__keep(r->date, sizeof r->date, h->f1.ptr, h->f1.len);
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

// Seconds since 1970 of an HTTP date (`Sun, 06 Nov 1994 08:49:37 GMT`); 0 when it is none.
static uint64_t th__http_date(const char *v) {
    static const char months[] = "JanFebMarAprMayJunJulAugSepOctNovDec";
    char name[4] = "";
    unsigned day = 0, year = 0, h = 99, m = 99, sec = 99;
    const char *p = strchr(v, ' ');
    if (!p) return 0;
    // "DD Mon YYYY HH:MM:SS", read field by field: wasi-libc's sscanf would need stdio.
    char *e;
    day = (unsigned)strtoul(p, &e, 10);
    if (*e++ != ' ' || strlen(e) < 4) return 0;
    memcpy(name, e, 3);
    year = (unsigned)strtoul(e + 3, &e, 10);
    h = (unsigned)strtoul(e, &e, 10);
    if (*e++ != ':') return 0;
    m = (unsigned)strtoul(e, &e, 10);
    if (*e++ != ':') return 0;
    sec = (unsigned)strtoul(e, &e, 10);
    const char *at = strstr(months, name);
    if (!at || (at - months) % 3 || day < 1 || day > 31 || year < 1970 || year > 9999 || h > 23 || m > 59 || sec > 60)
        return 0;
    uint64_t month = (uint64_t)(at - months) / 3 + 1;
    // Days from the civil date (Howard Hinnant's algorithm), as the Rust SDK counts them.
    uint64_t y = month <= 2 ? year - 1 : year, mo = month <= 2 ? month + 9 : month - 3;
    uint64_t era = y / 400, yoe = y % 400, doy = (153 * mo + 2) / 5 + day - 1;
    uint64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy, days = era * 146097 + doe;
    if (days < 719468) return 0;
    return (days - 719468) * 86400 + h * 3600 + m * 60 + sec;
}

// A 429 or 503 answer snoozes the run until its Retry-After (seconds, or an HTTP date counted from
// the answer's Date: a C handler has no wall clock without WASI preview 1; 10 s without them, at most
// 30 days) and sets *snoozed: the handler then returns ok (th_ok(ret, NULL)) and the
// task runs again then, using no attempt. Any other answer leaves *snoozed false. False with err
// when the host refused the snooze.
static bool th_snooze_if_busy(const th_response *r, bool *snoozed, th_error *err) {
    *snoozed = false;
    if (r->status != 429 && r->status != 503) return true;
    const uint64_t longest = 30ull * 24 * 3600;
    uint64_t secs = 10;
    char *e;
    unsigned long long n = strtoull(r->retry_after, &e, 10);
    if (r->retry_after[0] >= '0' && r->retry_after[0] <= '9' && *e == 0) {
        secs = n;
    } else if (r->retry_after[0]) {
        uint64_t at = th__http_date(r->retry_after), now = th__http_date(r->date);
        if (at && now) secs = at > now ? at - now : 0;
    }
    *snoozed = true;
    return th_snooze((secs < longest ? secs : longest) * 1000, err);
}

#endif
