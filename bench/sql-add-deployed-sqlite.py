"""One kind of statement on SQLite for bench/sql-add-deployed.sh: 2,000 each committed on its own,
then 20,000 in one transaction; the microseconds a statement of each.

Usage: python3 bench/sql-add-deployed-sqlite.py FILE insert|add LABEL REP
(`noop` is given a release row first, as a deploy would: the check then finds it.)
"""
import sqlite3
import sys
import time

NOW = "strftime('%Y-%m-%d %H:%M:%f', 'now') || '000'"
SQL = {
    "insert": "INSERT INTO task_queue (queued_on, scheduled_on, task_handler_class, task_data) "
    f"VALUES ({NOW}, {NOW}, ?, ?)",
    "add": "INSERT INTO taskhost_add (handler, data) VALUES (?, ?)",
}

path, kind, label, rep = sys.argv[1:5]
conn = sqlite3.connect(path, isolation_level=None)
conn.execute("PRAGMA journal_mode = WAL")
if not conn.execute("SELECT 1 FROM task_handler_releases WHERE handler = 'noop'").fetchone():
    conn.execute(
        "INSERT INTO task_handler_releases (handler, digest, released_on, released_by, action) "
        f"VALUES ('noop', 'bench', {NOW}, 'bench', 'deploy')"
    )
sql, args = SQL[kind], ("noop", '{"n": 1}')
start = time.perf_counter()
for _ in range(2000):
    conn.execute(sql, args)
each = (time.perf_counter() - start) / 2000 * 1e6
conn.execute("BEGIN IMMEDIATE")
start = time.perf_counter()
for _ in range(20000):
    conn.execute(sql, args)
many = (time.perf_counter() - start) / 20000 * 1e6
conn.execute("COMMIT")
print(f"rep {rep}  {label}: each committed {each:.1f} µs, many in one transaction {many:.1f} µs a statement")
