"""What an INSERT into SQLite's `taskhost_add` view costs against a plain INSERT of the same rows.

Usage: python3 bench/sql-add-sqlite.py DATABASE_FILE   (a file `taskhost migrate` made; bench/sql-add.sh)
       SQLITE_TEMP_STORE=memory python3 bench/sql-add-sqlite.py FILE   (the connection's temp_store)

Each kind of call against the INSERTs of the rows it writes (the task; with `after`, its dependency
too), two ways: each committed in its own transaction, and many in one. The kinds alternate with
their INSERTs, twice, in one connection. Values are bound, as an application binds them: a statement
whose text changes is compiled again, and the view's is compiled with its triggers (about 0.6 ms).
"""
import os
import sqlite3
import sys
import time

NOW = "strftime('%Y-%m-%d %H:%M:%f', 'now') || '000'"
ROW = "(queued_on, scheduled_on, task_handler_class, task_data{cols}) VALUES ({now}, {now}, 'noop', '{{\"n\": 1}}'{vals})"
DATA = '{"n": 1}'


def insert(cols="", vals=""):
    return "INSERT INTO task_queue " + ROW.format(cols=cols, vals=vals, now=NOW)


conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("PRAGMA journal_mode = WAL")
if os.environ.get("SQLITE_TEMP_STORE"):
    conn.execute(f"PRAGMA temp_store = {os.environ['SQLITE_TEMP_STORE']}")
conn.execute("BEGIN IMMEDIATE")
conn.execute(insert())
first = conn.execute("SELECT last_insert_rowid()").fetchone()[0]
conn.execute("COMMIT")
n = [0]


def unique():
    n[0] += 1
    return f"u{n[0]}"


KINDS = [
    ("no options",
     lambda: [("INSERT INTO taskhost_add (handler, data) VALUES (?, ?)", ("noop", DATA))],
     lambda: [(insert(), ())]),
    ("queue, priority",
     lambda: [("INSERT INTO taskhost_add (handler, data, queue, priority) VALUES (?, ?, ?, ?)", ("noop", DATA, "mail", 5))],
     lambda: [(insert(", queue, priority", ", ?, ?"), ("mail", 5))]),
    ("unique_key",
     lambda: [("INSERT INTO taskhost_add (handler, data, unique_key) VALUES (?, ?, ?)", ("noop", DATA, unique()))],
     lambda: [(insert(", unique_key, active_unique_key", ", ?1, ?1"), (unique(),))]),
    ("after one task",
     lambda: [('INSERT INTO taskhost_add (handler, data, "after") VALUES (?, ?, ?)', ("noop", DATA, f"[{first}]"))],
     lambda: [(insert(", last_status, waiting_for", ", 'waiting', -1"), ()),
              ("INSERT INTO task_deps (task_id, after_id, met) VALUES (last_insert_rowid(), ?, -1)", (first,))]),
]


def each(statements, count):
    start = time.perf_counter()
    for _ in range(count):
        conn.execute("BEGIN IMMEDIATE")
        for sql, args in statements():
            conn.execute(sql, args)
        conn.execute("COMMIT")
    return (time.perf_counter() - start) / count * 1e3


def batch(statements, count):
    start = time.perf_counter()
    conn.execute("BEGIN IMMEDIATE")
    for _ in range(count):
        for sql, args in statements():
            conn.execute(sql, args)
    conn.execute("COMMIT")
    return (time.perf_counter() - start) / count * 1e3


print(f"{'call':18} {'rep':>3} | committed each: add ms, INSERT ms, ratio | 20,000 in one transaction: add ms, INSERT ms, ratio")
for rep in (1, 2):
    for name, add, plain in KINDS:
        e_plain, e_add = each(plain, 2000), each(add, 2000)
        b_plain, b_add = batch(plain, 20000), batch(add, 20000)
        print(f"{name:18} {rep:>3} | {e_add:.4f} {e_plain:.4f} {e_add / e_plain:.2f}x"
              f" | {b_add:.4f} {b_plain:.4f} {b_add / b_plain:.2f}x", flush=True)
